#!/usr/bin/env bash
# The class hub's shared, read-only pieces under PREFIX (default /srv/attention-from-scratch):
#   env/      one Python environment: the course's helpers (installed, not a checkout), its
#             dependencies, JupyterHub and the idle culler, all pinned in hub/requirements.txt
#   proxy/    configurable-http-proxy from the npm registry (Node from the machine)
#   data/     the shipped trained results (ATTENTION_DATA)
#   jupyter/  each role's Jupyter settings (what of nbgrader a student or instructor sees)
#   course/   the instructors' copy of the course: solutions, gradebook (group attention-instructors)
# Idempotent: dependencies are installed again only when pyproject.toml or hub/requirements.txt
# change; the course's own files are refreshed every time, except those instructors have changed
# in the course copy (kept, and listed). The container image of the
# Kubernetes deployment (hub/z2jh/Dockerfile) runs this same script with COURSE_COPY=no PROXY=no.
#
#   hub/install.sh [PREFIX]    environment: HUB_PYTHON, HUB_ENV, HUB_EXCHANGE, HUB_ROSTER, COURSE_COPY, PROXY
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${1:-${HUB_PREFIX:-/srv/attention-from-scratch}}"
ENV_DIR="${HUB_ENV:-$PREFIX/env}"
EXCHANGE="${HUB_EXCHANGE:-/srv/nbgrader/exchange}"
PY="${HUB_PYTHON:-/usr/bin/python3}"
PROXY_VERSION="5.3.0"
umask 022

say() { printf '[hub/install] %s\n' "$*"; }
# Every account passes through the prefix (its env/ and data/ are the students'); the clone holds
# the hidden tests and must stay closed, so neither may hold the other.
prefix_abs="$(realpath -m "$PREFIX")"
case "$prefix_abs/" in
    "$REPO/"*) say "the prefix $PREFIX is (inside) this clone $REPO: students would reach the clone's hidden tests; give another, e.g. HUB_PREFIX=/srv/attention-from-scratch with the clone elsewhere"; exit 2 ;;
esac
case "$REPO/" in
    "$prefix_abs/"*) say "this clone $REPO is inside the prefix $PREFIX, which every account enters: clone it elsewhere (e.g. /opt/attention-from-scratch)"; exit 2 ;;
esac
mkdir -p "$PREFIX"
chmod 755 "$PREFIX"

# 1. The one course environment. A Python that every account can run (a pyenv under /root is not).
if [ ! -x "$ENV_DIR/bin/python" ]; then
    say "creating the course environment in $ENV_DIR with $PY"
    "$PY" -m venv "$ENV_DIR"
fi
# The course's helpers, from this checkout's files (not a link to it: students must not reach
# the checkout's solutions). Built from a copy, so the checkout gets no build/ folder.
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/helpers" "$REPO/experiments" "$REPO/tooling" "$src/"
pip_install() {
    "$ENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | grep -v "is ignored: it is neither" || true
}
stamp="$ENV_DIR/.requirements-$(cat "$REPO/pyproject.toml" "$REPO/hub/requirements.txt" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
    say "installing the course's dependencies and JupyterHub (a few minutes the first time)"
    pip_install -r "$REPO/hub/requirements.txt" "$src"
    rm -f "$ENV_DIR"/.requirements-*
fi
pip_install --no-deps --force-reinstall "$src"
"$ENV_DIR/bin/python" -c "import helpers.checks, experiments.training, torch, nbgrader, jupyterhub, jupyterhub_idle_culler"
[ -e "$stamp" ] || touch "$stamp"
chmod -R go-w "$ENV_DIR"

# 2. The proxy (not in a Kubernetes user image: there the chart runs its own).
if [ "${PROXY:-yes}" = yes ] && [ ! -x "$PREFIX/proxy/node_modules/.bin/configurable-http-proxy" ]; then
    command -v npm >/dev/null || { say "npm is needed for configurable-http-proxy (apt-get install -y npm)"; exit 2; }
    say "installing configurable-http-proxy $PROXY_VERSION"
    mkdir -p "$PREFIX/proxy"
    npm install --silent --no-audit --no-fund --no-package-lock --prefix "$PREFIX/proxy" \
        "configurable-http-proxy@$PROXY_VERSION" >/dev/null
fi

# 3. Data every lesson reads, and each role's Jupyter settings.
mkdir -p "$PREFIX/data"
cp -r "$REPO/data/." "$PREFIX/data/"
chmod -R a+rX,go-w "$PREFIX/data"
"$ENV_DIR/bin/python" "$REPO/hub/classhub.py" roles "$PREFIX/jupyter" --exchange "$EXCHANGE" \
    --course "$PREFIX/course"

# 4. The nbgrader exchange: everyone writes, nbgrader sets each course folder's own modes.
mkdir -p "$EXCHANGE"
chmod 1777 "$EXCHANGE"
if [ "${COURSE_COPY:-yes}" = yes ]; then
    # The course's folders belong to all instructors (nbgrader's groupshared layout), whoever
    # releases first: any of them can release, collect and return feedback. inbound/: students
    # hand in (write, no listing), instructors read; sticky, so no student renames or removes
    # another's submission.
    getent group attention-instructors >/dev/null || groupadd --system attention-instructors
    course_ex="$EXCHANGE/attention-from-scratch"
    mkdir -p "$course_ex/outbound" "$course_ex/inbound" "$course_ex/feedback"
    chgrp attention-instructors "$course_ex" "$course_ex/outbound" "$course_ex/inbound" "$course_ex/feedback"
    chmod 2775 "$course_ex" "$course_ex/outbound"
    chmod 3773 "$course_ex/inbound"
    chmod 2771 "$course_ex/feedback"
fi

# 5. The instructors' copy of the course (everything but the learner's and grader's own state).
if [ "${COURSE_COPY:-yes}" = yes ]; then
    getent group attention-instructors >/dev/null || groupadd --system attention-instructors
    mkdir -p "$PREFIX/course" "$PREFIX/state"
    chmod 700 "$PREFIX/state"
    # Never the roster (first passwords): neither the one given (HUB_ROSTER) nor a CSV at the top.
    roster_rel=""
    case "${HUB_ROSTER:-}" in "$REPO"/*) roster_rel="./${HUB_ROSTER#"$REPO"/}" ;; esac
    # The course as this checkout ships it goes to course/.shipped; a file of the course copy is
    # replaced only where no instructor changed it since the last install (hub/coursecopy.py).
    shipped="$PREFIX/course/.shipped"
    rm -rf "$shipped"
    mkdir -p "$shipped"
    tar -C "$REPO" --exclude=./.venv --exclude=./.git --exclude=./grading --exclude=./build \
        --exclude=./submitted --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache \
        --exclude=.ruff_cache ${roster_rel:+--exclude="$roster_rel"} \
        --no-wildcards-match-slash --exclude='./*.csv' -cf - . | tar -C "$shipped" -xf -
    "$ENV_DIR/bin/python" "$REPO/hub/coursecopy.py" "$shipped" "$PREFIX/course" "$PREFIX/state/course-manifest.json"
    if [ -n "$roster_rel" ] && [ -e "$PREFIX/course/$roster_rel" ]; then
        rm -f "$PREFIX/course/$roster_rel"
        say "removed the roster that an earlier install had copied into the course: $PREFIX/course/${roster_rel#./}"
    fi
    ln -sfn "$ENV_DIR" "$PREFIX/course/.venv"
    mkdir -p "$PREFIX/course/grading"
    # SQLite makes a new database 0644 whatever the umask: made here, it is the group's from the start
    for shared in gradebook.db .grading.lock; do
        [ -e "$PREFIX/course/grading/$shared" ] || : > "$PREFIX/course/grading/$shared"
    done
    chgrp -R attention-instructors "$PREFIX/course"
    chmod -R u+rwX,g+rwX,o-rwx "$PREFIX/course"
    find "$PREFIX/course" -type d -exec chmod g+s {} +
    # make must see the environment as newer than pyproject.toml, or `make grade` would install
    touch -d "@$(( $(date +%s) - 60 ))" "$PREFIX/course/pyproject.toml"
    touch "$ENV_DIR/.installed"
fi
say "ready: $PREFIX"
