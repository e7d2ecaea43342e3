# Attention from Scratch: every command a learner or an instructor needs.
# All targets are idempotent; `make setup` is quick once the environment exists.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to run as root unless told; learners are not root, CI is.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
PORT ?= 8888

.PHONY: setup lab formgrader test release build lint slides grade check feedback restore hostile hub hub-install clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Python 3.11+ is needed, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e . 2>&1 | grep -v "is ignored: it is neither" || true
	$(BIN)/python -c "import helpers, torch, nbgrader, ipywidgets, jupyterlab"
	touch $(STAMP)

# For learners: the lessons in JupyterLab, without nbgrader's instructor tools or the news pop-up
# (their settings: hub/classhub.py, role "learner").
LEARNER_CONFIG := $(VENV)/jupyter-roles/learner
lab: setup
	$(BIN)/python hub/classhub.py roles $(VENV)/jupyter-roles
	JUPYTER_CONFIG_PATH="$(CURDIR)/$(LEARNER_CONFIG)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(ALLOW_ROOT) $(LAB_ARGS)

# For instructors: JupyterLab on the repository with nbgrader's formgrader (course root grading/)
# and all of nbgrader's tools.
formgrader: build
	$(BIN)/jupyter lab --port=$(PORT) --ServerApp.default_url=/formgrader $(ALLOW_ROOT) $(LAB_ARGS) \
		--notebook-dir="$$($(BIN)/python -c 'from helpers.grading.settings import server_root; print(server_root())')"

# Solution notebooks (git-ignored) built from the jupytext sources in solutions/.
build: setup
	$(BIN)/python -m helpers.build solutions

release: setup
	$(BIN)/python -m helpers.build release

# Offline reveal.js decks of every lesson (or of one: LESSON=07_transformer), executed from the
# solution notebooks: build/slides/
slides: build
	$(BIN)/python -m helpers.slides build/slides $(LESSON)

# Autograde a class: make grade LESSON=02_attention_lookup SUBMISSIONS=path/to/submissions
# (nbgrader's submitted/ layout or a flat folder of downloaded .ipynb/.zip files; on a class hub
# SUBMISSIONS=exchange collects them first) [STUDENT=id] [DUE="2026-03-01 23:59 UTC"].
# Everything goes to the course root grading/.
WORKERS ?= 2
grade: build
	@test -n "$(LESSON)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade LESSON=NN_topic SUBMISSIONS=folder [STUDENT=id] [DUE=date]"; exit 2; }
	$(BIN)/python -m helpers.grading.autograde $(LESSON) "$(SUBMISSIONS)" --workers $(WORKERS) \
		$(if $(STUDENT),--student "$(STUDENT)") $(if $(DUE),--due "$(DUE)")

# Feedback pages again from the gradebook (hand grades and comments included; no student code
# runs), plus one zip per student in grading/return/LESSON/ for a learning platform; on a class
# hub RELEASE=1 also hands them to the students through the exchange.
feedback: setup
	@test -n "$(LESSON)" || { echo "usage: make feedback LESSON=NN_topic [RELEASE=1]"; exit 2; }
	$(BIN)/python -m helpers.grading.autograde $(LESSON) --feedback --zip $(if $(RELEASE),--release)

# For a learner working alone: grade your own saved notebook as an instructor would (hidden tests,
# sandbox, feedback page), in a course root of its own (.selfcheck/): make check LESSON=NN_topic
# [NOTEBOOK=path/to/file.ipynb]
check: build
	@test -n "$(LESSON)" || { echo "usage: make check LESSON=NN_topic [NOTEBOOK=path/to/file.ipynb]"; exit 2; }
	$(BIN)/python -m helpers.grading.selfcheck $(LESSON) $(NOTEBOOK)

# Take back the hold for review of one student's score: make restore LESSON=NN_topic STUDENT=id
restore: setup
	@test -n "$(LESSON)" -a -n "$(STUDENT)" || { echo "usage: make restore LESSON=NN_topic STUDENT=id"; exit 2; }
	$(BIN)/python -m helpers.grading.autograde $(LESSON) --restore "$(STUDENT)"

# The slow hostile submissions (fork bomb, endless output) against the sandboxed grader.
hostile: build
	$(BIN)/python -m pytest tests/test_bombs.py -m bombs -p no:cacheprovider

# A class on one JupyterHub (run as root): make hub ROSTER=class.csv [HUB_PORT=8000]
# [HUB_PREFIX=/srv/attention-from-scratch] [HUB_EXCHANGE=/srv/nbgrader/exchange]; see the README,
# "Running a class on a hub". The hub runs in the foreground; Ctrl-C stops it and every server.
HUB_PREFIX   ?= /srv/attention-from-scratch
HUB_ENV      ?= $(HUB_PREFIX)/env
HUB_EXCHANGE ?= /srv/nbgrader/exchange
HUB_PORT     ?= 8000
HUB_IP       ?= 0.0.0.0
export HUB_PREFIX HUB_ENV HUB_EXCHANGE HUB_PORT HUB_IP
HUB_NEEDS_ROOT = test "$$(id -u)" = 0 || { echo "make hub needs root: it creates accounts and starts servers as them (sudo make hub ...)"; exit 2; }
hub-install:
	@$(HUB_NEEDS_ROOT)
	hub/install.sh $(HUB_PREFIX)

hub:
	@test -n "$(ROSTER)" || { echo "usage: sudo make hub ROSTER=class.csv [HUB_PORT=8000] (hub/roster.example.csv shows the columns)"; exit 2; }
	@$(HUB_NEEDS_ROOT)
	hub/install.sh $(HUB_PREFIX)
	$(HUB_ENV)/bin/python hub/roster.py "$(ROSTER)"
	mkdir -p -m 700 $(HUB_PREFIX)/state
	cd $(HUB_PREFIX)/state && exec $(HUB_ENV)/bin/jupyterhub -f $(CURDIR)/hub/jupyterhub_config.py

lint: setup
	$(BIN)/ruff check helpers tests solutions hub

test: setup lint build
	$(BIN)/python -m pytest tests solutions --nbval-lax --nbval-current-env -p no:cacheprovider

clean:
	rm -rf build solutions/*/*.ipynb
