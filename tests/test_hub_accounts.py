"""The class hub's accounts and limits: a roster is checked line by line before anything is
created, running it twice changes nothing, a role change moves the account between the two
groups, first passwords stay with root; per-user memory and CPU caps are written where the
kernel's cgroups expect them (v1 and v2 trees, faked in a folder)."""

import grp
import os
import pwd
import subprocess

import classhub
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
        assert oct(os.stat(pwd.getpwnam("afs-acct-a").pw_dir).st_mode & 0o777) == "0o750"
        assert classhub.role_of("afs-acct-a") == "student" and classhub.role_of("afs-acct-b") == "instructor"
        again = roster.apply(roster.read_roster(_roster(
            tmp_path, "username,role\nafs-acct-a,student\nafs-acct-b,instructor\n")), passwords)
        assert again["unchanged"] == users and not again["created"]
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
