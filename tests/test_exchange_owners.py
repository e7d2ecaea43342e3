"""A submission belongs to its owner: collecting from the exchange refuses an inbound folder whose
Linux owner is not the student it names, names it, and always collects each student's newest
accepted folder (helpers/grading/exchange.py). The folders are owned by real throwaway accounts,
so this needs root."""

import os
import pwd
import subprocess

import pytest

from helpers.grading import exchange
from helpers.grading.settings import COURSE_ID

LESSON = "04_masking"
A, B = "afs-own-ana", "afs-own-ben"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="folders owned by other accounts need root")


@pytest.fixture(scope="module")
def accounts():
    for user in (A, B):
        subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", user], check=True)
    yield
    for user in (A, B):
        subprocess.run(["userdel", user], capture_output=True)


def _submit(ex, owner: str, named: str, minute: int, text: str, lesson: str = LESSON) -> str:
    """What nbgrader's submit leaves in inbound/, made by ``owner`` under the name of ``named``."""
    name = f"{named}+{lesson}+2026-03-01 12:{minute:02d}:00.000000 UTC+r{minute}"
    folder = ex / COURSE_ID / "inbound" / name
    folder.mkdir(parents=True)
    (folder / f"{lesson}.ipynb").write_text(text)
    (folder / "timestamp.txt").write_text(f"2026-03-01 12:{minute:02d}:00.000000 UTC")
    uid = pwd.getpwnam(owner).pw_uid
    for path in (folder, *folder.iterdir()):
        os.chown(path, uid, -1)
    return name


def _collected(root, student: str) -> str | None:
    nb = root / "collected" / student / LESSON / f"{LESSON}.ipynb"
    return nb.read_text() if nb.exists() else None


def test_nbgrader_alone_grades_a_classmates_fake(accounts, tmp_path):
    """The hazard: nbgrader's own collect takes the newest folder per name, whoever made it."""
    from helpers.grading.autograde import course_api

    ex, root = tmp_path / "exchange", tmp_path / "grading"
    _submit(ex, B, B, 1, "ben's own work")
    _submit(ex, A, B, 2, "a blank notebook from ana")
    api = course_api(root, exchange=ex)
    api.coursedir.submitted_directory = "collected"
    assert api.collect(LESSON)["success"]
    assert _collected(root, B) == "a blank notebook from ana"


def test_a_fake_in_a_classmates_name_is_refused_and_named(accounts, tmp_path):
    ex, root = tmp_path / "exchange", tmp_path / "grading"
    _submit(ex, B, B, 1, "ben's own work")
    fake = _submit(ex, A, B, 2, "a blank notebook from ana")
    _submit(ex, A, A, 3, "ana's own work")
    got = exchange.collect(LESSON, root, ex)
    assert _collected(root, B) == "ben's own work"
    assert _collected(root, A) == "ana's own work"
    assert sorted(got.collected) == [A, B]
    assert [e.name for e in got.refused] == [fake]
    (line,) = [x for x in got.lines() if "REFUSED" in x]
    assert fake in line and f"names {B} but was handed in by {A}" in line, line


def test_links_and_lost_accounts_are_refused_and_nothing_is_copied_through_a_link(accounts, tmp_path):
    ex, root = tmp_path / "exchange", tmp_path / "grading"
    secret = tmp_path / "gradebook-secret.txt"
    secret.write_text("hidden tests")
    real = _submit(ex, A, A, 1, "ana's own work")
    inbound = ex / COURSE_ID / "inbound"
    (inbound / real / "extra.txt").symlink_to(secret)  # a link to a file only instructors read
    os.lchown(inbound / real / "extra.txt", pwd.getpwnam(A).pw_uid, -1)
    link = f"{A}+{LESSON}+2026-03-01 12:05:00.000000 UTC+link"
    (inbound / link).symlink_to(inbound / real)
    os.lchown(inbound / link, pwd.getpwnam(A).pw_uid, -1)
    orphan = _submit(ex, A, "afs-own-gone", 6, "from nobody")
    os.chown(inbound / orphan, 54321, -1)
    got = exchange.collect(LESSON, root, ex)
    verdicts = {e.name: e.refused for e in got.refused}
    assert "link" in verdicts[link]
    assert "user id 54321, which is no account" in verdicts[orphan]
    assert _collected(root, A) == "ana's own work"
    assert not (root / "collected" / A / LESSON / "extra.txt").exists()
    assert any("extra.txt: a link" in s for s in got.skipped), got.skipped


def test_a_regrade_uses_the_current_collection_and_discarding_needs_no_root(accounts, tmp_path):
    ex, root = tmp_path / "exchange", tmp_path / "grading"
    first = _submit(ex, B, B, 1, "first try")
    exchange.collect(LESSON, root, ex)
    assert _collected(root, B) == "first try"
    second = _submit(ex, B, B, 2, "second try")
    exchange.collect(LESSON, root, ex)
    assert _collected(root, B) == "second try", "a later submission replaces the collected copy"
    exchange.discard(LESSON, second, root, ex)
    got = exchange.collect(LESSON, root, ex)
    assert _collected(root, B) == "first try", "a discarded entry must not stay the collected copy"
    assert [e.name for e in got.discarded] == [second]
    assert (ex / COURSE_ID / "inbound" / second).exists(), "discarding leaves the student's folder alone"
    exchange.discard(LESSON, first, root, ex)
    got = exchange.collect(LESSON, root, ex)
    assert _collected(root, B) is None and got.removed == [B]
    assert any(f"{B}: no accepted submission" in line for line in got.lines())
    with pytest.raises(ValueError, match=r"copy the whole name, in quotes.*that student's"):
        exchange.discard(LESSON, f"{B}+{LESSON}+2026", root, ex)


def test_the_instructors_listing_and_discard_command(accounts, tmp_path, capsys):
    ex, root = tmp_path / "exchange", tmp_path / "grading"
    fake = _submit(ex, A, B, 1, "fake")
    mine = _submit(ex, A, A, 2, "mine")
    _submit(ex, A, A, 3, "another lesson", lesson="05_position")
    args = [LESSON, "--root", str(root), "--exchange", str(ex)]
    assert exchange.main(args) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 2, listing
    assert f"{fake!r}  owner {A}  REFUSED: names {B} but was handed in by {A}" in listing
    assert f"{mine!r}  owner {A}  accepted" in listing
    assert exchange.main([*args, "--discard", mine]) == 0
    assert mine in (root / exchange.DISCARDED).read_text()
    assert exchange.main(args) == 0
    assert f"{mine!r}  owner {A}  discarded" in capsys.readouterr().out
    assert exchange.main([*args, "--discard", "nothing-like-it"]) == 1
    assert "no inbound entry" in capsys.readouterr().err


def test_nbgrader_collect_on_the_hub_follows_the_same_rule(accounts, tmp_path):
    """The formgrader's Collect and `nbgrader collect` use OwnerCheckedCollect on the hub."""
    from helpers.grading.autograde import course_api

    ex, root = tmp_path / "exchange", tmp_path / "grading"
    _submit(ex, B, B, 1, "ben's own work")
    _submit(ex, A, B, 2, "a blank notebook from ana")
    _submit(ex, A, A, 3, "ana's own work")
    api = course_api(root, exchange=ex)
    api.config.ExchangeFactory.collect = "helpers.grading.exchange.OwnerCheckedCollect"
    api = type(api)(config=api.config)
    api.coursedir.submitted_directory = "collected"
    result = api.collect(LESSON)
    assert result["success"], result["log"]
    assert f"names {B} but was handed in by {A}" in result["log"]
    assert _collected(root, B) == "ben's own work" and _collected(root, A) == "ana's own work"
