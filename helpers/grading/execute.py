"""How grading runs a submission: nbgrader's Execute, in the sandbox, robust to what a
submission can do to its kernel, and loud when the machinery itself fails.

Every path that runs students' code goes through ``GuardedExecute``: ``make grade``,
``nbgrader autograde`` from the command line and the formgrader's Autograde button all read the
course's nbgrader settings (``helpers.grading.settings.configure``), which name it as the
executing preprocessor. So every graded kernel is forked by a warm server
(``helpers.grading.warmkernel``) inside the sandbox (``helpers.grading.sandbox``): no network,
the course root (gradebook, every submission), ``solutions/`` and the exchange hidden.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path
from queue import Empty

from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_hook, run_sync
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Integer, List, Unicode

from .sandbox import kernel_environment, private_process
from .warmkernel import NO_FIGURES, font_cache


class GradingMachineryError(KeyboardInterrupt):
    """The grading machinery failed, not the student: a kernel that cannot start, or the
    course's own setup cell failing before any student code ran.

    It derives from ``KeyboardInterrupt`` because that is what nbgrader lets through: the whole
    run stops (``nbgrader autograde`` exits non-zero) instead of recording the same failure
    as a zero for every student that follows, and no score is saved for this one.
    """


# Errors a grading run writes into a cell it had to give up on: the kernel died in it, or it
# did not stop when interrupted at the time limit. The report lists the cells by these names.
KERNEL_DIED, UNSTOPPABLE = "DeadKernelError", "CellTimeoutError"
TIME_LIMIT_ERRORS = ("KeyboardInterrupt", UNSTOPPABLE)
TRUNCATED = "[output truncated"  # how a cell's output past the cap is marked


class GuardedExecute(Execute):
    """nbgrader's execution, sandboxed, and robust to what a submission can do to its kernel.

    - **Sandbox.** Kernels are forked by a warm server of this process whose kernels enter
      ``helpers.grading.sandbox`` before running anything; the course root (the folder of the
      gradebook: every submission, the hidden tests) and ``hidden_paths`` are out of sight.
      Where the machine allows no sandbox, kernels still run and a warning says so loudly.
    - **Output cap.** A cell printing gigabytes would make the grading process hold all of it in
      memory; past the cap, outputs are dropped (the cell still runs until the time limit).
    - **Recovery.** When the kernel dies in a cell (``os._exit``, a crash) or a cell does not
      stop when interrupted at the time limit (a fork bomb, ``except: pass`` around an endless
      loop), nbgrader would give up on the whole notebook. Here that cell gets an error saying
      what happened, a new kernel runs the cells above it again (silently), and execution goes
      on with the next cell: the submission loses the points of the cells that needed the lost
      one, and only those. After ``max_restarts`` such cells the rest is not run.
    - **No figures drawn for nothing.** A grader reads scores, not plots: unless ``figures`` is
      set, a figure a cell shows is recorded as its one-line text (``<Figure size … with 1
      Axes>``) instead of being rendered to an image, which was most of the time a lesson took
      to grade. The figure is still built, so code that fails while plotting still fails.
    - **Machinery failures.** A kernel that cannot start, or the course's locked setup cells
      failing before any student code has run, raise ``GradingMachineryError``: nothing of the
      submission is scored.
    """

    max_output_bytes = Integer(2_000_000, help="output kept per cell, in bytes").tag(config=True)
    max_restarts = Integer(3, help="new kernels allowed per notebook").tag(config=True)
    sandbox = Bool(True, help="run every kernel in helpers.grading.sandbox").tag(config=True)
    warm = Bool(True, help="fork kernels from a server that imported the libraries once").tag(config=True)
    hidden_paths = List(Unicode(), help="folders and files kernels must not see, besides the "
                        "course root and solutions/").tag(config=True)
    figures = Bool(False, help="render the figures cells show (off: their text only)").tag(config=True)
    # Nothing of a graded kernel is kept: stop it at once rather than ask it to shut down.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate").tag(config=True)

    async def async_start_new_kernel(self, **kwargs):
        # Only what the allow-list keeps (helpers.grading.sandbox.kernel_environment): the
        # grader's tokens and HOME never reach students' code, sandboxed or not.
        env = kernel_environment(kwargs.get("env") or os.environ, home=self._kernel_home())
        kwargs["env"] = {**env, NO_FIGURES: "1"} if not self.figures else env
        return await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)

    async def async_start_new_kernel_client(self):
        """nbclient's kernel client, ready as soon as the kernel answers: without jupyter_client's
        last wait for IOPub to fall quiet (0.2 s of every notebook). Replies are matched to their
        request, so an early status message cannot be taken for a cell's output."""
        try:
            self.kc = self.km.client()
            await ensure_async(self.kc.start_channels())
            await _answered(self.kc, self.startup_timeout)
        except Exception as err:
            self.log.error(f"Error occurred while starting new kernel client for kernel "
                           f"{getattr(self.km, 'kernel_id', None)}: {err}")
            await self._async_cleanup_kernel()
            raise
        self.kc.allow_stdin = False
        await run_hook(self.on_notebook_start, notebook=self.nb)
        return self.kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def _kernel_home(self) -> str:
        """This notebook's kernels' HOME: a folder of their own, removed after the notebook
        (a sandboxed kernel's is its private /tmp instead)."""
        if not getattr(self, "_home", None):
            self._home = tempfile.mkdtemp(prefix="grading-home-")
            font_cache(Path(self._home, ".cache", "matplotlib"))  # where matplotlib looks under HOME
        return self._home

    def preprocess(self, nb, resources=None, km=None):
        private_process()
        try:
            return self._preprocess(nb, resources, km)
        finally:
            if getattr(self, "_home", None):
                shutil.rmtree(self._home, ignore_errors=True)
                self._home = None

    def _preprocess(self, nb, resources, km):
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._course_root = _root_of(self.resources)
        cells, lost, start, restarts = self.nb.cells, set(), 0, 0
        while start < len(cells):
            current, started = start, False
            try:
                with self.setup_kernel():
                    info = self.wait_for_reply(self.kc.kernel_info())
                    if info is None:
                        raise RuntimeError("the kernel did not answer its first request")
                    started = True
                    self.nb.metadata["language_info"] = info["content"]["language_info"]
                    for current in range(start):
                        if current not in lost and not _time_limited(cells[current]):
                            self._replay(cells[current])
                    for current in range(start, len(cells)):
                        self.preprocess_cell(cells[current], resources, current)
                        _check_course_cell(cells, current)
                    start = len(cells)
            except GradingMachineryError:
                raise
            except (DeadKernelError, CellTimeoutError) as err:
                if not started:
                    raise GradingMachineryError(f"a grading kernel could not start: {err!r}") from err
                died = isinstance(err, DeadKernelError)
                lost.add(current)
                cells[current].setdefault("outputs", []).append(_lost_output(died, self.timeout))
                restarts += 1
                start = max(start, current + 1)
                self.km = self.kc = None
                if restarts > self.max_restarts:
                    for cell in cells[start:]:
                        if cell.cell_type == "code":
                            cell.outputs = [_not_run_output(restarts)]
                    start = len(cells)
            except Exception as err:  # noqa: BLE001 -- anything before the first cell is ours
                if started:
                    raise
                raise GradingMachineryError(f"a grading kernel could not start: {err!r}") from err
        self.set_widgets_metadata()
        return self.nb, self.resources

    def create_kernel_manager(self):
        """A kernel manager for a kernel forked by this process's warm server, sandboxed."""
        if not (self.sandbox or self.warm):
            return super().create_kernel_manager()
        from jupyter_client.kernelspec import KernelSpecManager

        from .warmkernel import KERNEL_NAME

        server = _server(self._policy() if self.sandbox else None, self._course_root, self.log)
        self.kernel_name = KERNEL_NAME
        self.km = self.kernel_manager_class(
            kernel_name=KERNEL_NAME, config=self.config,
            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(server.spec_dir / "kernels")]))
        if server.ipc is not None:  # a sandboxed kernel has no network: Unix sockets
            self.km.transport = "ipc"
            self.km.ip = str(server.ipc / f"k{next(_SOCKET_IDS)}")
        return self.km

    def _policy(self):
        from ..paths import ROOT
        from . import sandbox

        grading_root = self._course_root or str(ROOT / "solutions")  # no course root: hide nothing more
        return sandbox.course_policy(ROOT, Path(grading_root), hide=tuple(
            p for p in self.hidden_paths if os.path.exists(p)))

    def _replay(self, cell) -> None:
        """Run a cell again in a new kernel to rebuild its state, without recording anything."""
        if cell.cell_type != "code" or not cell.source.strip():
            return
        msg_id = self.kc.execute(cell.source, silent=True, store_history=False, allow_stdin=False)
        self.wait_for_reply(msg_id, cell)

    def output(self, outs, msg, display_id, cell_index):
        if self.output_hook_stack[msg["parent_header"].get("msg_id")]:
            return super().output(outs, msg, display_id, cell_index)
        size = sum(len(str(o.get("text", ""))) + len(str(o.get("data", ""))) for o in outs)
        if size <= self.max_output_bytes:
            out = super().output(outs, msg, display_id, cell_index)
            if out is None or size + len(str(out.get("text", ""))) <= self.max_output_bytes:
                return out
            if out.get("output_type") == "stream":  # one huge message: keep its beginning
                out["text"] = out["text"][: self.max_output_bytes - size]
        if not outs or not is_cap_marker(outs[-1]):  # a display, so that no stream absorbs it
            outs.append(new_output("display_data", data={"text/plain": (
                f"{TRUNCATED}: this cell printed more than {self.max_output_bytes:,} bytes]")}))
        return None


async def _answered(kc, timeout: float) -> None:
    """Wait until the kernel has answered ``kernel_info`` on its shell channel and its IOPub
    channel delivers (ZeroMQ connects a subscriber late: a kernel may answer before its first
    broadcast can arrive); raise if it dies or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        kc.kernel_info()
        try:
            reply = await ensure_async(kc.shell_channel.get_msg(timeout=1))
        except Empty:
            reply = None
        if reply is not None and reply["msg_type"] == "kernel_info_reply":
            try:
                await ensure_async(kc.iopub_channel.get_msg(timeout=0.05))
            except Empty:
                pass
            else:
                kc._handle_kernel_info_reply(reply)
                return
        if not await ensure_async(kc.is_alive()):
            raise RuntimeError("Kernel died before replying to kernel_info")
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


# ------------------------------------------------------------------ warm servers of this process


class _Server:
    def __init__(self, server, spec_dir: Path, ipc: Path | None, folder: Path):
        self.server, self.spec_dir, self.ipc, self.folder = server, spec_dir, ipc, folder


_SERVERS: dict[str, _Server] = {}
_SOCKET_IDS = itertools.count()


def _server(policy, course_root: str, log) -> _Server:
    """This process's warm server for ``policy`` (None: unsandboxed), started on first use and
    stopped when the process ends. Its sockets live in the course root (in a folder of the
    temporary folder if that path is too long for a socket's address), and kernels see them only
    through the folders the policy gives back."""
    from . import sandbox
    from .warmkernel import WarmServer

    key = policy.to_json() if policy is not None else ""
    if key in _SERVERS and _SERVERS[key].server.process.poll() is None:
        return _SERVERS[key]
    base = Path(course_root) if course_root else Path(tempfile.gettempdir())
    folder = base / ".warm" / f"{os.getpid()}-{len(_SERVERS)}"
    # A kernel's sockets are named ipc/kN-PORT in this folder, and a Unix socket's address
    # holds at most 107 bytes: a course deep in folders keeps them in a short folder instead,
    # readable by the grader alone (mode 700).
    if len(os.fsencode(str(folder / "ipc" / "k999999-99999"))) > 100:
        folder = Path(tempfile.mkdtemp(prefix="warm-"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o700)
    prefix = sandbox.launcher() if policy is not None else None
    ipc = None
    if policy is not None and prefix is None:
        log.warning("NOT SANDBOXED: this machine allows neither root nor user namespaces, so "
                    "students' code runs with the grader's rights (files, network)")
        policy = None
    if policy is not None:
        ipc = folder / "ipc"
        ipc.mkdir()
        ipc.chmod(0o1777)  # the kernel, as a user of its own, creates its sockets here
        policy = dataclasses.replace(policy, writable=(*policy.writable, str(ipc)))
    try:
        # Started with the kernels' allow-listed environment (see WarmServer.start): a forked
        # kernel's /proc/self/environ shows what the server was started with.
        server = WarmServer.start(folder, policy=policy, prefix=prefix)
    except RuntimeError as err:
        raise GradingMachineryError(f"the grading kernels' server did not start: {err}") from err
    entry = _Server(server, server.kernelspec(folder / "share"), ipc, folder)
    _SERVERS[key] = entry
    return entry


def warm_up(config, course_root: Path) -> None:
    """Start this process's warm server for kernels that will grade notebooks of ``course_root``
    under ``config`` (the course's nbgrader settings), before the first notebook needs it."""
    executor = GuardedExecute(config=config)
    executor._course_root = str(Path(course_root).resolve())
    if executor.sandbox or executor.warm:
        _server(executor._policy() if executor.sandbox else None, executor._course_root, executor.log)


@atexit.register
def stop_servers() -> None:
    """Stop this process's warm servers (they also stop when the process ends)."""
    for entry in _SERVERS.values():
        entry.server.stop()
        shutil.rmtree(entry.folder, ignore_errors=True)
    _SERVERS.clear()


def _root_of(resources) -> str:
    """The course root of the notebook being graded: the folder of nbgrader's gradebook."""
    url = ((resources or {}).get("nbgrader") or {}).get("db_url", "")
    return str(Path(url[len("sqlite:///"):]).resolve().parent) if url.startswith("sqlite:///") else ""


def _check_course_cell(cells, index: int) -> None:
    """Raise ``GradingMachineryError`` if a course cell failed before any student code ran.

    The locked cells at the top of a lesson (the setup cell's imports) are restored by nbgrader
    before grading; when one of them fails and every cell above it is locked too, nothing the
    student wrote has run yet: the environment is broken, not the submission.
    """
    cell = cells[index]
    meta = cell.metadata.get("nbgrader", {})
    if cell.cell_type != "code" or not meta.get("locked") or meta.get("grade"):
        return
    error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
    if error is None or error.get("ename") in TIME_LIMIT_ERRORS:
        return
    above = [c for c in cells[:index] if c.cell_type == "code"]
    if all(c.metadata.get("nbgrader", {}).get("locked") for c in above):
        raise GradingMachineryError(
            f"the course's locked cell {meta.get('grade_id', index)} failed before any student "
            f"code ran: {error.get('ename')}: {str(error.get('evalue', ''))[:300]}")


def is_cap_marker(output) -> bool:
    """Whether ``output`` is the mark that a cell's output was cut at the cap."""
    return output.get("output_type") == "display_data" and \
        str(output.get("data", {}).get("text/plain", "")).startswith(TRUNCATED)


def _time_limited(cell) -> bool:
    return any(o.get("output_type") == "error" and o.get("ename") in TIME_LIMIT_ERRORS
               for o in cell.get("outputs", []))


def _lost_output(died: bool, timeout) -> dict:
    what = ("the kernel died while running this cell (os._exit, a crash, or out of memory)" if died
            else f"this cell ran past the time limit ({timeout} s) and did not stop when interrupted")
    return new_output("error", ename=KERNEL_DIED if died else UNSTOPPABLE,
                      evalue=what + "; a new kernel ran the cells above again and grading went on",
                      traceback=[f"{KERNEL_DIED if died else UNSTOPPABLE}: {what}"])


def _not_run_output(restarts: int) -> dict:
    why = f"not run: the kernel had to be restarted {restarts} times in this notebook"
    return new_output("error", ename="NotRun", evalue=why, traceback=[f"NotRun: {why}"])


