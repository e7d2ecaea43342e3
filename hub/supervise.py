"""Keep the class hub running where systemd does not: start it, and start it again whenever its
process ends without being asked to (a crash, ``kill -9``, the out-of-memory killer).

    python hub/supervise.py --pidfile PIDFILE [--log FILE] [--background] -- COMMAND ...

``--background`` detaches from the terminal (a new session, output to ``--log``): closing the
SSH connection that started it does not stop the hub. SIGTERM or SIGINT (``make hub-stop``,
Ctrl-C) stops the hub and then the supervisor; SIGHUP is ignored. A hub that keeps dying within
a minute of its start is restarted after a growing pause (1 s, doubling up to 60 s).
Standard library only.
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


def running(pidfile: Path) -> int | None:
    """The pid of a supervisor still running from ``pidfile``, or None."""
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Keep the class hub running.")
    parser.add_argument("--pidfile", type=Path, required=True)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--background", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to keep running, after --")
    other = running(args.pidfile)
    if other:
        print(f"the hub is already running under its supervisor (pid {other}); stop it first: "
              "make hub-stop", file=sys.stderr)
        return 2
    if args.background:
        log = args.log or args.pidfile.with_suffix(".log")
        print(f"the hub runs in the background; log: {log}; stop it: make hub-stop")
        sys.stdout.flush()
        detach(log)
    return supervise(command, args.pidfile)


if __name__ == "__main__":
    raise SystemExit(main())
