"""The class hub's accounts and limits: a roster is checked line by line before anything is
created, running it twice changes nothing, a role change moves the account between the two
groups, first passwords stay with root; per-user memory and CPU caps are written where the
kernel's cgroups expect them (v1 and v2 trees, faked in a folder); `make hub` refuses a roster,
solutions or course copy other accounts can read, naming the command that fixes it."""

import grp
import os
import pwd
import subprocess
from pathlib import Path

import classhub
import private
import pytest
import roster
from conftest import ROOT, free_port


def _roster(tmp_path, text: str):
    path = tmp_path / "class.csv"
    path.write_text(text)
    return path


def test_a_good_roster_is_read(tmp_path):
    text = "Username,Role,Name\nada,Instructor,Ada L\n\nalan,student,\n"
    members = roster.read_roster(_roster(tmp_path, text))
    assert [(m.username, m.role, m.name) for m in members] == \
        [("ada", "instructor", "Ada L"), ("alan", "student", "")]


@pytest.mark.parametrize("text, named", [
    ("username,role\n1ada,student\n", "line 2: '1ada' is not a valid Linux user name"),
    ("username,role\nAda,student\n", "line 2: 'Ada' is not a valid Linux user name"),
    ("username,role\nada,teacher\n", "line 2: role 'teacher' must be student or instructor"),
    ("username,role\nada,student\nbob,student\nada,instructor\n", "line 4: ada is already on line 2"),
    ("name,email\nAda,ada@example.org\n", "the header must name the columns username and role"),
    ("username,role\n", "lists nobody"),
])
def test_a_bad_roster_is_refused_with_its_line(tmp_path, text, named):
    with pytest.raises(roster.RosterError, match=named.replace("(", r"\(").replace(")", r"\)")):
        roster.read_roster(_roster(tmp_path, text))


def test_every_problem_of_a_roster_is_reported_at_once(tmp_path):
    with pytest.raises(roster.RosterError) as err:
        roster.read_roster(_roster(tmp_path, "username,role\nBad Name,student\nok,boss\n"))
    assert "line 2" in str(err.value) and "line 3" in str(err.value)


def test_a_dry_run_changes_nothing_and_says_what_it_would_do(tmp_path, capsys):
    members = roster.read_roster(_roster(tmp_path, "username,role\nafs-never-created,student\n"))
    report = roster.apply(members, tmp_path / "passwords.csv", dry_run=True)
    assert report["created"] == ["afs-never-created"]
    assert "would run: useradd" in capsys.readouterr().out
    assert not (tmp_path / "passwords.csv").exists()
    with pytest.raises(KeyError):
        pwd.getpwnam("afs-never-created")


@pytest.mark.skipif(os.geteuid() != 0, reason="creating accounts needs root (CI runs as root)")
def test_accounts_are_created_once_and_follow_a_role_change(tmp_path):
    users = ["afs-acct-a", "afs-acct-b"]
    for u in users:
        subprocess.run(["userdel", "--remove", u], capture_output=True)
    passwords = tmp_path / "state" / "first-passwords.csv"
    try:
        first = roster.apply(roster.read_roster(_roster(
            tmp_path, "username,role\nafs-acct-a,student\nafs-acct-b,instructor\n")), passwords)
        assert first["created"] == users
        assert oct(passwords.stat().st_mode & 0o777) == "0o600"
        assert oct(passwords.parent.stat().st_mode & 0o777) == "0o700"
        assert len(passwords.read_text().splitlines()) == 3  # header and one line per new account
        record = passwords.with_name("accounts-created.txt")
        assert roster.created_by_the_hub(record) == users and oct(record.stat().st_mode & 0o777) == "0o600"
        assert oct(os.stat(pwd.getpwnam("afs-acct-a").pw_dir).st_mode & 0o777) == "0o750"
        assert classhub.role_of("afs-acct-a") == "student" and classhub.role_of("afs-acct-b") == "instructor"
        again = roster.apply(roster.read_roster(_roster(
            tmp_path, "username,role\nafs-acct-a,student\nafs-acct-b,instructor\n")), passwords)
        assert again["unchanged"] == users and not again["created"]
        assert roster.created_by_the_hub(record) == users, "an existing account is not recorded again"
        assert len(passwords.read_text().splitlines()) == 3, "an existing account keeps its password"
        moved = roster.apply(roster.read_roster(_roster(tmp_path, "username,role\nafs-acct-a,instructor\n")),
                             passwords)
        assert moved["updated"] == ["afs-acct-a"] and "afs-acct-b" in moved["left_roster"]
        assert classhub.role_of("afs-acct-a") == "instructor"
        assert "afs-acct-a" not in grp.getgrnam(classhub.STUDENTS).gr_mem
    finally:
        for u in users:
            subprocess.run(["userdel", "--remove", u], capture_output=True)


def test_sizes_are_read_as_the_spawner_writes_them():
    assert classhub.parse_bytes("2G") == 2 << 30
    assert classhub.parse_bytes("512M") == 512 << 20
    assert classhub.parse_bytes("1.5g") == 3 << 29
    assert classhub.parse_bytes("6GB") == 6 << 30
    assert classhub.parse_bytes("1024") == 1024


def test_limits_on_a_cgroup_v1_tree(tmp_path):
    for controller in ("memory", "cpu"):
        (tmp_path / controller).mkdir()
    folders = classhub.apply_limits("alan", "2G", 1.5, root=tmp_path)
    memory, cpu = tmp_path / "memory" / "attention-hub" / "alan", tmp_path / "cpu" / "attention-hub" / "alan"
    assert set(folders) == {memory, cpu}
    assert (memory / "memory.limit_in_bytes").read_text() == str(2 << 30)
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000"
    for folder in folders:
        for f in folder.iterdir():
            f.unlink()  # the kernel's own files vanish with the folder
    classhub.remove_limits("alan", root=tmp_path)
    assert not memory.exists() and not cpu.exists()


def test_limits_on_a_cgroup_v2_tree(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids")
    (folder,) = classhub.apply_limits("alan", "512M", 0.5, root=tmp_path)
    assert folder == tmp_path / "attention-hub" / "alan"
    assert (folder / "memory.max").read_text() == str(512 << 20)
    assert (folder / "cpu.max").read_text() == "50000 100000"
    assert (folder.parent / "cgroup.subtree_control").read_text() == "+memory +cpu"


def test_an_instructor_gets_the_course_first_a_student_never_does():
    settings = classhub.Settings(prefix=ROOT / "build" / "nowhere")
    student = classhub.user_environment(settings, "student")
    instructor = classhub.user_environment(settings, "instructor")
    assert "PYTHONPATH" not in student
    assert instructor["PYTHONPATH"] == str(settings.course)
    assert student["ATTENTION_DATA"] == instructor["ATTENTION_DATA"] == str(settings.prefix / "data")
    assert student["JUPYTER_CONFIG_PATH"].endswith("/jupyter/student")


def test_two_servers_starting_together_never_share_a_port():
    # What the system does when two spawns ask for a free port before either server has bound
    # it: the same port, twice.
    offered = iter([41001, 41001, 41001, 41002, 41001])
    book = classhub.PortBook(pick=lambda: next(offered))
    first, second = book.take(), book.take()
    assert (first, second) == (41001, 41002)
    book.give_back(first)  # that server stopped
    assert book.take() == 41001
    stuck = classhub.PortBook(pick=lambda: 41001)
    stuck.take()
    with pytest.raises(RuntimeError, match="no free port"):
        stuck.take(tries=5)
    real = classhub.PortBook(free_port)
    assert len({real.take() for _ in range(20)}) == 20


# ------------------------------------------------------------------ instructors' files stay private

@pytest.fixture
def open_place():
    """A folder every account can pass through, as a root clone in /srv or /opt is."""
    import shutil

    place = Path("/var/tmp/afs-private-test")
    shutil.rmtree(place, ignore_errors=True)
    place.mkdir(mode=0o755)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def test_a_roster_others_can_read_is_refused_with_the_fix(open_place):
    roster_file = open_place / "class.csv"
    roster_file.write_text("username,role,password\nada,instructor,secret\n")
    roster_file.chmod(0o644)
    (problem,) = private.problems(roster_file)
    assert "-rw-r--r--" in problem and problem.endswith(f"Fix: chmod 600 {roster_file}")
    roster_file.chmod(0o640)
    assert private.problems(roster_file), "a group can read it too"
    roster_file.chmod(0o600)
    assert private.problems(roster_file) == []


def test_solutions_others_can_read_are_refused_and_the_named_command_fixes_it(open_place):
    solutions = open_place / "checkout" / "solutions"
    (solutions / "02_attention_lookup").mkdir(parents=True)
    (solutions / "02_attention_lookup" / "02_attention_lookup.py").write_text("### BEGIN HIDDEN TESTS\n")
    for folder in (open_place / "checkout", solutions, solutions / "02_attention_lookup"):
        folder.chmod(0o755)
    (problem,) = private.problems(None, [solutions])
    assert problem.startswith(f"{solutions} can be read by others")
    fix = problem.split("Fix: ")[1]
    assert fix == f"chmod -R go-rwx {solutions}"
    subprocess.run(fix.split(), check=True)
    assert private.problems(None, [solutions]) == []
    (solutions / "02_attention_lookup" / "02_attention_lookup.py").chmod(0o644)
    assert private.problems(None, [solutions]) == [], "a closed folder keeps the file inside private"
    (open_place / "checkout").chmod(0o700)
    solutions.chmod(0o755)
    assert private.problems(None, [solutions]) == [], "a clone under a private folder is private"


def test_a_clone_others_can_enter_is_refused_whole_naming_what_holds_the_hidden_tests(open_place):
    clone = open_place / "attention-from-scratch"
    for rel in (".git/objects", "solutions/02_attention_lookup", "tests", "notebooks"):
        (clone / rel).mkdir(parents=True)
    (clone / ".git" / "objects" / "pack").write_text("every version of every hidden test")
    for here, _, files in os.walk(clone):
        os.chmod(here, 0o755)
        for name in files:
            os.chmod(Path(here, name), 0o644)
    (problem,) = private.problems(None, clone=clone)
    assert problem.startswith(f"the clone {clone} can be read by others, and with it its .git, solutions, "
                              "tests (hidden tests, mark schemes, correct implementations)"), problem
    fix = problem.split("Fix: ")[1]
    assert fix == f"chmod -R go-rwx {clone}"
    subprocess.run(fix.split(), check=True)
    assert private.problems(None, clone=clone) == []
    clone.chmod(0o711)  # no listing, but a student who knows the names walks in
    assert private.problems(None, clone=clone), "a clone others can enter is not private"


def test_a_hidden_test_students_can_read_under_the_prefix_is_refused(open_place):
    prefix = open_place / "prefix"
    files = {"data/lesson.ipynb": '   "### BEGIN HIDDEN TESTS\\n",\n',  # as nbgrader writes a notebook
             "data/slides.py": 'MARKS = re.compile(r"=== BEGIN MARK SCHEME ===(.*?)")\n',  # names it only
             "data/README.md": "the shipped results\n",
             "env/nbgrader/tests/example.py": "### BEGIN HIDDEN TESTS\n",  # a package's own example
             "state/copy.py": "### BEGIN HIDDEN TESTS\n"}
    for rel, text in files.items():
        (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
        (prefix / rel).write_text(text)
    for here, _, names in os.walk(prefix):
        os.chmod(here, 0o700 if here.endswith("state") else 0o755)
        for name in names:
            os.chmod(Path(here, name), 0o644)
    leaked = prefix / "data" / "lesson.ipynb"
    (problem,) = private.problems(served=prefix, skip=[prefix / "env"])
    assert problem == (f"{leaked} holds hidden tests or a mark scheme and can be read by others. "
                       f"Fix: chmod go-rwx {leaked}"), problem
    subprocess.run(problem.split("Fix: ")[1].split(), check=True)
    assert private.problems(served=prefix, skip=[prefix / "env"]) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a real group with a student in it needs root")
def test_a_course_copy_is_private_to_the_instructors_group_only(open_place):
    course = open_place / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "solutions" / "x.py").write_text("hidden")
    subprocess.run(["groupadd", "-f", classhub.INSTRUCTORS], check=True)
    subprocess.run(["groupadd", "-f", "afs-priv-mixed"], check=True)
    subprocess.run(["useradd", "--no-create-home", "-G", "afs-priv-mixed", "afs-priv-student"],
                   capture_output=True)
    try:
        subprocess.run(["chgrp", "-R", classhub.INSTRUCTORS, str(course)], check=True)
        subprocess.run(["chmod", "-R", "u=rwX,g=rwX,o=", str(course)], check=True)
        assert private.problems(None, [course]) == []
        subprocess.run(["chgrp", "-R", "afs-priv-mixed", str(course)], check=True)
        (problem,) = private.problems(None, [course])
        assert "can be read by group afs-priv-mixed" in problem, problem
    finally:
        subprocess.run(["userdel", "afs-priv-student"], capture_output=True)
        subprocess.run(["groupdel", "afs-priv-mixed"], capture_output=True)


def test_a_new_install_keeps_what_instructors_changed_in_the_course_copy(tmp_path, capsys):
    import coursecopy

    new, course, manifest = tmp_path / "new", tmp_path / "course", tmp_path / "state" / "manifest.json"
    for rel, text in {"solutions/a.py": "a1", "solutions/b.py": "b1", "helpers/c.py": "c1"}.items():
        (new / rel).parent.mkdir(parents=True, exist_ok=True)
        (new / rel).write_text(text)
    assert sorted(coursecopy.refresh(new, course, manifest)["added"]) == ["helpers/c.py", "solutions/a.py",
                                                                          "solutions/b.py"]
    assert oct(manifest.stat().st_mode & 0o777) == "0o600"
    (course / "solutions" / "a.py").write_text("a1 with the instructor's extra hidden test")
    (course / "helpers" / "c.py").unlink()
    (course / "notes.md").write_text("mine")
    for rel in ("solutions/a.py", "solutions/b.py", "helpers/c.py"):
        (new / rel).write_text(rel + " v2")
    coursecopy.main([str(new), str(course), str(manifest)])
    said = capsys.readouterr().out
    assert (course / "solutions" / "a.py").read_text() == "a1 with the instructor's extra hidden test"
    assert ("kept the instructors' edit of solutions/a.py; the course's new version: "
            f"{new / 'solutions/a.py'}") in said
    assert (course / "solutions" / "b.py").read_text() == "solutions/b.py v2", "an untouched file is updated"
    assert not (course / "helpers" / "c.py").exists() and "kept helpers/c.py deleted" in said
    assert (course / "notes.md").read_text() == "mine"
    again = coursecopy.refresh(new, course, manifest)
    assert again["kept"] == ["solutions/a.py"] and not again["updated"], "an edit stays an edit"
    (course / "solutions" / "a.py").write_text("solutions/a.py v2")  # the instructor takes the new one
    assert coursecopy.refresh(new, course, manifest)["kept"] == []
    (new / "solutions" / "a.py").write_text("v3")
    assert coursecopy.refresh(new, course, manifest)["updated"] == ["solutions/a.py"]


def test_a_course_copy_from_before_the_manifest_keeps_every_difference(tmp_path):
    import coursecopy

    new, course = tmp_path / "new", tmp_path / "course"
    for folder, text in ((new, "shipped"), (course, "edited long ago")):
        folder.mkdir()
        (folder / "x.py").write_text(text)
    report = coursecopy.refresh(new, course, tmp_path / "manifest.json")
    assert report["kept"] == ["x.py"] and (course / "x.py").read_text() == "edited long ago"


def test_the_supervisor_starts_a_killed_hub_again_and_stops_it_when_asked(tmp_path):
    import signal
    import sys
    import time

    pidfile, log = tmp_path / "supervisor.pid", tmp_path / "hub.log"
    child = tmp_path / "child.pid"
    command = ["sh", "-c", f"echo $$ > {child}; exec sleep 300"]
    started = subprocess.run([sys.executable, str(ROOT / "hub" / "supervise.py"), "--pidfile", str(pidfile),
                              "--log", str(log), "--background", "--", *command],
                             capture_output=True, text=True, timeout=30)
    assert started.returncode == 0 and "make hub-stop" in started.stdout, started

    def wait_for(check, what):
        for _ in range(100):
            if check():
                return
            time.sleep(0.1)
        raise AssertionError(f"{what}; log:\n{log.read_text() if log.exists() else ''}")

    wait_for(lambda: child.exists() and child.read_text().strip(), "the hub never started")
    supervisor, first = int(pidfile.read_text()), int(child.read_text())
    again = subprocess.run([sys.executable, str(ROOT / "hub" / "supervise.py"), "--pidfile", str(pidfile),
                            "--", *command], capture_output=True, text=True, timeout=30)
    assert again.returncode == 2 and "already running" in again.stderr
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: child.read_text().strip() and int(child.read_text()) != first, "not started again")
    assert "the hub ended by itself (status -9)" in log.read_text()
    os.kill(supervisor, signal.SIGHUP)  # an SSH connection that drops
    time.sleep(0.3)
    os.kill(supervisor, 0)
    os.kill(supervisor, signal.SIGTERM)
    wait_for(lambda: not pidfile.exists(), "the supervisor did not stop")
    with pytest.raises(ProcessLookupError):
        os.kill(int(child.read_text()), 0)


def test_a_restore_replaces_no_newer_file_and_writes_through_no_link(tmp_path):
    import restore

    backup, home, elsewhere = tmp_path / "backup", tmp_path / "home", tmp_path / "elsewhere"
    (backup / "02_attention_lookup").mkdir(parents=True)
    for rel in ("02_attention_lookup/02_attention_lookup.ipynb", "notes.txt", "deleted.txt"):
        (backup / rel).write_text("the backup's")
        os.utime(backup / rel, (1_700_000_000, 1_700_000_000))
    os.symlink("/etc/hostname", backup / "link")
    home.mkdir()
    elsewhere.mkdir()
    (home / "notes.txt").write_text("written after the backup")
    os.symlink(elsewhere, home / "02_attention_lookup")  # where the backup has a folder
    report = restore.restore(backup, home)
    assert (home / "notes.txt").read_text() == "written after the backup"
    assert [line for line in report.kept if line.startswith("notes.txt (changed ")], report.kept
    assert not (home / "02_attention_lookup").is_symlink(), "a link where a folder was is replaced"
    assert (home / "02_attention_lookup" / "02_attention_lookup.ipynb").read_text() == "the backup's"
    assert list(elsewhere.iterdir()) == [], "nothing is written through a link"
    assert (home / "deleted.txt").read_text() == "the backup's"
    assert os.readlink(home / "link") == "/etc/hostname" and report.links == ["link -> /etc/hostname"]
    again = restore.restore(backup, home)
    assert again.written == 0 and again.kept == report.kept, "a second restore changes nothing"


def test_a_hub_whose_supervisor_was_killed_is_found_and_stopped(tmp_path):
    import signal
    import sys
    import time

    pidfile, log, child = tmp_path / "supervisor.pid", tmp_path / "hub.log", tmp_path / "child.pid"
    command = ["sh", "-c", f"echo $$ > {child}; exec sleep 300"]
    supervise = [sys.executable, str(ROOT / "hub" / "supervise.py"), "--pidfile", str(pidfile)]

    def start() -> tuple[int, int, str]:
        child.unlink(missing_ok=True)
        ran = subprocess.run([*supervise, "--log", str(log), "--background", "--", *command],
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran
        for _ in range(100):
            if child.exists() and child.read_text().strip() and pidfile.exists():
                return int(pidfile.read_text()), int(child.read_text()), ran.stdout
            time.sleep(0.1)
        raise AssertionError(f"the hub never started; log:\n{log.read_text() if log.exists() else ''}")

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"

    try:
        supervisor, hub, _ = start()
        os.kill(supervisor, signal.SIGKILL)  # the hub goes on, with nobody to stop or restart it
        time.sleep(0.3)
        assert alive(hub)
        _, second, said = start()  # make hub again: stops the orphan first (it would hold the port)
        assert not alive(hub) and second != hub
        assert f"stopping the hub left running by a supervisor that died (pid {hub})" in said
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        time.sleep(0.3)
        stopped = subprocess.run([*supervise, "--stop"], capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped
        assert f"stopping the hub left running by a supervisor that died (pid {second})" in stopped.stdout
        assert not alive(second)
        again = subprocess.run([*supervise, "--stop"], capture_output=True, text=True, timeout=120)
        assert "no hub is running" in again.stdout, again
    finally:  # whatever failed, no test process stays behind
        subprocess.run([*supervise, "--stop"], capture_output=True, timeout=120)
