#!/usr/bin/env bash
# The class hub's shared, read-only pieces under PREFIX (default /srv/attention-from-scratch):
#   env/      one Python environment: the course's helpers (installed, not a checkout), its
#             dependencies, JupyterHub and the idle culler, all pinned in hub/requirements.txt
#   proxy/    configurable-http-proxy from the npm registry (Node from the machine)
#   data/     the shipped trained results (ATTENTION_DATA)
#   jupyter/  each role's Jupyter settings (what of nbgrader a student or instructor sees)
#   course/   the instructors' copy of the course: solutions, gradebook (group attention-instructors)
# Idempotent: dependencies are installed again only when pyproject.toml or hub/requirements.txt
# change; the course's own files are refreshed every time. The container image of the
# Kubernetes deployment (hub/z2jh/Dockerfile) runs this same script with COURSE_COPY=no PROXY=no.
#
#   hub/install.sh [PREFIX]    environment: HUB_PYTHON, HUB_ENV, HUB_EXCHANGE, COURSE_COPY, PROXY
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${1:-${HUB_PREFIX:-/srv/attention-from-scratch}}"
ENV_DIR="${HUB_ENV:-$PREFIX/env}"
EXCHANGE="${HUB_EXCHANGE:-/srv/nbgrader/exchange}"
PY="${HUB_PYTHON:-/usr/bin/python3}"
PROXY_VERSION="5.3.0"
umask 022

say() { printf '[hub/install] %s\n' "$*"; }
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
cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/helpers" "$src/"
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
"$ENV_DIR/bin/python" -c "import helpers.checks, torch, nbgrader, jupyterhub, jupyterhub_idle_culler"
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

# 5. The instructors' copy of the course (everything but the learner's and grader's own state).
if [ "${COURSE_COPY:-yes}" = yes ]; then
    getent group attention-instructors >/dev/null || groupadd --system attention-instructors
    mkdir -p "$PREFIX/course"
    tar -C "$REPO" --exclude=./.venv --exclude=./.git --exclude=./grading --exclude=./build \
        --exclude=./submitted --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache \
        --exclude=.ruff_cache -cf - . | tar -C "$PREFIX/course" -xf -
    ln -sfn "$ENV_DIR" "$PREFIX/course/.venv"
    mkdir -p "$PREFIX/course/grading"
    chgrp -R attention-instructors "$PREFIX/course"
    chmod -R u+rwX,g+rwX,o-rwx "$PREFIX/course"
    find "$PREFIX/course" -type d -exec chmod g+s {} +
    # make must see the environment as newer than pyproject.toml, or `make grade` would install
    touch -d "@$(( $(date +%s) - 60 ))" "$PREFIX/course/pyproject.toml"
    touch "$ENV_DIR/.installed"
fi
say "ready: $PREFIX"
