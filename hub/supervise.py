"""Keep the class hub running where systemd does not: start it, and start it again whenever its
process ends without being asked to (a crash, ``kill -9``, the out-of-memory killer).

    python hub/supervise.py --pidfile PIDFILE [--log FILE] [--background] -- COMMAND ...
    python hub/supervise.py --pidfile PIDFILE --stop      # make hub-stop

``--background`` detaches from the terminal (a new session, output to ``--log``): closing the
SSH connection that started it does not stop the hub. SIGTERM or SIGINT (``make hub-stop``,
Ctrl-C) stops the hub and then the supervisor; SIGHUP is ignored. A hub that keeps dying within
a minute of its start is restarted after a growing pause (1 s, doubling up to 60 s).

The hub's own pid is kept beside the supervisor's (``hub.pid``): a supervisor killed with
``kill -9`` leaves its hub running, and both ``--stop`` and a new start find that hub by it and
stop it. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STABLE_S = 60  # a hub that ran this long had started fine: the next restart is immediate


def say(text: str) -> None:
    print(f"[hub/supervise {time.strftime('%Y-%m-%d %H:%M:%S')}] {text}", flush=True)


def _alive(pid: int) -> bool:
    """Is ``pid`` running? A killed process stays a zombie until its parent (here often a
    container's first process) collects it: that counts as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def running(pidfile: Path) -> int | None:
    """The pid of a supervisor still running from ``pidfile``, or None."""
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive(pid) else None


def _started(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot): a pid reused since is another."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _hub_pidfile(pidfile: Path) -> Path:
    return pidfile.with_name("hub.pid")


def orphan(pidfile: Path) -> int | None:
    """The pid of a hub still running though its supervisor is gone, or None."""
    try:
        pid, started = _hub_pidfile(pidfile).read_text().split()[:2]
        if not _alive(int(pid)) or _started(int(pid)) != started:
            return None
    except (OSError, ValueError, IndexError):
        return None
    return None if running(pidfile) else int(pid)


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def stop_orphan(pidfile: Path) -> int | None:
    """Stop a hub whose supervisor died (SIGTERM: it stops its servers; SIGKILL after 90 s)."""
    pid = orphan(pidfile)
    if pid is None:
        return None
    say(f"stopping the hub left running by a supervisor that died (pid {pid})")
    os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, 90):
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, 10)
    _hub_pidfile(pidfile).unlink(missing_ok=True)
    return pid


def stop(pidfile: Path) -> int:
    """``make hub-stop``: the supervisor (which stops its hub), else a hub left without one."""
    pid = running(pidfile)
    if pid:
        print(f"stopping the hub (supervisor {pid})", flush=True)
        os.kill(pid, signal.SIGTERM)
        _wait_gone(pid, 600)
        return 0
    if stop_orphan(pidfile) is None:
        print(f"no hub is running from {pidfile.parent.parent}")
    return 0


def detach(log: Path) -> None:
    """Become a daemon: a child in a new session, stdin from /dev/null, output to ``log``."""
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)


def supervise(command: list[str], pidfile: Path) -> int:
    pidfile.write_text(f"{os.getpid()}\n")
    stopping = False
    child: subprocess.Popen | None = None

    def stop(signum, frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.terminate()  # the hub stops every server it started, then exits

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pause = 1.0
    try:
        while not stopping:
            began = time.monotonic()
            child = subprocess.Popen(command)
            _hub_pidfile(pidfile).write_text(f"{child.pid} {_started(child.pid)}\n")
            say(f"hub started (pid {child.pid})")
            status = child.wait()
            if stopping:
                break
            pause = 1.0 if time.monotonic() - began > STABLE_S else min(pause * 2, 60.0)
            say(f"the hub ended by itself (status {status}); starting it again in {pause:.0f} s")
            time.sleep(pause)
        if child is not None and child.poll() is None:
            try:
                child.wait(90)
            except subprocess.TimeoutExpired:
                child.kill()
        say("stopped")
        return 0
    finally:
        if running(pidfile) == os.getpid():
            pidfile.unlink()
            _hub_pidfile(pidfile).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Keep the class hub running.")
    parser.add_argument("--pidfile", type=Path, required=True)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--background", action="store_true")
    parser.add_argument("--stop", action="store_true", help="stop the hub and its supervisor")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.stop:
        return stop(args.pidfile)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to keep running, after --")
    other = running(args.pidfile)
    if other:
        print(f"the hub is already running under its supervisor (pid {other}); stop it first: "
              "make hub-stop", file=sys.stderr)
        return 2
    stop_orphan(args.pidfile)  # it holds the port and the servers: the new hub could not start
    if args.background:
        log = args.log or args.pidfile.with_suffix(".log")
        print(f"the hub runs in the background; log: {log}; stop it: make hub-stop")
        sys.stdout.flush()
        detach(log)
    return supervise(command, args.pidfile)


if __name__ == "__main__":
    raise SystemExit(main())
