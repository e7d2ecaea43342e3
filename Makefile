# Attention from Scratch: every command a learner or an instructor needs.
# All targets are idempotent; `make setup` is quick once the environment exists.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to run as root unless told; learners are not root, CI is.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
PORT ?= 8888

.PHONY: setup lab formgrader test test-fast test-kernels release build lint slides grade check feedback export restore hostile hub hub-install hub-stop hub-backup hub-restore hub-uninstall clean

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
# and all of nbgrader's tools (their settings: hub/classhub.py, role "instructor", which also serves
# the formgrader's pages of submissions under a policy that runs no script of theirs).
INSTRUCTOR_CONFIG := $(VENV)/jupyter-roles/instructor
formgrader: build
	$(BIN)/python hub/classhub.py roles $(VENV)/jupyter-roles
	JUPYTER_CONFIG_PATH="$(CURDIR)/$(INSTRUCTOR_CONFIG)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		$(BIN)/jupyter lab --port=$(PORT) --ServerApp.default_url=/formgrader $(ALLOW_ROOT) $(LAB_ARGS) \
		--notebook-dir="$$($(BIN)/python -c 'from helpers.grading.settings import server_root; print(server_root())')"

# Solution notebooks (git-ignored) built from the jupytext sources in solutions/.
build: setup
	$(BIN)/python -m tooling.build

release: setup
	$(BIN)/python -m helpers.grading.release

# Offline reveal.js decks of every lesson (or of one: LESSON=07_transformer), executed from the
# solution notebooks: build/slides/
slides: build
	$(BIN)/python -m tooling.slides build/slides $(LESSON)

# Autograde a class: make grade LESSON=02_attention_lookup SUBMISSIONS=path/to/submissions
# (nbgrader's submitted/ layout or a flat folder of downloaded .ipynb/.zip files; on a class hub
# SUBMISSIONS=exchange collects them first) [STUDENT=id] [DUE="2026-03-01 23:59 UTC"].
# Everything goes to the course root grading/.
WORKERS ?= 2
# One grading run of a course root at a time: instructors sharing a hub's course copy take turns.
GRADING_ROOT := $(or $(ATTENTION_COURSE_ROOT),grading)
# (flock is util-linux's; where it is missing, as on macOS, runs do not wait for each other.)
TAKE_TURNS = $(if $(shell command -v flock 2>/dev/null),mkdir -p $(GRADING_ROOT); flock -n $(GRADING_ROOT)/.grading.lock true || \
	echo "another grading run of this course is going on: waiting for it to finish"; flock $(GRADING_ROOT)/.grading.lock,)
grade: build
	@test -n "$(LESSON)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade LESSON=NN_topic SUBMISSIONS=folder [STUDENT=id] [DUE=date]"; exit 2; }
	@$(TAKE_TURNS) $(BIN)/python -m helpers.grading.autograde $(LESSON) "$(SUBMISSIONS)" --workers $(WORKERS) \
		$(if $(STUDENT),--student "$(STUDENT)") $(if $(DUE),--due "$(DUE)")

# Feedback pages again from the gradebook (hand grades and comments included; no student code
# runs), plus one zip per student in grading/return/LESSON/ for a learning platform; on a class
# hub RELEASE=1 also hands them to the students through the exchange.
feedback: setup
	@test -n "$(LESSON)" || { echo "usage: make feedback LESSON=NN_topic [RELEASE=1]"; exit 2; }
	@$(TAKE_TURNS) $(BIN)/python -m helpers.grading.autograde $(LESSON) --feedback --zip $(if $(RELEASE),--release)

# The gradebook import files of Moodle, Canvas and Blackboard for a lesson, from the gradebook (hand
# grades included), in grading/platforms/LESSON/ (make grade writes them too). A column of your own:
# CANVAS_COLUMN="Lab 2 (4567)", BLACKBOARD_COLUMN="Lab 2 [Total Pts: 15 Score] |123456" (remembered).
export: setup
	@test -n "$(LESSON)" || { echo "usage: make export LESSON=NN_topic [CANVAS_COLUMN=...] [BLACKBOARD_COLUMN=...]"; exit 2; }
	@$(TAKE_TURNS) $(BIN)/python -m helpers.grading.platforms $(LESSON) $(if $(CANVAS_COLUMN),--canvas-column "$(CANVAS_COLUMN)") \
		$(if $(BLACKBOARD_COLUMN),--blackboard-column "$(BLACKBOARD_COLUMN)")

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
# [HUB_PREFIX=/srv/attention-from-scratch] [HUB_EXCHANGE=/srv/nbgrader/exchange]
# [HUB_SSL_CERT=cert.pem HUB_SSL_KEY=key.pem]; see docs/hub.md. Where
# systemd runs, the hub is the service attention-hub (back after a reboot); elsewhere a supervisor
# keeps it running in the background (HUB_FOREGROUND=1: in this terminal, Ctrl-C stops it).
HUB_PREFIX   ?= /srv/attention-from-scratch
HUB_ENV      ?= $(HUB_PREFIX)/env
HUB_EXCHANGE ?= /srv/nbgrader/exchange
HUB_PORT     ?= 8000
HUB_IP       ?= 0.0.0.0
HUB_SSL_CERT ?=
HUB_SSL_KEY  ?=
export HUB_PREFIX HUB_ENV HUB_EXCHANGE HUB_PORT HUB_IP HUB_SSL_CERT HUB_SSL_KEY
HUB_NEEDS_ROOT = test "$$(id -u)" = 0 || { echo "make hub needs root: it creates accounts and starts servers as them (sudo make hub ...)"; exit 2; }
HUB_UNIT       := /etc/systemd/system/attention-hub.service
HUB_SUPERVISOR := $(HUB_PREFIX)/state/supervisor.pid
HAS_SYSTEMD    := $(wildcard /run/systemd/system)
hub-install:
	@$(HUB_NEEDS_ROOT)
	hub/install.sh $(HUB_PREFIX)

hub:
	@test -n "$(ROSTER)" || { echo "usage: sudo make hub ROSTER=class.csv [HUB_PORT=8000] (hub/roster.example.csv shows the columns)"; exit 2; }
	@$(HUB_NEEDS_ROOT)
	@$(PYTHON) hub/private.py --roster "$(abspath $(ROSTER))" --clone $(CURDIR)
	HUB_ROSTER="$(abspath $(ROSTER))" hub/install.sh $(HUB_PREFIX)
	$(HUB_ENV)/bin/python hub/roster.py "$(ROSTER)"
	@$(PYTHON) hub/private.py $(HUB_PREFIX)/course $(HUB_PREFIX)/state --clone $(CURDIR) \
		--served $(HUB_PREFIX) --skip $(HUB_ENV) --skip $(HUB_PREFIX)/proxy --skip $(HUB_EXCHANGE)
	mkdir -p -m 700 $(HUB_PREFIX)/state
ifneq ($(HAS_SYSTEMD)$(HUB_FOREGROUND),)
ifeq ($(HUB_FOREGROUND),)
	sed -e 's|@HUB_PREFIX@|$(HUB_PREFIX)|g; s|@HUB_ENV@|$(HUB_ENV)|g; s|@HUB_EXCHANGE@|$(HUB_EXCHANGE)|g' \
	    -e 's|@HUB_PORT@|$(HUB_PORT)|g; s|@HUB_IP@|$(HUB_IP)|g; s|@CHECKOUT@|$(CURDIR)|g' \
	    -e 's|@HUB_SSL_CERT@|$(HUB_SSL_CERT)|g; s|@HUB_SSL_KEY@|$(HUB_SSL_KEY)|g' hub/attention-hub.service > $(HUB_UNIT)
	systemctl daemon-reload
	systemctl enable attention-hub
	systemctl restart attention-hub
	@echo "the hub is the service attention-hub: systemctl status attention-hub; journalctl -u attention-hub"
else
	cd $(HUB_PREFIX)/state && exec $(HUB_ENV)/bin/python $(CURDIR)/hub/supervise.py --pidfile $(HUB_SUPERVISOR) \
		-- $(HUB_ENV)/bin/jupyterhub -f $(CURDIR)/hub/jupyterhub_config.py
endif
else
	@echo "no systemd on this machine: the hub runs under hub/supervise.py, which starts it again if it dies (not after a reboot: run make hub again then)"
	cd $(HUB_PREFIX)/state && $(HUB_ENV)/bin/python $(CURDIR)/hub/supervise.py --pidfile $(HUB_SUPERVISOR) \
		--log $(HUB_PREFIX)/state/hub.log --background -- $(HUB_ENV)/bin/jupyterhub -f $(CURDIR)/hub/jupyterhub_config.py
endif

# Stop the hub (every server with it): the systemd service, or the supervisor (or a hub
# whose supervisor was killed: hub/supervise.py keeps the hub's own pid too).
hub-stop:
	@$(HUB_NEEDS_ROOT)
	@if [ -e $(HUB_UNIT) ]; then systemctl stop attention-hub; \
	else $(PYTHON) hub/supervise.py --pidfile $(HUB_SUPERVISOR) --stop; fi

# The gradebook, grading/, the exchange's course folders and the class's home folders, in one
# archive (root only): make hub-backup [BACKUP=file]; make hub-restore BACKUP=file [HUB_PREFIX=...]
# (the homes into the prefix's restored-homes/; HOMES=1: into the accounts' homes, newer files kept)
hub-backup:
	@$(HUB_NEEDS_ROOT)
	hub/backup.sh backup $(BACKUP)

hub-restore:
	@$(HUB_NEEDS_ROOT)
	@test -n "$(BACKUP)" || { echo "usage: sudo make hub-restore BACKUP=file [HUB_PREFIX=...] [HUB_EXCHANGE=...] [HOMES=1]"; exit 2; }
	HOMES="$(HOMES)" hub/backup.sh restore "$(BACKUP)"

# Remove what make hub installed: the service, the prefix (a backup is taken first, into
# /var/backups), the course's folders in the exchange; with ACCOUNTS=1 the accounts make hub
# created (listed in the prefix's state/accounts-created.txt, which stays until then) and the two
# groups once empty. An environment outside the prefix (HUB_ENV) is left alone.
hub-uninstall:
	@$(HUB_NEEDS_ROOT)
	-@$(MAKE) --no-print-directory hub-stop
	@if [ -d $(HUB_PREFIX)/course/grading ]; then hub/backup.sh backup /var/backups/attention-hub-$$(date -u +%Y%m%dT%H%M%SZ).tar.gz; fi
	@if [ -e $(HUB_UNIT) ]; then systemctl disable attention-hub; rm -f $(HUB_UNIT); systemctl daemon-reload; fi
	@case "$(abspath $(HUB_PREFIX))" in /|/srv|/var|/var/tmp|/opt|/home|/usr|/root) echo "refusing to remove $(HUB_PREFIX)"; exit 2;; esac
	@if [ -n "$(ACCOUNTS)" ]; then $(PYTHON) hub/roster.py --remove-class; fi
	@record=$(HUB_PREFIX)/state/accounts-created.txt; kept=$$(cat $$record 2>/dev/null || true); \
	rm -rf $(HUB_PREFIX) $(HUB_EXCHANGE)/attention-from-scratch; \
	if [ -n "$$kept" ]; then (umask 077; mkdir -p $(HUB_PREFIX)/state; printf '%s\n' "$$kept" > $$record); \
		echo "the class accounts are kept (remove them too: make hub-uninstall ACCOUNTS=1; the list of those make hub created stays in $$record)"; \
	elif [ -z "$(ACCOUNTS)" ]; then echo "the class accounts are kept (remove them too: make hub-uninstall ACCOUNTS=1)"; fi

lint: setup
	$(BIN)/ruff check helpers experiments tooling tests solutions hub

# Both use every core (TEST_WORKERS=0 runs in one process); tests/conftest.py says which tests
# must share a worker (the class hub's files) and starts the longest first.
TEST_WORKERS ?= 2
test: setup lint build
	$(BIN)/python -m pytest tests solutions --nbval-lax --nbval-current-env -p no:cacheprovider \
		-n $(TEST_WORKERS) --durations=20 $(PYTEST_ARGS)
	@echo "the retrained results again, on PyTorch's plainest kernels (ATEN_CPU_CAPABILITY=default):"
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest $(KERNEL_TESTS) -q -p no:cacheprovider -n $(TEST_WORKERS)

# The tests that retrain a result (marked `kernels`): what they check must hold whichever way this
# CPU rounds floats. make test-kernels runs them on two more of PyTorch's kernel paths.
KERNEL_TESTS := -m kernels tests/test_training.py tests/test_rnn_control.py tests/test_scaled_lookup.py \
	tests/test_lesson07_experiments.py tests/test_gpt.py
test-kernels: setup
	for path in default avx2; do echo "ATEN_CPU_CAPABILITY=$$path"; \
		ATEN_CPU_CAPABILITY=$$path $(BIN)/python -m pytest $(KERNEL_TESTS) -q -p no:cacheprovider \
			-n $(TEST_WORKERS) || exit 1; done

# The quick loop while changing a check, a helper or a quiz (about a minute on 2 cores): lint, the
# library's unit tests and every check's bite tests — each known mistake caught and named, each
# correct style passed. No lesson is executed top to bottom, no class graded, no hub or browser:
# `make test` does all of that.
FAST_TESTS := attention block calculator checks_block checks_core checks_cost checks_gpt checks_heads \
	checks_lookup checks_masking checks_patches checks_positional checks_recurrence checks_scaling \
	claims cost environment exercise_order gpt heads hints layout masking mistakes models one_charge \
	own_work patches paths plots positional quiz quiz_balance recurrence rnn_control scaled_lookup \
	scaling sentiment
test-fast: setup lint
	$(BIN)/python -m pytest $(FAST_TESTS:%=tests/test_%.py) -q -p no:cacheprovider -n $(TEST_WORKERS)

clean:
	rm -rf build solutions/*/*.ipynb
