"""Warm kernels for grading: start each notebook's kernel in milliseconds instead of seconds.

Grading a notebook starts a fresh Python kernel, and most of its time goes into starting
Python and importing NumPy, PyTorch and Matplotlib — the same work for every submission. A
*warm server* does that work once, then forks one child per kernel: the child starts from
the already-imported modules and becomes an ordinary, independent ipykernel.

    server = WarmServer.start(folder)      # imports once, listens on folder/warm.sock
    spec_dir = server.kernelspec(folder)   # kernelspec "python3-warm" for nbgrader / nbclient
    ...                                    # Execute.kernel_name = "python3-warm"
    server.stop()

What Jupyter launches is a tiny client (``python -m helpers.grading.warmkernel client CONNECTION``):
it hands its working directory, environment and standard streams to the server, which forks
the kernel; the client then stands in for the kernel process — it forwards interrupts and
exits with the kernel's exit code — so timeouts, interrupts and dead kernels behave exactly
as with a normal kernel. If the client is killed, the server kills its kernel.

Each child re-seeds Python's, NumPy's and PyTorch's random generators from the OS, as a
fresh process would be.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

KERNEL_NAME = "python3-warm"
NO_FIGURES = "ATTENTION_GRADING_NO_FIGURES"  # in a kernel's environment: figures are shown as text
_PR_SET_CHILD_SUBREAPER = 36
_CLONE_NEWPID = 0x20000000
PRELOAD = ("numpy", "matplotlib", "matplotlib.pyplot", "torch", "ipywidgets", "ipykernel.kernelapp",
           "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.debugger",  # what a kernel loads at start
           "torch.fx.experimental.symbolic_shapes",  # torch imports it (and SymPy) on first use of a mask
           "helpers.checks", "helpers.quiz", "helpers.plots", "helpers.widgets")
# ...and every module of the lessons' library and of the shipped experiments (0.1 s in all),
# when a kernel could import them itself (see ``_preload``).
PRELOAD_PACKAGES = ("helpers", "experiments")


def _preload(policy=None) -> None:
    """Import what every kernel would import, and do what torch does on first use once (its
    first masked attention and its first ``torch.load``), in one thread: no thread pool is
    started before the fork.

    The whole library is imported only from a folder that a kernel under ``policy`` sees (the
    course, the Python installation): a module the sandbox hides must fail to import in the
    kernel as it would in a fresh one (an environment set up for another checkout of the course
    is then caught, not graded with that checkout's checks)."""
    import importlib
    import io
    import pkgutil

    for name in PRELOAD:
        importlib.import_module(name)
    packages = [name for name in PRELOAD_PACKAGES if _visible(importlib.import_module(name), policy)]
    while packages:  # not into helpers.grading, the grader's own side (nbformat, nbgrader, …)
        package = importlib.import_module(packages.pop())
        for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if module.name != "helpers.grading":
                importlib.import_module(module.name)
                if module.ispkg:
                    packages.append(module.name)
    import torch
    from torch import nn

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        with torch.no_grad():
            layer(torch.zeros(1, 3, 8), src_key_padding_mask=torch.zeros(1, 3, dtype=torch.bool))
        buffer = io.BytesIO()
        torch.save(layer.state_dict(), buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)
    finally:
        torch.set_num_threads(before)


def _visible(package, policy) -> bool:
    """Whether a kernel under ``policy`` (None: no sandbox) can read ``package``'s folder."""
    if policy is None:
        return True
    folder = os.path.realpath(os.path.dirname(package.__file__))
    return any(folder == k or folder.startswith(k.rstrip("/") + "/")
               for k in map(os.path.realpath, (*policy.keep, *policy.writable)))


def _send(sock: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    payload = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], fds)
    else:
        sock.sendall(payload)


def _recv(sock: socket.socket, with_fds: bool = False):
    if with_fds:
        head, fds, _, _ = socket.recv_fds(sock, 4, 3)
    else:
        head, fds = sock.recv(4), []
    if len(head) < 4:
        return None, fds
    (size,) = struct.unpack("!I", head)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    return json.loads(data), fds


# ------------------------------------------------------------------ the server


@contextlib.contextmanager
def _address(sock_path: str):
    """The address to bind or connect for ``sock_path``. A Unix socket's address holds at most
    107 bytes, less than a course kept deep in a home folder (or a test's temporary folder) may
    need; a longer path is reached through a descriptor of its folder, /proc/self/fd/N/NAME."""
    if len(os.fsencode(sock_path)) <= 100:
        yield sock_path
        return
    folder = os.open(os.path.dirname(sock_path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{folder}/{os.path.basename(sock_path)}"
    finally:
        os.close(folder)


def serve(sock_path: str, policy_file: str | None = None) -> None:
    """Import once, then fork one kernel per request; runs until terminated.

    With ``policy_file`` (a ``helpers.grading.sandbox.Policy`` as JSON), each kernel enters the sandbox
    before it runs anything.
    """
    policy = None
    if policy_file:
        from .sandbox import Policy

        policy = Policy.from_json(Path(policy_file).read_text())
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    _preload(policy)
    # Every object made so far is kept out of the garbage collector's sight: a collection in a
    # kernel would otherwise write to all of them and copy every page the fork shares.
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with _address(sock_path) as address:
        listener.bind(address)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:
        conn, _ = listener.accept()
        request, fds = _recv(conn, with_fds=True)
        if request is None:
            conn.close()
            continue
        if os.fork() == 0:  # a watcher per kernel; the kernel is its child
            listener.close()
            import ctypes

            libc = ctypes.CDLL(None)
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the kernel's children
            # In a user namespace the kernel keeps the grader's user id: a PID namespace of its
            # own (the kernel its first process) then holds everything the kernel starts, which
            # all ends when the kernel ends, and which kill(-1) from the kernel reaches.
            own_pids = policy is not None and not policy.drop_to_nobody \
                and libc.unshare(_CLONE_NEWPID) == 0
            kernel = os.fork()
            if kernel == 0:
                conn.close()
                _become_kernel(request, fds, policy, alone=policy is not None and (
                    policy.drop_to_nobody or own_pids))
            for fd in fds:
                os.close(fd)
            uid = None
            if policy is not None and policy.drop_to_nobody:
                from .sandbox import UID_BASE

                uid = UID_BASE + kernel  # the user id the kernel takes in sandbox.enter
            _watch(conn, kernel, uid)
        for fd in fds:
            os.close(fd)
        conn.close()
        _reap()


def _become_kernel(request: dict, fds: list[int], policy=None, alone: bool = False) -> None:
    """Become the kernel; ``alone``: it has a user id or a PID namespace of its own, so
    ``kill(-1)`` from it reaches only the processes it started."""
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
    os.chdir(request["cwd"])
    from .sandbox import kernel_environment

    # The client's environment through the allow-list again, not the server's (whatever started
    # the client, a kernel sees none of the grader's variables); HOME is the one grading chose.
    os.environ.clear()
    os.environ.update(kernel_environment(request["env"], home=request["env"].get("HOME", "/tmp")))
    os.setsid()  # a session of its own: the scheduler shares CPU between sessions, so a
    # kernel that spawns a hundred busy processes still gets one kernel's share
    connection_file = request["connection_file"]
    if policy is not None:
        from .sandbox import enter

        enter(policy, request["cwd"])
        connection_file = f"/tmp/kernel-{os.getpid()}.json"  # the grader's copy is out of sight
        Path(connection_file).write_text(request["connection"])
    import random

    import numpy as np
    import torch

    random.seed()
    np.random.seed(int.from_bytes(os.urandom(4), "little"))
    torch.seed()
    from ipykernel.kernelapp import IPKernelApp

    sys.argv = ["ipykernel_launcher", "-f", connection_file]
    parent = request["env"].get("JPY_PARENT_PID")  # set by jupyter_client, left out of the environment
    if parent:  # with a parent the kernel also prints no banner on the grader's output
        sys.argv.append(f"--IPKernelApp.parent_handle={parent}")
    try:
        app = IPKernelApp.instance()
        app.initialize(sys.argv[1:])
        if os.environ.get(NO_FIGURES):  # see execute.GuardedExecute.figures
            from matplotlib_inline.config import InlineBackend

            InlineBackend.instance(parent=app.shell).figure_formats = set()
        if policy is not None:
            kernel = os.getpid()
            app.shell.events.register("post_run_cell",
                                      lambda *_: _end_leftover_processes(kernel, alone))
        app.start()
    finally:
        os._exit(0)


def _end_leftover_processes(kernel: int, alone: bool) -> None:
    """After each cell of a sandboxed kernel: end every process the cell left running.

    When the kernel is ``alone`` — a user id of its own (``helpers.grading.sandbox.enter`` as root) or a
    PID namespace of its own (in a user namespace) — ``kill(-1)`` from it reaches exactly the
    processes it started, and their children, all at once: a fork bomb's copies included,
    which would otherwise hold every process slot and leave later cells unable to start a
    thread. Otherwise its descendants are killed one by one. Then the kernel collects its dead
    children. Nothing a lesson does needs a process to outlive its cell. A forked copy of the
    kernel that gets here ends.
    """
    if os.getpid() != kernel:
        os._exit(0)
    if alone:
        try:
            os.kill(-1, signal.SIGKILL)  # never the caller itself
        except ProcessLookupError:
            return  # nothing was running
    else:
        for _ in range(5):
            if not _kill_all_but(keep=-1):
                break
    deadline = time.monotonic() + 2
    while True:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if done == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)


def _descendants(ancestor: int) -> list[int]:
    """Every process below ``ancestor`` (from /proc), nearest first."""
    parent_of = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent_of[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [ancestor]
    while frontier:
        children = [p for p, pp in parent_of.items() if pp in frontier]
        found += children
        frontier = children
    return found


def _kill_all_but(keep: int) -> int:
    """Kill every process below this one except ``keep`` (in a watcher: what the kernel started,
    a fork bomb, a stray worker, adopted here); returns how many."""
    killed = 0
    for pid in _descendants(os.getpid()):
        if pid != keep:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


def _watch(conn: socket.socket, pid: int, uid: int | None = None) -> None:
    """Tell the client how the kernel ended; if the client disappears first, end the kernel.

    On an interrupt (a cell past its time limit) everything the kernel started is killed, so a
    fork bomb stops with its cell instead of slowing every later cell and submission; when the
    kernel ends, whatever it left behind is killed. With the kernel's sandbox user id ``uid``
    that is done for all its processes at once (``helpers.grading.sandbox.stop_all_but``), which a fork
    bomb cannot outrun; without it, process by process.
    """
    from . import sandbox

    def stop_the_rest(keep: int) -> None:
        if uid is None:
            _kill_all_but(keep)
        elif keep == -1:
            sandbox.signal_user(uid, signal.SIGKILL)
        else:
            sandbox.stop_all_but(uid, keep)

    _send(conn, {"pid": pid})
    conn.setblocking(False)
    code = None
    while code is None:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            stop_the_rest(keep=-1)
            break
        try:
            byte = conn.recv(1)
            if byte == b"":  # the client is gone
                os.kill(pid, signal.SIGKILL)
            elif byte == b"i":
                stop_the_rest(keep=pid)
        except BlockingIOError:
            pass
        except OSError:
            os.kill(pid, signal.SIGKILL)
        _reap_adopted(pid)
        time.sleep(0.02)
    try:
        conn.setblocking(True)
        _send(conn, {"exit": code})
    except OSError:
        pass
    _reap_adopted(-1)
    os._exit(0)


def _reap_adopted(kernel: int) -> None:
    """Collect the orphans this watcher adopted as a subreaper, leaving the kernel alone."""
    for pid in _descendants(os.getpid()):
        if pid != kernel:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# ------------------------------------------------------------------ the client


def client(connection_file: str) -> int:
    """Stand in for the kernel process that the server forks for ``connection_file``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with _address(os.environ["WARM_KERNEL_SOCKET"]) as address:
        sock.connect(address)
    env = {k: v for k, v in os.environ.items() if k != "WARM_KERNEL_SOCKET"}
    _send(sock, {"connection_file": os.path.abspath(connection_file), "cwd": os.getcwd(),
                 "connection": Path(connection_file).read_text(), "env": env}, fds=[0, 1, 2])
    first, _ = _recv(sock)
    if not first or "pid" not in first:
        return 1
    kernel = first["pid"]

    def forward(signum, _frame):
        try:
            os.kill(kernel, signum)
            if signum == signal.SIGINT:
                sock.send(b"i")  # the watcher stops whatever the kernel started
        except (ProcessLookupError, OSError):
            pass
        if signum == signal.SIGTERM:
            sys.exit(143)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    while True:
        try:
            message, _ = _recv(sock)
            break
        except InterruptedError:
            continue
    code = (message or {}).get("exit", 1)
    return code if code >= 0 else 128 - code


# ------------------------------------------------------------------ starting and stopping


def font_cache(folder: Path) -> str:
    """``folder`` holding a copy of the grader's matplotlib font list, for MPLCONFIGDIR: without it
    matplotlib scans every font of the machine again in each kernel (about a second per graded
    notebook), and pointing at the grader's own folder would show the grader's home to kernels."""
    import matplotlib

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    for font_list in Path(matplotlib.get_cachedir()).glob("fontlist-*.json"):
        shutil.copy(font_list, folder / font_list.name)
        (folder / font_list.name).chmod(0o644)
    return str(folder)


class WarmServer:
    """A running warm server and the kernelspec that uses it."""

    def __init__(self, process: subprocess.Popen, sock_path: Path):
        self.process, self.sock_path = process, sock_path

    @classmethod
    def start(cls, folder: Path, timeout: float = 300.0, policy=None,
              prefix: list[str] | None = None, env: dict[str, str] | None = None) -> WarmServer:
        """Start a server with its socket in ``folder``; with a sandbox ``policy``, inside the
        namespaces that the command ``prefix`` creates (see ``helpers.grading.sandbox.launcher``).
        ``env``: the server's environment (default: this process's through the kernels'
        allow-list, ``helpers.grading.sandbox.kernel_environment``), e.g. its OMP_NUM_THREADS,
        which fixes the number of threads of every kernel it forks. Every kernel it forks holds
        it in memory (``/proc/self/environ``), so it must hold nothing a kernel may not see."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if env is None:
            from .sandbox import kernel_environment

            env = {**kernel_environment(home=str(folder)), "MPLCONFIGDIR": font_cache(folder / "matplotlib")}
        sock_path = folder / "warm.sock"
        if sock_path.exists():
            sock_path.unlink()
        args = [sys.executable, "-m", "helpers.grading.warmkernel", "serve", str(sock_path)]
        if policy is not None:
            (folder / "policy.json").write_text(policy.to_json())
            args = [*(prefix or []), *args, str(folder / "policy.json")]
        # In its own folder: `python -m` puts the current folder first on sys.path, so the
        # server (and every kernel it forks) imports the course package the environment
        # installs, wherever grading was started from (nbgrader moves to the course root).
        # Its own messages go to a log beside the socket, which a failed start quotes.
        with (folder / "server.log").open("w") as log:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=log, cwd=folder, env=env)
        deadline = time.monotonic() + timeout
        while not sock_path.exists():
            exited = process.poll()
            if exited is not None or time.monotonic() > deadline:
                process.kill()
                said = (folder / "server.log").read_text(errors="replace").strip()[-2000:]
                raise RuntimeError("the warm kernel server did not start" + (
                    f" (it exited with code {exited})" if exited is not None else f" within {timeout:.0f} s")
                    + (f"; it said:\n{said}" if said else ""))
            time.sleep(0.05)
        return cls(process, sock_path)

    def kernelspec(self, folder: Path) -> Path:
        """Write a kernelspec directory ``folder/kernels/python3-warm``; put ``folder`` on
        JUPYTER_PATH to use it. Returns ``folder``."""
        spec = Path(folder) / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True, exist_ok=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "helpers.grading.warmkernel", "client", "{connection_file}"],
            "display_name": "Python 3 (warm, for grading)",
            "language": "python",
            "interrupt_mode": "signal",
            "env": {"WARM_KERNEL_SOCKET": str(self.sock_path)},
        }, indent=1))
        return Path(folder)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if self.sock_path.exists():
            self.sock_path.unlink()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1:2] == ["client"]:
        sys.exit(client(sys.argv[2]))
    else:
        sys.exit("usage: python -m helpers.grading.warmkernel serve SOCKET | client CONNECTION_FILE")
