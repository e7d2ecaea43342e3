# Attention from Scratch: every command a learner or an instructor needs.
# All targets are idempotent; `make setup` is quick once the environment exists.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to run as root unless told; learners are not root, CI is.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
PORT ?= 8888

.PHONY: setup lab formgrader test release build lint slides grade feedback restore hostile clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Python 3.11+ is needed, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e . 2>&1 | grep -v "is ignored: it is neither" || true
	$(BIN)/python -c "import helpers, torch, nbgrader, ipywidgets, jupyterlab"
	touch $(STAMP)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(ALLOW_ROOT)

# For instructors: JupyterLab on the repository with nbgrader's formgrader (course root grading/).
formgrader: build
	$(BIN)/jupyter lab --port=$(PORT) --ServerApp.default_url=/formgrader $(ALLOW_ROOT) \
		--notebook-dir="$$($(BIN)/python -c 'from helpers.grading.settings import server_root; print(server_root())')"

# Solution notebooks (git-ignored) built from the jupytext sources in solutions/.
build: setup
	$(BIN)/python -m helpers.build solutions

release: setup
	$(BIN)/python -m helpers.build release

# Offline reveal.js decks of every lesson, executed from the solution notebooks: build/slides/
slides: build
	$(BIN)/python -m helpers.slides build/slides

# Autograde a class: make grade LESSON=02_attention_lookup SUBMISSIONS=path/to/submissions
# (nbgrader's submitted/ layout or a flat folder of downloaded .ipynb/.zip files) [STUDENT=id]
# [DUE="2026-03-01 23:59 UTC"]. Everything goes to the course root grading/.
WORKERS ?= 2
grade: build
	@test -n "$(LESSON)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade LESSON=NN_topic SUBMISSIONS=folder [STUDENT=id] [DUE=date]"; exit 2; }
	$(BIN)/python -m helpers.grading.autograde $(LESSON) "$(SUBMISSIONS)" --workers $(WORKERS) \
		$(if $(STUDENT),--student "$(STUDENT)") $(if $(DUE),--due "$(DUE)")

# Feedback pages again from the gradebook (hand grades and comments included; no student code
# runs), plus one zip per student in grading/return/LESSON/ for a learning platform.
feedback: setup
	@test -n "$(LESSON)" || { echo "usage: make feedback LESSON=NN_topic"; exit 2; }
	$(BIN)/python -m helpers.grading.autograde $(LESSON) --feedback --zip

# Take back the hold for review of one student's score: make restore LESSON=NN_topic STUDENT=id
restore: setup
	@test -n "$(LESSON)" -a -n "$(STUDENT)" || { echo "usage: make restore LESSON=NN_topic STUDENT=id"; exit 2; }
	$(BIN)/python -m helpers.grading.autograde $(LESSON) --restore "$(STUDENT)"

# The slow hostile submissions (fork bomb, endless output) against the sandboxed grader.
hostile: build
	$(BIN)/python -m pytest tests/test_bombs.py -m bombs -p no:cacheprovider

lint: setup
	$(BIN)/ruff check helpers tests solutions

test: setup lint build
	$(BIN)/python -m pytest tests solutions --nbval-lax --nbval-current-env -p no:cacheprovider

clean:
	rm -rf build solutions/*/*.ipynb
