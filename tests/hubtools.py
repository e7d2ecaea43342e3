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
    log: Path  # what `make hub` printed
    users: list[str]
    checkout: Path  # the clone `make hub` ran from
    roster: Path
    refused: str = ""  # what `make hub` said before the clone and the roster were made private
    scheme: str = "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def supervisor_log(self) -> Path:
        return self.prefix / "state" / "hub.log"

    def make(self, *args: str, timeout: int = 1800, **variables: str) -> subprocess.CompletedProcess:
        """``make ARGS`` in the clone with this hub's settings (and ``variables``), as root."""
        env = {**os.environ, "HUB_ENV": str(HUB_ENV)}
        env.pop("MAKEFLAGS", None)
        settings = {"HUB_PREFIX": self.prefix, "HUB_EXCHANGE": self.exchange, "HUB_PORT": self.port,
                    "HUB_IP": "127.0.0.1", "HUB_ENV": HUB_ENV, **variables}
        return subprocess.run(["make", "-s", "-C", str(self.checkout), *args,
                               *[f"{k}={v}" for k, v in settings.items()]],
                              env=env, capture_output=True, text=True, timeout=timeout)

    @property
    def settings(self) -> classhub.Settings:
        return classhub.Settings(prefix=self.prefix, env=HUB_ENV, exchange=self.exchange, port=self.port)

    def log_tail(self, n: int = 4000) -> str:
        logs = [p.read_text(errors="replace")[-n:] for p in (self.log, self.supervisor_log) if p.exists()]
        return "\n".join(logs)

    def wait_until_up(self, seconds: float = 300, **ssl) -> None:
        """Until the hub answers; raise with the logs when it does not in ``seconds``."""
        import requests

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/hub/api", timeout=5, **ssl).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the hub did not answer at {self.url} in {seconds:.0f} s:\n{self.log_tail()}")

    def as_user(self, user: str, role: str, *cmd: str, cwd: Path | None = None,
                timeout: int = 600) -> subprocess.CompletedProcess:
        """Run ``cmd`` as ``user`` with the environment the hub gives that user's server (what
        a terminal in their JupyterLab has)."""
        env = {"HOME": pwd.getpwnam(user).pw_dir, "USER": user, "LANG": "C.UTF-8",
               **classhub.user_environment(self.settings, role)}
        umask = 0o002 if role == "instructor" else 0o022  # the spawner's, for the role
        return subprocess.run(["runuser", "-u", user, "--", "env", "-i",
                               *[f"{k}={v}" for k, v in env.items()], *cmd],
                              cwd=cwd or self.settings.course, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=lambda: os.umask(umask))

    def login_shell(self, user: str, command: str) -> subprocess.CompletedProcess:
        """``su - user -c command``: what the account can do from any shell on the machine."""
        return subprocess.run(["su", "-", user, "-c", command], capture_output=True, text=True,
                              timeout=120, cwd="/")


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


CHECKOUT_LITTER = ("__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints")
CHECKOUT_TOP_LITTER = {".venv", ".git", "build", "grading", "submitted"}  # at the top only


def clone(prefix: Path) -> Path:
    """A copy of this checkout as a fresh root clone is: readable by every account (a clone in
    /srv or /opt with the usual umask 022), with a ``.git`` whose one commit holds the working
    tree (the hidden tests reachable with ``git show HEAD:solutions/...``)."""
    place = prefix.with_name(prefix.name + "-clone")  # outside the prefix, as a real clone is
    shutil.rmtree(place, ignore_errors=True)
    place.mkdir(mode=0o755, parents=True)
    place.chmod(0o755)
    dest = place / "attention-from-scratch"
    litter = shutil.ignore_patterns(*CHECKOUT_LITTER)

    def ignore(folder, names):
        top = CHECKOUT_TOP_LITTER & set(names) if Path(folder) == ROOT else set()
        return set(litter(folder, names)) | top

    shutil.copytree(ROOT, dest, ignore=ignore)
    git = ["git", "-C", str(dest), "-c", "user.name=course", "-c", "user.email=course@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--no-gpg-sign", "-m", "the course"], check=True)
    for here, _, files in os.walk(dest):
        os.chmod(here, 0o755)
        for name in files:
            path = Path(here) / name
            path.chmod(0o755 if os.access(path, os.X_OK) else 0o644)
    return dest


def start_hub(prefix: Path, roster: list[tuple[str, str, str]]) -> Hub:
    """`make hub` as an instructor runs it (install, accounts, the hub under its supervisor in the
    background), on loopback and a free port, from a world-readable clone with the roster written
    beside it as the shell leaves it (mode 644): first `make hub` must refuse; then the commands it
    names are run, and it starts. Raise with the log when the hub does not come up."""
    users = [u for u, _, _ in roster]
    _stop_supervisor(prefix)  # what an interrupted earlier run may have left
    remove_users(users)
    for sub in ("state", "exchange", "course", "restored"):
        shutil.rmtree(prefix / sub, ignore_errors=True)
    prefix.mkdir(parents=True, exist_ok=True)
    checkout = clone(prefix)
    roster_file = write_roster(checkout / "class.csv", roster)
    roster_file.chmod(0o644)
    hub = Hub(prefix, prefix / "exchange", free_port_block(), prefix / "hub.log", users, checkout,
              roster_file)
    refused = hub.make("hub", f"ROSTER={roster_file}", timeout=120)
    hub.refused = refused.stdout + refused.stderr
    if refused.returncode == 0:
        _stop_supervisor(prefix)
        raise RuntimeError(f"make hub served from a clone every account can read:\n{hub.refused}")
    fixes = [line.split("Fix: ", 1)[1].split() for line in hub.refused.splitlines() if "Fix: " in line]
    for fix in fixes:  # what the instructor is told to run; never anything outside the clone
        assert Path(fix[-1]).is_relative_to(checkout), f"make hub named a fix outside the clone: {fix}"
        subprocess.run(fix, check=True, cwd=checkout)
    made = hub.make("hub", f"ROSTER={roster_file}")  # a first install builds the course environment
    hub.log.write_text(made.stdout + made.stderr)
    if made.returncode:
        stop_hub(hub)
        raise RuntimeError(f"make hub failed:\n{hub.log_tail()}")
    try:
        hub.wait_until_up()
    except RuntimeError:
        stop_hub(hub)
        raise
    return hub


def _stop_supervisor(prefix: Path) -> None:
    pidfile = prefix / "state" / "supervisor.pid"
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        return
    for _ in range(120):
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)


def stop_hub(hub: Hub, remove: bool = True) -> None:
    """Stop the hub (`make hub-stop`: it stops every user's server), then take the test accounts away."""
    stopped = hub.make("hub-stop", timeout=180)
    if stopped.returncode:
        _stop_supervisor(hub.prefix)
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


def session_of(context, hub: Hub):
    """A requests session with the browser context's cookies (usable from other threads)."""
    import requests

    s = requests.Session()
    for c in context.cookies():
        s.cookies.set(c["name"], c["value"], domain="127.0.0.1", path=c["path"])
    s.hub_url = hub.url
    return s


class Terminal:
    """A JupyterLab terminal of ``user``'s server, driven through its websocket as the page's
    xterm drives it: ``["stdin", text]`` in, ``["stdout", text]`` out."""

    def __init__(self, session, user: str):
        import websocket

        base = f"{session.hub_url}/user/{user}"
        xsrf_token = session.cookies.get("_xsrf", path=f"/user/{user}/")
        made = session.post(f"{base}/api/terminals", json={"cwd": ""}, headers={"X-XSRFToken": xsrf_token},
                            timeout=60)
        made.raise_for_status()
        self.name = made.json()["name"]
        cookies = "; ".join(f"{c.name}={c.value}" for c in session.cookies
                            if c.path.startswith(f"/user/{user}"))
        self.ws = websocket.create_connection(
            f"{base.replace('http', 'ws', 1)}/terminals/websocket/{self.name}", cookie=cookies,
            origin=session.hub_url, timeout=30)

    def run(self, command: str, timeout: float = 900) -> tuple[str, int]:
        """Type ``command`` and Enter; what the terminal printed until it finished, and its status."""
        import json as _json
        import re

        from websocket import WebSocketTimeoutException

        self.ws.send(_json.dumps(["stdin", f"{command}; echo \"@@status=$?@@$((6 * 7))\"\r"]))
        out, deadline = "", time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                kind, *rest = _json.loads(self.ws.recv())
            except WebSocketTimeoutException:  # a quiet while: grading prints little
                continue
            if kind == "stdout":  # without the prompt's colours and the window titles
                out += re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", rest[0])
                done = re.search(r"@@status=(\d+)@@42", out)
                if done:
                    return out[:done.start()], int(done.group(1))
        raise TimeoutError(f"the terminal did not finish {command!r} in {timeout} s:\n{out[-3000:]}")

    def close(self) -> None:
        self.ws.close()


def open_assignments(page) -> None:
    item = page.locator(".lm-Menu-itemLabel", has_text="Assignment List")
    for _ in range(3):  # a click that lands while the menu bar is still closing opens nothing
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        try:
            item.wait_for(timeout=10_000)
            break
        except Exception:
            page.keyboard.press("Escape")
    item.click()
    page.wait_for_selector("#assignments", timeout=60_000)
