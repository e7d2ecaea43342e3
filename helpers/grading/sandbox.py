"""The sandbox a submission's kernel runs in while it is graded (Linux).

Grading runs students' code. Without a sandbox it runs with the grader's rights: it could read
the hidden tests in ``solutions/`` and the gradebook, other students' work, the instructor's
home, write anywhere the grader can, and reach the network. Here every graded kernel runs:

- in a **network namespace of its own** with no interface up: no network at all;
- in a **mount namespace of its own** where ``solutions/``, the grading folder (gradebook, every
  submission), nbgrader's leftovers in the repository, the exchange, ``/root`` and ``/home`` are
  hidden behind empty tmpfs mounts (a file behind ``/dev/null``), except for the kernel's own
  working folder and the Python installation; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh
  and private; every other mount (the repository, the Python installation, the rest of the
  disk) is **read-only**. All of it holds wherever the repository lives: under ``/tmp``, in a
  home folder, with a ``.venv`` that is a symbolic link;
- as an unprivileged user id of its own (when the grader is root), which can write only its
  own working folder and the private scratch folders;
- with **resource limits**: address space, processes, file size, open files; plus the
  per-cell timeout of nbgrader;
- with **an environment of its own** (``kernel_environment``): an allow-list of the grader's
  variables (the path, the locale, the course's settings), never its tokens or HOME.

It needs root (as in CI and on a grading server) or unprivileged user namespaces (then the
kernel keeps the grader's user id inside its namespaces, but sees the same hidden folders and
read-only mounts, has no network, runs in a PID namespace of its own that holds everything it
starts, with a /proc of that namespace, and gives up every capability before student code runs).
Where neither works, grading still runs, unsandboxed, and ``status()`` says so.

The kernels are forked by the warm server (``helpers.grading.warmkernel``), which runs inside the
network namespace; each forked kernel enters its own mount namespace, drops to ``nobody`` and
applies the limits before it runs any student code.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Each kernel runs as a user id of its own, 100000 + its process id: no account, no files, and
# per-user limits (the process count) that one submission cannot exhaust for another.
UID_BASE = 100_000
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = \
    1, 2, 4, 32, 4096, 16384, 1 << 18
# Flags a remount must repeat (inside a user namespace it may not drop them).
_KEPT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": 8, "noatime": 1024,
               "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_MS_NOEXEC = 8

# What a graded kernel's environment may hold of the grader's, by name or by prefix: the programs'
# path, the locale and zone, the course's own settings (``ATTENTION_*``: where data and the
# course root are, the grading's markers), nbgrader's markers (``NBGRADER_VALIDATING``), the
# thread counts grading sets per worker, the plotting backend and where Python finds the course.
# Everything else — an instructor's hub token (``JUPYTERHUB_API_TOKEN``, ``JPY_API_TOKEN``),
# cloud keys, ``HOME`` — stays with the grader: a submission can print its environment, and that
# output is shown on its feedback page.
KERNEL_VARIABLES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "MPLBACKEND", "PYTHONPATH", "VIRTUAL_ENV",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES"})
KERNEL_PREFIXES = ("LC_", "ATTENTION_", "NBGRADER_")


@dataclass(frozen=True)
class Limits:
    """Resource limits of a sandboxed kernel."""

    address_space_bytes: int = 8 * 2**30  # PyTorch alone maps a few GB of address space
    processes: int = 96  # tasks (threads too) of the sandbox user: stops fork bombs early
    file_size_bytes: int = 100 * 2**20
    open_files: int = 1024


@dataclass(frozen=True)
class Policy:
    """What a sandboxed kernel may see: ``hide`` folders and files (``hide_files`` too: each is
    hidden as what it is when a kernel starts, and skipped if it is not there), ``keep`` folders
    inside them (read-only), ``writable`` folders (kept too). Everything else it sees is
    read-only as well, except its working folder and private scratch folders."""

    hide: tuple[str, ...] = ()
    hide_files: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    drop_to_nobody: bool = True

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Policy:
        data = json.loads(text)
        data["limits"] = Limits(**data["limits"])
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


# What nbgrader leaves in the folder it runs in: the gradebook (every hidden test), students'
# work, feedback, the exchange and its log. Hidden wherever they turn up in the repository.
NBGRADER_LEFTOVERS = ("gradebook.db", "nbgrader.log", ".nbgrader.log", "grading", "submitted",
                      "autograded", "feedback", "release", "exchange")


def course_policy(repo: Path, grading_root: Path, writable: tuple[str, ...] = (),
                  hide: tuple[str, ...] = ()) -> Policy:
    """The course's policy: hide the hidden tests, the grading folder (gradebook, submissions),
    nbgrader's leftovers in the repository, ``hide`` (more folders or files, e.g. the exchange)
    and the homes; the Python installation and the repository stay readable; ``writable``:
    folders the kernel must write besides its working folder (the sockets it talks over)."""
    repo = Path(os.path.realpath(repo))
    hidden = [repo / "solutions", grading_root, *(repo / name for name in NBGRADER_LEFTOVERS),
              *hide, "/root", "/home"]
    hidden = list(dict.fromkeys(os.path.realpath(p) for p in hidden))
    # The repository stays readable (helpers, data, the environment) wherever it lives, even
    # under /tmp or a home folder; what is hidden inside it stays hidden (see ``enter``).
    keep = [sys.base_prefix, sys.prefix, str(repo)]
    # Listed even when missing: a leftover that turns up while the server runs is hidden too.
    files = [p for p in hidden if os.path.exists(p) and not os.path.isdir(p)]
    return Policy(hide=tuple(p for p in hidden if p not in files), hide_files=tuple(files),
                  keep=tuple(dict.fromkeys(keep)), writable=tuple(writable),
                  drop_to_nobody=os.geteuid() == 0)


def kernel_environment(environ=None, home: str = "/tmp") -> dict[str, str]:
    """The environment a graded kernel starts with: the allow-listed variables of ``environ``
    (default: this process's; see ``KERNEL_VARIABLES``) and ``HOME=home``, nothing else."""
    environ = os.environ if environ is None else environ
    kept = {k: v for k, v in environ.items() if k in KERNEL_VARIABLES or k.startswith(KERNEL_PREFIXES)}
    return {"PATH": os.defpath, **kept, "HOME": home}


def private_process() -> None:
    """Make this grading process's /proc files (its environment, memory) unreadable to other
    processes of its user: a kernel that runs with the grader's user id (no sandbox) cannot read
    the grader's environment. Programs it starts are readable again (``execve`` resets it);
    they get ``kernel_environment``."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


# ------------------------------------------------------------------ can we sandbox here?


def launcher() -> list[str] | None:
    """The command prefix that starts the warm server in new namespaces, or None if impossible."""
    if not sys.platform.startswith("linux") or not shutil.which("unshare"):
        return None
    prefix = ["unshare", "--net", "--ipc"] if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--net", "--ipc", "--mount"]
    probe = subprocess.run([*prefix, sys.executable, "-c",
                            "import ctypes; assert ctypes.CDLL(None).unshare(0x00020000) == 0"],
                           capture_output=True)
    return prefix if probe.returncode == 0 else None


def status() -> str:
    """One line for reports: how submissions' kernels are isolated on this machine."""
    if launcher() is None:
        return ("WARNING: NOT SANDBOXED — this machine allows neither root nor user namespaces, "
                "so students' code runs with the grader's rights (files, network)")
    who = "each as a user id of its own" if os.geteuid() == 0 else "in a user namespace"
    return f"sandboxed: no network, private mounts (tests, gradebook, homes hidden), limits, {who}"


def _process_status():
    """(pid, fields of /proc/PID/status) for every process still there."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        yield int(status.parent.name), dict(line.split(":", 1) for line in lines if ":" in line)


def sandbox_processes(uid: int | None = None) -> list[int]:
    """Live processes (zombies left out) of the sandbox user ``uid``, or of any sandbox user."""
    found = []
    for pid, fields in _process_status():
        try:
            state, owner = fields["State"].split()[0], int(fields["Uid"].split()[0])
        except (KeyError, IndexError, ValueError):
            continue
        if state != "Z" and (owner == uid if uid is not None else owner >= UID_BASE):
            found.append(pid)
    return found


def signal_user(uid: int, signum: int) -> None:
    """Send ``signum`` to every process of user ``uid`` in one step (needs root).

    ``kill(-1, ...)`` sent *as* that user reaches all its processes at once, under the kernel's
    task-list lock, and a fork racing with it hands the signal on to the child: a fork bomb
    cannot outrun it, as it outruns killing process ids one by one. The sender is a short-lived
    child that takes the user id; it is itself spared by ``kill(-1)``.
    """
    if uid < UID_BASE:
        raise ValueError(f"refusing to signal every process of user id {uid}: not a sandbox user")
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signum)
            code = 0
        except OSError:
            pass
        finally:
            os._exit(code)
    os.waitpid(child, 0)


def stop_all_but(uid: int, keep: int) -> int:
    """Kill every process of sandbox user ``uid`` except ``keep``, which is left running.

    All of them are stopped first (``SIGSTOP`` is atomic, see ``signal_user``), so none can fork
    while the others are killed one by one. Returns how many were killed.
    """
    signal_user(uid, signal.SIGSTOP)
    killed: set[int] = set()
    for _ in range(20):
        rest = [pid for pid in sandbox_processes(uid) if pid != keep and pid not in killed]
        if not rest:
            break
        for pid in rest:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
    try:
        os.kill(keep, signal.SIGCONT)
    except ProcessLookupError:
        pass
    return len(killed)


# ------------------------------------------------------------------ entering the sandbox


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(libc, source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


def _mount_points() -> list[tuple[str, set[str]]]:
    """This namespace's mount points with their per-mount options, from /proc/self/mountinfo."""
    found = []
    for line in Path("/proc/self/mountinfo").read_bytes().splitlines():
        fields = line.split()
        # The kernel writes a space, tab, newline or backslash as \ooo (octal), other bytes as they are.
        point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
        found.append((os.fsdecode(point), set(os.fsdecode(fields[5]).split(","))))
    return found


def _under(path: str, folders) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _task_count(uid: int) -> int:
    """Processes and threads of user ``uid`` (the count RLIMIT_NPROC is checked against)."""
    total = 0
    for _, fields in _process_status():
        try:
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (KeyError, IndexError, ValueError):
            continue
    return total


def _real(paths) -> list[str]:
    """``paths`` with every symbolic link resolved, each once, in order."""
    return list(dict.fromkeys(os.path.realpath(p) for p in paths))


def _links_on(path: str) -> list[tuple[str, str]]:
    """The symbolic links met while resolving ``path``, in order: (where it is, what it says)."""
    found, here, todo = [], "/", path.split("/")
    while todo and len(found) < 40:  # as many links as Linux follows: a loop ends here
        part = todo.pop(0)
        if part in ("", "."):
            continue
        step = os.path.dirname(here) if part == ".." else os.path.join(here, part)
        if part != ".." and os.path.islink(step):
            target = os.readlink(step)
            found.append((step, target))
            todo = target.split("/") + todo
            here = "/" if target.startswith("/") else here
        else:
            here = step
    return found


def _private_view(libc, policy: Policy, workdir: str) -> list[str]:
    """Hide, keep and scratch folders as ``policy`` says; returns the folders left writable.

    Paths are compared resolved: a symbolic link to a hidden folder leads to the hidden folder,
    and a kept folder behind a link (``.venv -> /opt/venvs/course``) is kept where it really is,
    while the link stays usable.
    """
    scratch = _real(d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d))
    writable = _real([workdir, *policy.writable])
    kept = _real(policy.keep) + writable
    hidden = [p for p in _real([*policy.hide, *policy.hide_files])
              if os.path.lexists(p) and p not in kept]
    hidden_dirs = [p for p in hidden if os.path.isdir(p)]
    # Kept folders that a hidden or scratch folder covers, and writable ones, come back as
    # mounts of their own: opened now, while they are still in view.
    keep = [k for k in dict.fromkeys(kept) if k in writable or _under(k, [*hidden_dirs, *scratch])]
    fds = {k: os.open(k, os.O_RDONLY | os.O_DIRECTORY) for k in keep if os.path.isdir(k)}
    links = [link for k in (*policy.keep, *policy.writable) for link in _links_on(os.path.abspath(k))]
    originals = {p: (os.stat(p).st_dev, os.stat(p).st_ino) for p in hidden}
    # Deepest first, before any covering folder (/home, /tmp, the grading folder) makes a
    # target disappear: a hidden file or folder inside a kept one (the repository's gradebook
    # and solutions/) is then carried along when that folder is mounted back below.
    for path in sorted(hidden, key=lambda p: p.count("/"), reverse=True):
        if path in hidden_dirs:
            _mount(libc, "tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=4m")
        else:
            _mount(libc, "/dev/null", path, None, _MS_BIND)
    for folder in scratch:  # private, writable scratch space
        _mount(libc, "tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=512m")
    for path in sorted(fds, key=len):  # parents first; the folders needed come back into view
        os.makedirs(path, exist_ok=True)
        _mount(libc, f"/proc/self/fd/{fds[path]}", path, None, _MS_BIND | _MS_REC)
        os.close(fds[path])
    for link, target in links:  # a link that was under a covered folder is made again
        if not os.path.lexists(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(target, link)
    for path, identity in originals.items():  # fail closed: no kernel if anything shows through
        try:
            shown = os.stat(path)
        except OSError:
            continue
        if (shown.st_dev, shown.st_ino) == identity:
            raise PermissionError(errno.EACCES, "the sandbox would not hide this", path)
    return [*scratch, *writable]


def _read_only(libc, writable: list[str]) -> None:
    """Remount every mount read-only but ``writable`` ones and the kernel's file systems."""
    for point, options in _mount_points():
        if "ro" in options or _under(point, ("/proc", "/sys", "/dev")) or point in writable:
            continue
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY
        flags |= sum(bit for name, bit in _KEPT_FLAGS.items() if name in options)
        try:
            _mount(libc, None, point, None, flags)
        except OSError as err:  # a mount hidden under a later one (e.g. the fresh /tmp): gone
            if err.errno not in (errno.EINVAL, errno.ENOENT):
                raise


def _drop_capabilities(libc) -> None:
    """Give up every capability, for good: in a user namespace the kernel is its root, and with
    CAP_SYS_ADMIN it could unmount what hides the hidden tests (or its own /proc) again."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):  # the bounding set: no program it starts gets one back
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(CAPBSET_DROP, {cap})")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable, twice: all empty
    _check(libc.capset(header, data), "capset")


def enter(policy: Policy, workdir: str) -> None:
    """Called in a forked kernel before any student code: private mounts, limits, no root."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)  # our mounts stay ours
    workdir = os.path.realpath(workdir)
    writable = _private_view(libc, policy, workdir)
    if os.getpid() == 1:
        # The first process of a PID namespace of its own (a kernel in a user namespace, see
        # helpers.grading.warmkernel): a /proc of that namespace shows none of the processes
        # outside it, neither the warm server nor the grader. Processes of the grader's own
        # namespace could not be read anyway (Linux lets no process in a user namespace read
        # the environment or memory of one outside it); where this mount is refused, the warm
        # server is the one left in view, and it holds only ``kernel_environment``.
        try:
            _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        except OSError:
            pass
    # Everything else read-only: the repository, the Python installation, the rest of the disk.
    # (As root the kernel drops to a user that could not write there anyway; in a user
    # namespace it keeps the grader's own rights, which these read-only mounts take back.)
    _read_only(libc, writable)
    limits = policy.limits
    processes = limits.processes
    if not policy.drop_to_nobody:  # the grader's user id, whose other processes count too
        processes += _task_count(os.getuid())
    for res, value in ((resource.RLIMIT_AS, limits.address_space_bytes),
                       (resource.RLIMIT_NPROC, processes),
                       (resource.RLIMIT_FSIZE, limits.file_size_bytes),
                       (resource.RLIMIT_NOFILE, limits.open_files),
                       (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(res, (value, value))
    if policy.drop_to_nobody:
        uid = UID_BASE + os.getpid()
        os.chown(workdir, uid, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    else:
        _drop_capabilities(libc)
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    os.environ.update(HOME="/tmp", MPLCONFIGDIR="/tmp/.matplotlib", IPYTHONDIR="/tmp/.ipython",
                      XDG_CACHE_HOME="/tmp/.cache", JUPYTER_RUNTIME_DIR="/tmp/.jupyter")
    os.chdir(workdir)
