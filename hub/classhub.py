"""A class on one JupyterHub: the layout of the hub's folders, who is a student or an
instructor, what each one's server gets, and per-user limits.

``jupyterhub_config.py`` applies ``configure``; ``make hub`` prepares the folders
(``hub/install.sh``) and the accounts (``hub/roster.py``) first. Everything here is plain
JupyterHub: PAM logins of real Linux accounts, the local process spawner, an idle culler as
a hub service, and nbgrader's exchange on a shared folder.

Layout under the prefix (``HUB_PREFIX``, default /srv/attention-from-scratch)::

    env/        the one course environment every server runs from (root-owned, read-only)
    proxy/      configurable-http-proxy from the npm registry
    data/       the shipped trained results; ATTENTION_DATA points here
    jupyter/    Jupyter settings per role: jupyter/student, jupyter/instructor
    course/     the instructors' copy of the course (solutions, gradebook); students cannot enter
    state/      the hub's database, cookie secret and first passwords (root only)
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

COURSE_ID = "attention-from-scratch"
STUDENTS, INSTRUCTORS = "attention-students", "attention-instructors"
ROLES = {"student": STUDENTS, "instructor": INSTRUCTORS}
HERE = Path(__file__).resolve().parent

# nbgrader's JupyterLab plugins and server extensions, by who may see them.
NBGRADER_PLUGINS = {
    "formgrader": "@jupyter/nbgrader:formgrader",
    "create-assignment": "@jupyter/nbgrader:create-assignment",
    "course-list": "@jupyter/nbgrader:course-list",
    "assignment-list": "@jupyter/nbgrader:assignment-list",
    "validate-assignment": "@jupyter/nbgrader:validate-assignment",
}
NBGRADER_SERVER = {
    "formgrader": "nbgrader.server_extensions.formgrader",
    "course-list": "nbgrader.server_extensions.course_list",
    "assignment-list": "nbgrader.server_extensions.assignment_list",
    "validate-assignment": "nbgrader.server_extensions.validate_assignment",
}
# The course's own server extension beside the formgrader (helpers.grading.sanitize).
PAGE_POLICY_SERVER = "helpers.grading.sanitize"
# JupyterLab's news and update check: a request to the internet and a pop-up in class.
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
# What each kind of user sees of nbgrader. A learner on their own machine (`make lab`) has no
# exchange, so no Assignments tab either; a student on the hub fetches and submits there.
ROLE_TOOLS = {
    "learner": {"validate-assignment"},
    "student": {"assignment-list", "validate-assignment"},
    "instructor": set(NBGRADER_PLUGINS),
}


def role_settings(role: str) -> dict[str, dict]:
    """The Jupyter settings files of ``role``: {relative path: JSON content}."""
    shown = ROLE_TOOLS[role]
    disabled = {plugin: True for tool, plugin in NBGRADER_PLUGINS.items() if tool not in shown}
    disabled[NEWS_PLUGIN] = True
    if role == "learner":
        disabled["@jupyter/nbgrader:menu"] = True  # nothing of it is for a learner on their own
    server = {module: tool in shown for tool, module in NBGRADER_SERVER.items()}
    if "formgrader" in shown:  # its submission pages served under a policy that runs no student script
        server[PAGE_POLICY_SERVER] = True
    return {
        "labconfig/page_config.json": {"disabledExtensions": disabled},
        "jupyter_server_config.json": {"ServerApp": {"jpserver_extensions": server}},
    }


TERMINAL_RC = """\
# A JupyterLab terminal on the class hub (written by make hub): the usual interactive settings,
# then the course environment first on PATH, so that nbgrader, python and make grade are the
# course's. Not a login shell: /etc/profile would reset PATH to the system's.
[ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
[ -r ~/.bashrc ] && . ~/.bashrc
export PATH="{bin}:$PATH"
"""


def write_role_settings(folder: Path, role: str, exchange: Path | None = None,
                        course: Path | None = None, env_bin: Path | None = None) -> Path:
    """Write ``role``'s settings into ``folder`` (a JUPYTER_CONFIG_PATH entry). With
    ``exchange``, an nbgrader_config.py that names the course and the exchange; for instructors
    with ``course``, one that applies the course's own nbgrader settings from any folder; for
    learners and students, one that validates as the course grades (``helpers.grading.validation``). With
    ``env_bin`` (the hub's environment), terminals start bash with that folder first on PATH."""
    folder = Path(folder)
    settings = role_settings(role)
    if env_bin is not None:
        rc = folder / "terminal.bashrc"
        folder.mkdir(parents=True, exist_ok=True)
        rc.write_text(TERMINAL_RC.format(bin=env_bin))
        settings["jupyter_server_config.json"]["ServerApp"]["terminado_settings"] = {
            "shell_command": ["/bin/bash", "--rcfile", str(rc), "-i"]}
    for rel, content in settings.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2) + "\n")
    if exchange is not None or role == "learner":
        where = "on the class hub: one course, one exchange" if exchange is not None else "for a learner"
        lines = [f'"""nbgrader {where} (written by hub/classhub.py)."""',
                 "c = get_config()  # noqa: F821"]
        if exchange is not None:
            lines += [f"c.CourseDirectory.course_id = {COURSE_ID!r}",
                      f"c.Exchange.root = {str(exchange)!r}"]
        if role == "instructor" and course is not None:
            lines += ["import sys",
                      f"sys.path.insert(0, {str(course)!r})",
                      "from helpers.grading.settings import configure",
                      f"configure(c, exchange={str(exchange)!r})",
                      "# several instructors share the course: nbgrader keeps its files group-writable",
                      "c.CourseDirectory.groupshared = True",
                      "# the formgrader's Collect and `nbgrader collect` take submissions from their owners",
                      'c.ExchangeFactory.collect = "helpers.grading.exchange.OwnerCheckedCollect"']
        else:
            lines += ["# Validate as the course grades: its time limit per cell, a stopped cell fails",
                      "from helpers.grading.validation import configure_validation",
                      "configure_validation(c)"]
        (folder / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    return folder


@dataclass
class Settings:
    """The hub's settings, from the environment ``make hub`` passes (see docs/hub.md)."""

    prefix: Path = Path("/srv/attention-from-scratch")
    env: Path | None = None  # the course environment; default prefix/env
    exchange: Path = Path("/srv/nbgrader/exchange")
    ip: str = "127.0.0.1"
    port: int = 8000
    student_memory: str = "2G"
    student_cpus: float = 1.0
    instructor_memory: str = "6G"
    instructor_cpus: float = 2.0
    cull_after_s: int = 3600
    ssl_cert: Path | None = None  # HTTPS: the institution's certificate (chain) and its key, PEM
    ssl_key: Path | None = None

    @classmethod
    def from_env(cls, environ=os.environ) -> Settings:
        get = environ.get
        return cls(prefix=Path(get("HUB_PREFIX", cls.prefix)),
                   env=Path(get("HUB_ENV")) if get("HUB_ENV") else None,
                   exchange=Path(get("HUB_EXCHANGE", cls.exchange)),
                   ip=get("HUB_IP", cls.ip), port=int(get("HUB_PORT", cls.port)),
                   student_memory=get("HUB_STUDENT_MEMORY", cls.student_memory),
                   student_cpus=float(get("HUB_STUDENT_CPUS", cls.student_cpus)),
                   instructor_memory=get("HUB_INSTRUCTOR_MEMORY", cls.instructor_memory),
                   instructor_cpus=float(get("HUB_INSTRUCTOR_CPUS", cls.instructor_cpus)),
                   cull_after_s=int(get("HUB_CULL_AFTER", cls.cull_after_s)),
                   ssl_cert=Path(get("HUB_SSL_CERT")) if get("HUB_SSL_CERT") else None,
                   ssl_key=Path(get("HUB_SSL_KEY")) if get("HUB_SSL_KEY") else None)

    @property
    def env_dir(self) -> Path:
        return self.env or self.prefix / "env"

    def path(self, name: str) -> Path:
        return self.prefix / name

    @property
    def course(self) -> Path:
        return self.prefix / "course"

    @property
    def state(self) -> Path:
        return self.prefix / "state"


def role_of(username: str) -> str | None:
    """'instructor', 'student' or None, from the user's Linux groups (instructor wins)."""
    try:
        user = pwd.getpwnam(username)
    except KeyError:
        return None
    groups = {g.gr_name for g in grp.getgrall() if username in g.gr_mem}
    try:
        groups.add(grp.getgrgid(user.pw_gid).gr_name)
    except KeyError:
        pass
    if INSTRUCTORS in groups:
        return "instructor"
    if STUDENTS in groups:
        return "student"
    return None


def user_environment(settings: Settings, role: str) -> dict[str, str]:
    """What a ``role`` user's server (and every kernel and terminal in it) gets in its environment."""
    env = {
        "JUPYTER_CONFIG_PATH": str(settings.path("jupyter") / role),
        "ATTENTION_DATA": str(settings.path("data")),
        "ATTENTION_EXCHANGE": str(settings.exchange),
        "PATH": f"{settings.env_dir / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        # a kernel or lesson must never fetch: keep tools off the network by default
        "HF_HUB_OFFLINE": "1",
    }
    if role == "instructor":
        # the instructors' copy of the course comes first: its helpers know solutions/ and grading/
        env["PYTHONPATH"] = str(settings.course)
    return env


# ------------------------------------------------------------------ per-user limits

def parse_bytes(text: str) -> int:
    """'2G' → 2 GiB; also K, M, T and plain byte counts."""
    text = str(text).strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(text)


CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_NAME = "attention-hub"


def cgroup_dirs(username: str, root: Path = CGROUP_ROOT) -> dict[str, Path]:
    """The user's cgroup folders: cgroup v1 'memory' and 'cpu', or the one v2 folder."""
    if (root / "cgroup.controllers").exists():  # unified hierarchy (v2)
        return {"v2": root / CGROUP_NAME / username}
    return {c: root / c / CGROUP_NAME / username for c in ("memory", "cpu") if (root / c).is_dir()}


def apply_limits(username: str, memory: str, cpus: float, root: Path = CGROUP_ROOT) -> list[Path]:
    """Create the user's cgroups with a memory cap and a CPU quota; the folders whose
    ``cgroup.procs`` the user's server joins. Raises OSError where cgroups are not writable."""
    dirs = cgroup_dirs(username, root)
    mem, period = parse_bytes(memory), 100_000
    quota = max(1000, int(cpus * period))
    for kind, folder in dirs.items():
        folder.mkdir(parents=True, exist_ok=True)
        if kind == "v2":
            parent = folder.parent
            (parent / "cgroup.subtree_control").write_text("+memory +cpu")
            (folder / "memory.max").write_text(str(mem))
            (folder / "cpu.max").write_text(f"{quota} {period}")
        elif kind == "memory":
            (folder / "memory.limit_in_bytes").write_text(str(mem))
        elif kind == "cpu":
            (folder / "cpu.cfs_period_us").write_text(str(period))
            (folder / "cpu.cfs_quota_us").write_text(str(quota))
    return list(dirs.values())


def remove_limits(username: str, root: Path = CGROUP_ROOT) -> None:
    """Remove the user's (empty) cgroups once their server has stopped."""
    for folder in cgroup_dirs(username, root).values():
        try:
            folder.rmdir()
        except OSError:
            pass  # still in use, or never made


def memory_in_use(username: str, root: Path = CGROUP_ROOT) -> int | None:
    """Bytes the user's processes use now (their cgroup's count), or None without cgroups."""
    for kind, folder in cgroup_dirs(username, root).items():
        name = {"v2": "memory.current", "memory": "memory.usage_in_bytes"}.get(kind)
        if name and (folder / name).exists():
            return int((folder / name).read_text())
    return None


# ------------------------------------------------------------------ one port per server

class PortBook:
    """The ports handed to servers that are starting or running, so no two get the same one.

    The local spawner's own choice is a port that is free at that moment; a server binds it
    only seconds later, once Python and Jupyter have loaded. When a class logs in together, two
    spawns can be handed the same free port: the second server cannot bind it and exits, while
    the hub, which takes any answer below 500 from the port as "up", finds the first student's
    server there and sends the second student to it, who gets that server's 404 for every page.
    """

    def __init__(self, pick):
        self.pick, self.taken = pick, set()  # pick(): a port free right now

    def take(self, tries: int = 100) -> int:
        for _ in range(tries):
            port = self.pick()
            if port not in self.taken:
                self.taken.add(port)
                return port
        raise RuntimeError(f"no free port for a server after {tries} tries ({len(self.taken)} handed out)")

    def give_back(self, port: int) -> None:
        self.taken.discard(port)


def make_spawner_class():
    """LocalProcessSpawner with the course's roles: each user's server runs as that Linux user
    from the shared environment, with the role's settings, inside the user's cgroup, on a port
    no other server of this hub was handed (``PortBook``)."""
    from jupyterhub.spawner import LocalProcessSpawner
    from jupyterhub.utils import random_port

    class ClassSpawner(LocalProcessSpawner):
        cgroups: list[Path] = []
        umask: int = 0o022
        ports = PortBook(random_port)  # one book for every server of the hub

        async def start(self):
            self.ports.give_back(self.port)
            self.port = self.ports.take()
            try:
                return await super().start()
            except BaseException:
                self.ports.give_back(self.port)
                raise

        def clear_state(self):  # the server has stopped (or never started): its port is free again
            self.ports.give_back(self.port)
            super().clear_state()

        def make_preexec_fn(self, name):
            switch_user = super().make_preexec_fn(name)
            cgroups, umask = list(self.cgroups), self.umask
            # the server's own folder is where a new terminal opens: the course copy for instructors
            folder = self.notebook_dir if os.path.isabs(self.notebook_dir) else None

            def preexec():
                for group in cgroups:  # still root here: join the user's cgroups, then switch
                    (group / "cgroup.procs").write_text(str(os.getpid()))
                os.umask(umask)
                switch_user()  # also changes into the home folder
                if folder:
                    os.chdir(folder)

            return preexec

    return ClassSpawner


def pre_spawn(settings: Settings):
    """The hub's pre-spawn hook: the role's environment, folder, limits and umask."""

    def hook(spawner):
        name = spawner.user.name
        role = role_of(name)
        if role is None:
            raise PermissionError(f"{name} is in neither {STUDENTS} nor {INSTRUCTORS}")
        spawner.environment.update(user_environment(settings, role))
        if role == "instructor":
            spawner.notebook_dir = str(settings.course)
            spawner.umask = 0o002  # instructors share the course folder (group-writable)
            memory, cpus = settings.instructor_memory, settings.instructor_cpus
        else:
            spawner.notebook_dir = "~"
            memory, cpus = settings.student_memory, settings.student_cpus
        spawner.mem_limit, spawner.cpu_limit = parse_bytes(memory), cpus
        try:
            spawner.cgroups = apply_limits(name, memory, cpus)
        except OSError as err:
            spawner.cgroups = []
            spawner.log.warning("No memory/CPU limit for %s: cgroups are not writable here (%s)", name, err)

    return hook


def post_stop(spawner) -> None:
    """The hub's post-stop hook: the user's cgroups go with the server."""
    remove_limits(spawner.user.name)


# What instructors may do on the hub: its admin page (who is running; start and stop servers),
# but not enter anyone's server. JupyterHub's admin role would add access:servers, which opens a
# student's JupyterLab, files and terminal as that student.
INSTRUCTOR_SCOPES = ["admin-ui", "list:users", "read:users", "read:users:activity", "read:servers",
                     "servers", "list:groups", "read:groups"]


def group_members(group: str) -> list[str]:
    """The accounts in the Linux group ``group`` (listed in it, or as their primary group)."""
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        return []
    return sorted(set(entry.gr_mem) | {p.pw_name for p in pwd.getpwall() if p.pw_gid == entry.gr_gid})


def instructor_roles() -> list[dict]:
    """JupyterHub roles: instructors get INSTRUCTOR_SCOPES, and nobody is the hub's full admin
    (an admin flag left in the hub's database by an earlier setup is revoked at start)."""
    return [{"name": "instructor", "description": "the class's instructors: no access to servers",
             "scopes": INSTRUCTOR_SCOPES, "users": group_members(INSTRUCTORS)},
            {"name": "admin", "users": []}]


def configure(c, settings: Settings) -> None:
    """The whole hub configuration for the class (``jupyterhub_config.py`` calls this)."""
    env = settings.env_dir
    settings.state.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.state, 0o700)
    c.JupyterHub.ip, c.JupyterHub.port = settings.ip, settings.port
    c.JupyterHub.hub_ip = "127.0.0.1"
    # The hub's own API and the proxy's API listen on loopback, on the two ports after the hub's.
    c.JupyterHub.hub_port = settings.port + 1
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.port + 2}"
    c.JupyterHub.db_url = f"sqlite:///{settings.state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(settings.state / "jupyterhub_cookie_secret")
    c.ConfigurableHTTPProxy.command = [str(settings.path("proxy") / "node_modules" / ".bin" /
                                           "configurable-http-proxy")]
    c.ConfigurableHTTPProxy.pid_file = str(settings.state / "proxy.pid")
    if settings.ssl_cert or settings.ssl_key:  # HTTPS, served by the proxy
        missing = [f"{name}={path}" for name, path in (("HUB_SSL_CERT", settings.ssl_cert),
                                                       ("HUB_SSL_KEY", settings.ssl_key))
                   if not path or not path.is_file()]
        if missing:
            raise ValueError(f"HTTPS needs both the certificate and its key as PEM files; not found: "
                             f"{', '.join(missing)}")
        c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = str(settings.ssl_cert), str(settings.ssl_key)
    # Logins: the Linux accounts of the roster (hub/roster.py), checked by PAM.
    c.JupyterHub.authenticator_class = "jupyterhub.auth.PAMAuthenticator"
    c.PAMAuthenticator.allowed_groups = {STUDENTS, INSTRUCTORS}
    c.PAMAuthenticator.open_sessions = False  # no systemd-logind session per server
    # Servers: JupyterLab from the one shared environment, as the user.
    c.JupyterHub.spawner_class = make_spawner_class()
    c.Spawner.cmd = [str(env / "bin" / "jupyterhub-singleuser")]
    c.Spawner.default_url = "/lab"
    c.Spawner.pre_spawn_hook = pre_spawn(settings)
    c.Spawner.post_stop_hook = post_stop
    c.Spawner.start_timeout = 300  # a whole class logging in at once on a small machine
    c.Spawner.http_timeout = 300
    # The idle culler stops servers nobody has used for cull_after_s. It goes with the hub: a hub
    # that is killed (a crash, kill -9) would otherwise leave it running, and the next start would
    # add a second one.
    with_the_hub = ["setpriv", "--pdeathsig", "TERM"] if shutil.which("setpriv") else []
    c.JupyterHub.services = [{
        "name": "idle-culler",
        "command": [*with_the_hub, str(env / "bin" / "python"), "-m", "jupyterhub_idle_culler",
                    f"--timeout={settings.cull_after_s}", "--cull-every=300"],
    }]
    c.JupyterHub.load_roles = [{
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }, *instructor_roles()]


def main(argv: list[str] | None = None) -> int:
    """``python hub/classhub.py roles FOLDER [--exchange PATH] [--course PATH]``: every role's settings."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["roles"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--exchange", type=Path, help="nbgrader's exchange (students and instructors)")
    parser.add_argument("--course", type=Path, help="the instructors' copy of the course")
    args = parser.parse_args(argv)
    hub_bin = Path(sys.prefix) / "bin"  # install.sh runs this with the hub's environment
    for role in ROLE_TOOLS:
        on_hub = role != "learner" and args.exchange is not None
        write_role_settings(args.folder / role, role, args.exchange if on_hub else None, args.course,
                            hub_bin if on_hub else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
