"""A real class hub for the tests: install (hub/install.sh), accounts (hub/roster.py), a running
JupyterHub on loopback, and the browser or HTTP steps a user takes on it. Root only: the hub
creates Linux accounts and starts servers as them."""

from __future__ import annotations

import csv
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import classhub
import pytest
from conftest import ROOT

# The course environment is kept between runs (installing it takes a few minutes); everything
# else — accounts, exchange, gradebook, the hub's state — is made afresh by each run.
HUB_ENV = Path(os.environ.get("HUB_TEST_ENV", "/var/tmp/attention-hub-env"))
SHOTS = ROOT / "build" / "hub-screenshots"


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the class hub test creates Linux accounts and starts servers as them, which "
                    "needs root (CI runs as root); run `sudo make test` to include it")
    for tool in ("useradd", "userdel", "chpasswd", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing on this machine; the class hub needs it")


def free_port_block(n: int = 3) -> int:
    """A port p with p..p+n-1 free on loopback (the hub, its API and the proxy's API)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + n >= 65535:
            continue
        try:
            for i in range(1, n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + i))
            return port
        except OSError:
            continue
    raise RuntimeError("no block of free ports on loopback")


@dataclass
class Hub:
    prefix: Path
    exchange: Path
    port: int
    process: subprocess.Popen
    log: Path
    users: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def settings(self) -> classhub.Settings:
        return classhub.Settings(prefix=self.prefix, env=HUB_ENV, exchange=self.exchange, port=self.port)

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def as_user(self, user: str, role: str, *cmd: str, cwd: Path | None = None,
                timeout: int = 600) -> subprocess.CompletedProcess:
        """Run ``cmd`` as ``user`` with the environment the hub gives that user's server (what
        a terminal in their JupyterLab has)."""
        env = {"HOME": pwd.getpwnam(user).pw_dir, "USER": user, "LANG": "C.UTF-8",
               **classhub.user_environment(self.settings, role)}
        return subprocess.run(["runuser", "-u", user, "--", "env", "-i",
                               *[f"{k}={v}" for k, v in env.items()], *cmd],
                              cwd=cwd or self.settings.course, capture_output=True, text=True,
                              timeout=timeout)


def remove_users(names: list[str]) -> None:
    for name in names:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    time.sleep(0.5)
    for name in names:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        classhub.remove_limits(name)


def write_roster(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["username", "role", "password"])
        out.writerows(rows)
    return path


def start_hub(prefix: Path, roster: list[tuple[str, str, str]]) -> Hub:
    """`make hub` as an instructor runs it (install, accounts, the hub), on loopback and a free
    port; raise with the log when the hub does not come up."""
    users = [u for u, _, _ in roster]
    remove_users(users)  # what an interrupted earlier run may have left
    for sub in ("state", "exchange", "course"):
        shutil.rmtree(prefix / sub, ignore_errors=True)
    prefix.mkdir(parents=True, exist_ok=True)
    exchange, port, log = prefix / "exchange", free_port_block(), prefix / "hub.log"
    roster_file = write_roster(prefix / "roster.csv", roster)
    env = {**os.environ, "HUB_ENV": str(HUB_ENV)}
    env.pop("MAKEFLAGS", None)
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "-s", "hub", f"ROSTER={roster_file}", f"HUB_PREFIX={prefix}", f"HUB_EXCHANGE={exchange}",
             f"HUB_PORT={port}", "HUB_IP=127.0.0.1", f"HUB_ENV={HUB_ENV}"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(prefix, exchange, port, process, log, users)
    deadline = time.monotonic() + 1800  # a first install builds the course environment
    while True:
        try:
            with urllib.request.urlopen(f"{hub.url}/hub/api", timeout=5):
                return hub
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_hub(hub)
                raise RuntimeError(f"make hub did not start the hub:\n{hub.log_tail()}") from None
            time.sleep(0.5)


def stop_hub(hub: Hub, remove: bool = True) -> None:
    """Stop the hub (it stops every user's server), then take the test accounts away."""
    if hub.process.poll() is None:
        os.killpg(hub.process.pid, signal.SIGTERM)  # make and the hub it runs
        try:
            hub.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(hub.process.pid, signal.SIGKILL)
            hub.process.wait(10)
    subprocess.run(["pkill", "-KILL", "-f", str(hub.prefix / "proxy")], capture_output=True)
    if remove:
        remove_users(hub.users)


# ------------------------------------------------------------------ a user in the browser

def login(context, hub: Hub, user: str, password: str, shot: str | None = None):
    """Log in through the hub's login page; the page once JupyterLab is up."""
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    if shot:
        page.screenshot(path=str(SHOTS / shot))
    page.click("#login_submit")
    page.wait_for_selector("#jp-main-dock-panel", timeout=240_000)
    return page


def xsrf(context, user: str) -> dict[str, str]:
    """The header a user's own server wants with a POST/PUT from the page."""
    token = next(c["value"] for c in context.cookies()
                 if c["name"] == "_xsrf" and c["path"].startswith(f"/user/{user}"))
    return {"X-XSRFToken": token}


def open_assignments(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    page.wait_for_selector("#assignments", timeout=60_000)
