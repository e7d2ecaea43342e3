"""A class on one JupyterHub, end to end, with real processes on loopback: `make hub`'s pieces
(hub/install.sh, hub/roster.py, hub/jupyterhub_config.py), real Linux accounts logging in
through the hub's login page in headless Chromium, nbgrader's exchange, the sandboxed grading
of `make grade` typed into an instructor's real terminal, the formgrader, and feedback fetched
back by each student; what students and instructors cannot reach; a spoofed submission; two
instructors at once; forty students at once; then a term: the hub killed and back, a backup
restored, `make hub` again (edits kept, HTTPS), and `make hub-uninstall`. Screenshots go to
build/hub-screenshots/, measurements to build/hub-report.json. Needs root (accounts) and
Debian's Chromium; takes a quarter of an hour."""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, require_chromium
from hubtools import (
    HUB_ENV,
    SHOTS,
    Hub,
    Terminal,
    classhub,
    login,
    open_assignments,
    require_root,
    session_of,
    start_hub,
    stop_hub,
    xsrf,
)

from helpers.grading.autograde import solution_answers

LESSON = "02_attention_lookup"
PREFIX = Path(os.environ.get("HUB_TEST_PREFIX", "/var/tmp/attention-hub-test"))
REPORT = ROOT / "build" / "hub-report.json"
TEACHER = ("afs-teacher", "instructor", f"teacher-{secrets.token_urlsafe(9)}")  # in no file but the roster
TEACHER2 = ("afs-teacher2", "instructor", "teacher2-Pw-8")
RIGHT, MISTAKE, BLANK = ("afs-right", "student", "right-Pw-1"), ("afs-mistake", "student", "mistake-Pw-2"), \
    ("afs-blank", "student", "blank-Pw-3")
N_LOAD = int(os.environ.get("HUB_TEST_LOAD", "40"))
LOAD = [(f"afs-load{i:02d}", "student", f"load-Pw-{i:02d}") for i in range(1, N_LOAD + 1)]
MEASURED: dict = {}


@pytest.fixture(scope="module")
def hub():
    require_root()
    require_chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    started = time.monotonic()
    hub = start_hub(PREFIX, [TEACHER, TEACHER2, RIGHT, MISTAKE, BLANK, *LOAD])
    MEASURED["setup_s"] = round(time.monotonic() - started, 1)
    yield hub
    stop_hub(hub)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(MEASURED, indent=2) + "\n")


def _answers() -> dict[str, dict[str, str]]:
    full = solution_answers(LESSON)
    full["why_rows"] = ("Each row belongs to one query: its weights over the keys must be positive "
                        "and sum to 1, so the output is an average of the values.")
    mistaken = full["attention"].replace("/ np.sqrt(d_k)", "")
    assert mistaken != full["attention"], "the reference attention changed: update the classic mistake"
    return {RIGHT[0]: full, MISTAKE[0]: {**full, "attention": mistaken}, BLANK[0]: {}}


def _put_answers(context, hub: Hub, user: str, answers: dict[str, str]) -> None:
    """What typing the answers into the fetched notebook leaves on disk: saved through the
    user's own server, as JupyterLab saves."""
    url = f"{hub.url}/user/{user}/api/contents/{LESSON}/{LESSON}.ipynb"
    model = context.request.get(url).json()
    nb = model["content"]
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    resp = context.request.put(url, data=json.dumps({"type": "notebook", "format": "json", "content": nb}),
                               headers={**xsrf(context, user), "Content-Type": "application/json"})
    assert resp.ok, f"{user}: saving the notebook failed: {resp.status} {resp.text()[:300]}"


def _formgrader(context, hub: Hub, path: str, method: str = "GET", body: dict | None = None):
    url = f"{hub.url}/user/{TEACHER[0]}/formgrader/api/{path}"
    headers = xsrf(context, TEACHER[0]) | {"Content-Type": "application/json"}
    resp = context.request.fetch(url, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body), timeout=300_000)
    assert resp.ok, f"formgrader {method} {path}: {resp.status} {resp.text()[:500]}"
    return resp.json()


def _peak_reset(user: str) -> None:
    for folder in classhub.cgroup_dirs(user).values():
        if (folder / "memory.max_usage_in_bytes").exists():
            (folder / "memory.max_usage_in_bytes").write_text("0")


def _peak(user: str) -> int | None:
    for folder in classhub.cgroup_dirs(user).values():
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            if (folder / name).exists():
                return int((folder / name).read_text())
    return None


def _shot(page, name: str) -> None:
    """Save a numbered screenshot of the step (build/hub-screenshots/NN-name.png)."""
    n = len(list(SHOTS.glob("*.png"))) + 1
    page.screenshot(path=str(SHOTS / f"{n:02d}-{name}.png"))


def _mib(n: int | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


def test_a_class_day_in_the_browser(hub):
    answers = _answers()
    expected = {RIGHT[0]: (13, 2), MISTAKE[0]: (9, 1), BLANK[0]: (0, 0)}  # (automatic, by hand)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)

        def person():  # each person has their own cookies
            return browser.new_context(viewport={"width": 1280, "height": 800})

        # The instructor logs in and releases lesson 02 from the formgrader.
        teacher = person()
        page = login(teacher, hub, *TEACHER[::2], shot="01-login-page.png")  # the first screenshot
        menus = page_menus(page, "instructor-menu")
        assert {"Formgrader", "Assignment List", "Create assignment"} <= set(menus), menus
        released = _formgrader(teacher, hub, f"assignment/{LESSON}/release", "POST")
        assert released["success"], released.get("log")
        page.goto(f"{hub.url}/user/{TEACHER[0]}/formgrader/manage_assignments")
        page.wait_for_selector(f"text={LESSON}", timeout=60_000)
        page.wait_for_timeout(1000)
        _shot(page, "instructor-released")

        students = {}
        for user, _, password in (RIGHT, MISTAKE, BLANK):
            context = person()
            began = time.monotonic()
            spage = login(context, hub, user, password)
            if user == RIGHT[0]:  # one student alone: from the login page to JupyterLab
                MEASURED["one_login_to_lab_s"] = round(time.monotonic() - began, 1)
            students[user] = (context, spage)
            menus = page_menus(spage, "student-menu" if user == RIGHT[0] else None)
            assert "Formgrader" not in menus and "Assignment List" in menus, f"{user} sees {menus}"
            assert context.request.get(f"{hub.url}/user/{user}/formgrader").status == 404, \
                "a student's server must not serve the formgrader"
            theirs = context.request.get(f"{hub.url}/user/{TEACHER[0]}/api/contents", max_redirects=0)
            assert theirs.status in (302, 403, 404), "a student must not reach the instructor's server"
            open_assignments(spage)
            spage.locator("#released_assignments_list button", has_text="Fetch").click()
            spage.wait_for_selector("#fetched_assignments_list .list_item a", timeout=120_000)
            _shot(spage, f"{user}-fetched")
            if answers[user]:
                _put_answers(context, hub, user, answers[user])
            if user == RIGHT[0]:
                MEASURED["idle_server_mib"] = _mib(classhub.memory_in_use(user))
                _peak_reset(user)
            spage.locator("#fetched_assignments_list a.assignment-notebooks-link").first.click()
            spage.locator("#fetched_assignments_list button", has_text="Validate").click()
            dialog = spage.locator(".jp-Dialog")
            dialog.wait_for(timeout=300_000)
            spage.wait_for_timeout(500)
            verdict = dialog.inner_text()
            _shot(spage, f"{user}-validated")
            if user == RIGHT[0]:
                MEASURED["server_with_lesson_kernel_peak_mib"] = _mib(_peak(user))
                assert "Success" in verdict, verdict
            else:
                assert "Success" not in verdict, f"{user}'s notebook passed validation: {verdict}"
            dialog.locator("button").last.click()
            spage.locator("#fetched_assignments_list button", has_text="Submit").click()
            spage.wait_for_selector("#submitted_assignments_list .list_item", timeout=120_000)
            _shot(spage, f"{user}-submitted")

        # One student hands in a blank notebook in a classmate's name, a minute after the
        # classmate's own: nbgrader alone would grade it as the classmate's latest.
        fake = _hand_in_as(hub, by=MISTAKE[0], named=RIGHT[0])

        # The instructor collects from the exchange and grades in the sandbox, in a JupyterLab
        # terminal of the hub, as docs/hub.md says.
        terminal = Terminal(session_of(teacher, hub), TEACHER[0])
        where, status = terminal.run("pwd; which nbgrader python")
        lines = where.replace("\r", "").splitlines()
        assert str(hub.settings.course) in lines, f"the terminal opens elsewhere: {lines}"
        assert str(HUB_ENV / "bin" / "nbgrader") in lines, f"nbgrader is not the hub's: {lines}"
        listing, status = terminal.run(f"python -m helpers.grading.exchange {LESSON}")
        spoofed = f"names {RIGHT[0]} but was handed in by {MISTAKE[0]}"
        assert status == 0 and f"REFUSED: {spoofed}" in listing, listing
        graded, status = terminal.run(f"make grade LESSON={LESSON} SUBMISSIONS=exchange")
        graded = graded.replace("\r", "")
        assert status == 0, f"make grade in the instructor's terminal failed:\n{graded[-4000:]}"
        assert "collected from the exchange" in graded
        assert f"REFUSED {fake!r}: {spoofed}" in graded, graded[-3000:]
        assert "NOT SANDBOXED" not in graded
        MEASURED["spoofed_submission"] = next(x.strip() for x in graded.splitlines() if "REFUSED" in x)
        assert (hub.settings.course / "grading" / f"mistakes_{LESSON}.csv").exists()
        subs = {s["student"]: s for s in _formgrader(teacher, hub, f"submissions/{LESSON}")}
        for user, (auto, _) in expected.items():
            assert subs[user]["code_score"] == auto, (user, subs[user])
        # ... hand-grades the free-text answer in the formgrader ...
        notebooks = {n["student"]: n
                     for n in _formgrader(teacher, hub, f"submitted_notebooks/{LESSON}/{LESSON}")}
        for user, (_, by_hand) in expected.items():
            grades = _formgrader(teacher, hub, f"grades?submission_id={notebooks[user]['id']}")
            free = next(g for g in grades if g["name"] == "why_rows")
            _formgrader(teacher, hub, f"grade/{free['id']}", "PUT", {"manual_score": by_hand})
        page.goto(f"{hub.url}/user/{TEACHER[0]}/formgrader/submissions/{notebooks[MISTAKE[0]]['id']}/?index=0")
        page.locator("text=Think (2 points").first.wait_for(timeout=60_000)
        page.locator("text=Think (2 points").first.scroll_into_view_if_needed()
        _shot(page, "instructor-hand-grading")
        # ... and releases the feedback.
        returned, status = terminal.run(f"make feedback LESSON={LESSON} RELEASE=1")
        assert status == 0, returned[-3000:]
        terminal.close()

        # Each student fetches the feedback and reads the score and the named mistake.
        for user, (auto, by_hand) in expected.items():
            context, spage = students[user]
            open_assignments(spage)
            spage.locator("#refresh_assignments_list").click()
            spage.locator("#submitted_assignments_list button", has_text="Fetch Feedback").click()
            spage.wait_for_selector("#submitted_assignments_list a:has-text('view feedback')",
                                    timeout=120_000)
            listing = context.request.get(f"{hub.url}/user/{user}/api/contents/{LESSON}/feedback").json()
            stamp = listing["content"][0]["name"]
            spage.goto(f"{hub.url}/user/{user}/files/{LESSON}/feedback/{stamp}/{LESSON}.html")
            _shot(spage, f"{user}-feedback")
            text = spage.inner_text("body")
            score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", text)
            assert score and float(score.group(1)) == auto + by_hand, (user, score and score.group(0))
            if user == MISTAKE[0]:
                named = spage.locator("text=not divided by √d_k").first
                assert named.count(), "the feedback must name the missing √d_k"
                named.scroll_into_view_if_needed()
                _shot(spage, f"{user}-feedback-mistake")
        browser.close()
    MEASURED["screenshots"] = sorted(p.name for p in SHOTS.glob("*.png"))


def _hand_in_as(hub: Hub, by: str, named: str) -> str:
    """What a student can do from their terminal: make an inbound folder in a classmate's name
    (the exchange's inbound/ is writable by all) with the released, blank notebook in it."""
    when = (datetime.now(UTC) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    name = f"{named}+{LESSON}+{when}+fake"
    course = hub.exchange / classhub.COURSE_ID
    script = 'mkdir "$0" && cp "$1" "$0/" && echo "$2" > "$0/timestamp.txt"'
    made = hub.as_user(by, "student", "sh", "-c", script,
                       str(course / "inbound" / name), str(course / "outbound" / LESSON / f"{LESSON}.ipynb"),
                       when, cwd=Path("/tmp"))
    assert made.returncode == 0, made.stderr
    return name


def page_menus(page, shot: str | None = None) -> list[str]:
    """The labels of the Nbgrader menu's visible items (empty when there is no such menu)."""
    bar = page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")
    if not bar.count():
        return []
    bar.click()
    items = [t for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    if shot:
        _shot(page, shot)
    page.keyboard.press("Escape")
    return items


def test_make_hub_refuses_files_other_accounts_can_read_and_names_the_fix(hub):
    """start_hub ran `make hub` first from a world-readable clone with a roster of mode 644."""
    solutions = hub.checkout / "solutions"
    assert f"the roster {hub.roster} (first passwords) has mode -rw-r--r--" in hub.refused, hub.refused
    assert f"Fix: chmod 600 {hub.roster}" in hub.refused
    assert f"{solutions} can be read by others" in hub.refused
    assert f"Fix: chmod -R go-rwx {solutions}" in hub.refused
    assert "hub/install" not in hub.refused, "make hub must refuse before installing anything"
    MEASURED["refused"] = [x for x in hub.refused.splitlines() if "refusing" in x]
    course = hub.settings.course
    assert not (course / hub.roster.name).exists(), "the course copy must not hold the roster"
    leaks = []
    for path in course.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and TEACHER[2].encode() in path.read_bytes():
                leaks.append(path)
        except FileNotFoundError:
            pass  # a grading run's scratch file, gone meanwhile
    assert not leaks, f"a first password is in the course copy: {leaks}"


def test_a_student_reads_the_lessons_data_but_not_the_instructors_files(hub):
    user = RIGHT[0]
    probe = ("import helpers, experiments.training as t, experiments.vision as v; "
             "print(helpers.__file__); print(len(t.load_results()), len(v.load_results()))")
    ran = hub.as_user(user, "student", "python", "-c", probe, cwd=Path("/tmp"))
    assert ran.returncode == 0, f"a student's kernel cannot load the shipped results:\n{ran.stderr[-2000:]}"
    assert ran.stdout.startswith(str(HUB_ENV)), "students run the installed helpers, not a checkout"
    course = hub.settings.course
    secrets = {"the roster": hub.roster, "the first passwords": hub.prefix / "state" / "first-passwords.csv",
               "the clone's solutions": hub.checkout / "solutions" / LESSON / f"{LESSON}.py",
               "the course copy's solutions": course / "solutions" / LESSON / f"{LESSON}.py",
               "the gradebook": course / "grading" / "gradebook.db"}
    for what, secret in secrets.items():
        assert secret.is_file(), f"{secret} is missing: nothing to protect"
        peek = hub.login_shell(user, f"cat '{secret}'")
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, \
            f"a student can read {what}: {secret}"
    listed = hub.login_shell(user, f"ls '{course}' '{hub.checkout / 'solutions'}'")
    assert listed.returncode != 0 and listed.stderr.count("Permission denied") == 2, listed
    assert hub.login_shell(user, f"cat '{hub.checkout / 'README.md'}'").returncode == 0, \
        "the probe itself must work: a student reads the clone's public files"
    solution = course / "solutions" / LESSON / f"{LESSON}.py"
    teacher = hub.login_shell(TEACHER[0], f"cat '{solution}'")
    assert teacher.returncode == 0, "the instructor must reach the course's solutions"


# ------------------------------------------------------------------ instructors

def _log_in(hub: Hub, user: str, password: str):
    """A requests session logged in through the hub's login form, with the user's server up."""
    import requests

    s = requests.Session()
    s.hub_url = hub.url
    s.get(f"{hub.url}/hub/login", timeout=60)
    r = s.post(f"{hub.url}/hub/login", data={"username": user, "password": password,
                                              "_xsrf": s.cookies.get("_xsrf", path="/hub/")}, timeout=120)
    assert r.ok, f"{user} cannot log in: {r.status_code}"
    for _ in range(120):
        r = s.get(f"{hub.url}/user/{user}/lab", timeout=120)
        if r.status_code == 200 and s.cookies.get("_xsrf", path=f"/user/{user}/"):
            return s
        time.sleep(2)
    raise AssertionError(f"{user}'s JupyterLab did not come up: {r.status_code} {r.url}")


def test_instructors_manage_servers_but_cannot_enter_a_students(hub):
    import requests

    teacher = _log_in(hub, *TEACHER[::2])
    _log_in(hub, *BLANK[::2])  # the student's server is running
    made = teacher.post(f"{hub.url}/hub/api/users/{TEACHER[0]}/tokens", json={"note": "scripts"},
                        headers={"X-XSRFToken": teacher.cookies.get("_xsrf", path="/hub/")}, timeout=60)
    assert made.status_code == 201, made.text
    auth = {"Authorization": f"token {made.json()['token']}"}
    users = requests.get(f"{hub.url}/hub/api/users", headers=auth, timeout=60)
    assert users.status_code == 200 and BLANK[0] in {u["name"] for u in users.json()}, users.text[:300]
    assert teacher.get(f"{hub.url}/hub/admin", timeout=60).status_code == 200, "the admin page must open"
    own = requests.get(f"{hub.url}/user/{TEACHER[0]}/api/contents", headers=auth, timeout=60)
    assert own.status_code == 200, "the token must work on the instructor's own server"
    theirs = requests.get(f"{hub.url}/user/{BLANK[0]}/api/contents", headers=auth, timeout=60)
    assert theirs.status_code == 403, f"an instructor's token reached a student's files: {theirs.status_code}"
    entered = teacher.get(f"{hub.url}/user/{BLANK[0]}/lab", timeout=60)
    assert entered.status_code == 403, f"an instructor entered a student's JupyterLab: {entered.status_code}"
    stopped = requests.delete(f"{hub.url}/hub/api/users/{BLANK[0]}/server", headers=auth, timeout=120)
    assert stopped.status_code in (202, 204), f"an instructor must stop a student's server: {stopped}"
    MEASURED["instructor_on_a_students_server"] = {
        "api_contents": theirs.status_code, "lab": entered.status_code, "stop_server": stopped.status_code}


def test_two_instructors_grade_and_hand_grade_the_same_lesson_at_once(hub):
    import threading

    both = (TEACHER, TEACHER2)
    sessions = {user: _log_in(hub, user, password) for user, _, password in both}
    together = threading.Barrier(len(both))

    def instructor(user: str) -> dict:
        s = sessions[user]
        terminal = Terminal(s, user)
        together.wait()
        began = time.monotonic()
        out, status = terminal.run(f"make grade LESSON={LESSON} SUBMISSIONS=exchange")
        took = time.monotonic() - began
        terminal.close()
        api = f"{hub.url}/user/{user}/formgrader/api"
        headers = {"X-XSRFToken": s.cookies.get("_xsrf", path=f"/user/{user}/")}
        free = []
        for nb in s.get(f"{api}/submitted_notebooks/{LESSON}/{LESSON}", headers=headers, timeout=120).json():
            grades = s.get(f"{api}/grades?submission_id={nb['id']}", headers=headers, timeout=120).json()
            free.append(next(g["id"] for g in grades if g["name"] == "why_rows"))
        together.wait(timeout=900)  # both hand-grade the same answers at the same moment
        answers = [s.put(f"{api}/grade/{grade}", json={"manual_score": score}, headers=headers,
                         timeout=120).status_code
                   for score in (0, 1, 2) for grade in free]
        return {"status": status, "grading_s": round(took, 1), "waited": "waiting for it to finish" in out,
                "hand_grades": answers, "tail": out.replace("\r", "")[-2500:]}

    with ThreadPoolExecutor(len(both)) as pool:
        done = dict(zip([u for u, _, _ in both], pool.map(instructor, [u for u, _, _ in both])))
    MEASURED["two_instructors"] = {u: {k: v for k, v in r.items() if k != "tail"} for u, r in done.items()}
    for user, r in done.items():
        assert r["status"] == 0, f"{user}'s make grade failed:\n{r['tail']}"
        assert set(r["hand_grades"]) == {200}, f"{user}'s hand grades: {r['hand_grades']}"
    assert sum(r["waited"] for r in done.values()) == 1, "one grading run waits for the other"
    gradebook = hub.settings.course / "grading" / "gradebook.db"
    assert gradebook.stat().st_mode & 0o060 == 0o060, oct(gradebook.stat().st_mode)
    teacher2 = sessions[TEACHER2[0]]
    subs = teacher2.get(f"{hub.url}/user/{TEACHER2[0]}/formgrader/api/submissions/{LESSON}", timeout=120,
                        headers={"X-XSRFToken": teacher2.cookies.get("_xsrf", path=f"/user/{TEACHER2[0]}/")})
    scores = {x["student"]: (x["code_score"], x["written_score"]) for x in subs.json()}
    assert scores[RIGHT[0]] == (13, 2) and scores[MISTAKE[0]] == (9, 2), scores


# ------------------------------------------------------------------ a class at once

_SPAWN_PORTS = """
import asyncio, sys
sys.path.insert(0, {hub_dir!r})
import classhub
import jupyterhub.spawner as spawner

async def started(self):  # what start() hands the hub, without running a server
    if self.port == 0:
        self.port = spawner.random_port()
    return ("127.0.0.1", self.port)

spawner.LocalProcessSpawner.start = started
offered = [41001, 41001, 41002, 41001]  # the same free port offered to two spawns in a row

async def two_then_one_again(cls):
    ports = iter(offered)
    spawner.random_port = lambda: next(ports)
    if hasattr(cls, 'ports'):  # the class spawner's book, drawing from the same offers
        cls.ports = classhub.PortBook(pick=spawner.random_port)
    a, b = cls(), cls()
    got = [(await a.start())[1], (await b.start())[1]]
    a.clear_state()
    a.port = 0
    return got + [(await a.start())[1]]

print(asyncio.run(two_then_one_again(spawner.LocalProcessSpawner)))
print(asyncio.run(two_then_one_again(classhub.make_spawner_class())))
"""


def test_servers_starting_together_get_different_ports(hub):
    """Two spawns handed the same free port: JupyterHub's local spawner gives both servers that
    port (the second cannot bind it, and the hub sends its student to the first one's server);
    the class spawner gives the second another, and reuses a port once its server has stopped."""
    script = _SPAWN_PORTS.format(hub_dir=str(ROOT / "hub"))
    ran = subprocess.run([str(HUB_ENV / "bin" / "python"), "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    plain, ours = ran.stdout.split("\n")[:2]
    assert plain == "[41001, 41001, 41002]", f"the local spawner's own choice: {plain}"
    assert ours == "[41001, 41002, 41001]", f"the class spawner's ports: {ours}"


RELOADS = 3  # how often a student reloads JupyterLab's first page before calling it broken


def _one_student(hub: Hub, user: str, password: str) -> dict:
    """Log in with the hub's login form, wait for the server, fetch and submit lesson 02 through
    the Assignments tab's own endpoints: what a student's clicks send, without a browser."""
    import requests

    s, out = requests.Session(), {"user": user}
    try:
        s.get(f"{hub.url}/hub/login", timeout=60)
        t0 = time.monotonic()
        r = s.post(f"{hub.url}/hub/login", data={"username": user, "password": password,
                                                  "_xsrf": s.cookies.get("_xsrf", path="/hub/")},
                   allow_redirects=False, timeout=120)
        if r.status_code != 302:
            return out | {"error": f"login answered {r.status_code}"}
        out["login_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        s.get(f"{hub.url}/hub/spawn/{user}", timeout=120)
        # As the hub's "starting" page does: follow the spawn's progress events until ready.
        with s.get(f"{hub.url}/hub/api/users/{user}/server/progress",
                   params={"_xsrf": s.cookies.get("_xsrf", path="/hub/")}, stream=True, timeout=420) as r:
            events = [json.loads(line[5:]) for line in r.iter_lines(decode_unicode=True)
                      if line and line.startswith("data:")]
        if not events or not events[-1].get("ready"):
            return out | {"error": f"the spawn did not finish: {events[-1:] or r.status_code}"}
        # The first page of JupyterLab. A student who gets an error page reloads it: so does this,
        # up to three times, and each answer that was not the page is reported with what it said.
        for attempt in range(1 + RELOADS):
            r = s.get(f"{hub.url}/user/{user}/lab", timeout=120)
            if r.status_code == 200:
                break
            out.setdefault("reloads", []).append(
                f"{r.status_code} at {r.url.removeprefix(hub.url)}: {' '.join(r.text.split())[:160]}")
            time.sleep(5 * (attempt + 1))
        else:
            return out | {"error": f"JupyterLab answered {r.status_code} once the server was up, "
                                   f"{RELOADS} reloads later: {out['reloads']}"}
        out["start_s"] = time.monotonic() - t1
        headers = {"X-XSRFToken": s.cookies.get("_xsrf", path=f"/user/{user}/")}
        form = {"course_id": classhub.COURSE_ID, "assignment_id": LESSON}
        for action in ("fetch", "submit"):
            t2 = time.monotonic()
            r = s.post(f"{hub.url}/user/{user}/assignments/{action}", data=form, headers=headers, timeout=300)
            ok = r.status_code == 200 and r.json().get("success")
            if not ok:
                return out | {"error": f"{action} answered {r.status_code}: {r.text[:300]}"}
            out[f"{action}_s"] = time.monotonic() - t2
        out["idle_mib"] = _mib(classhub.memory_in_use(user))
        return out
    except Exception as err:  # a failure is counted, not raised: the report says which and why
        return out | {"error": f"{type(err).__name__}: {err}"}


def _quantiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return {"median": round(statistics.median(values), 2), "p95": round(p95, 2), "max": round(values[-1], 2)}


def test_forty_students_at_once(hub):
    if not LOAD:
        pytest.skip("HUB_TEST_LOAD=0")
    inbound = hub.exchange / classhub.COURSE_ID / "inbound"
    if not (hub.exchange / classhub.COURSE_ID / "outbound" / LESSON).exists():  # run on its own
        proc = hub.as_user(TEACHER[0], "instructor", "nbgrader", "release_assignment", LESSON)
        assert proc.returncode == 0, proc.stderr[-2000:]
    before = {p.name for p in inbound.iterdir()} if inbound.exists() else set()
    start = time.monotonic()
    with ThreadPoolExecutor(len(LOAD)) as pool:
        results = list(pool.map(lambda row: _one_student(hub, row[0], row[2]), LOAD))
    wall = time.monotonic() - start
    failures = {r["user"]: r["error"] for r in results if "error" in r}
    reloads = {r["user"]: r["reloads"] for r in results if r.get("reloads")}
    ok = [r for r in results if "error" not in r]
    # Every submission reaches the exchange once, and the instructor collects each one once.
    new = sorted({p.name for p in inbound.iterdir()} - before)
    per_student = {u: sum(1 for name in new if name.startswith(f"{u}+{LESSON}+")) for u, _, _ in LOAD}
    collected = hub.as_user(TEACHER[0], "instructor", "nbgrader", "collect", LESSON,
                            "--CourseDirectory.submitted_directory=load-collected")
    assert collected.returncode == 0, collected.stderr[-2000:]
    folder = hub.settings.course / "grading" / "load-collected"
    collected_once = {u: len(list((folder / u / LESSON).glob("*.ipynb"))) if (folder / u).exists() else 0
                      for u, _, _ in LOAD}
    idle = [r["idle_mib"] for r in ok if r.get("idle_mib")]
    MEASURED["load"] = {
        "students": len(LOAD), "wall_s": round(wall, 1), "failures": failures, "reloads": reloads,
        "login_s": _quantiles([r["login_s"] for r in ok]) if ok else None,
        "server_start_s": _quantiles([r["start_s"] for r in ok]) if ok else None,
        "fetch_s": _quantiles([r["fetch_s"] for r in ok]) if ok else None,
        "submit_s": _quantiles([r["submit_s"] for r in ok]) if ok else None,
        "submitted_once": sum(1 for n in per_student.values() if n == 1),
        "collected_once": sum(1 for n in collected_once.values() if n == 1),
        "idle_server_mib": _quantiles(idle) if idle else None,
    }
    kernel = MEASURED.get("server_with_lesson_kernel_peak_mib")
    if idle and kernel:  # one idle server per student, and one lesson kernel each, in 24 GiB
        per_student_mib = kernel
        MEASURED["load"]["students_per_24_gib_with_a_lesson_02_kernel"] = \
            int(24 * 1024 * 0.9 // per_student_mib)
    assert not failures, f"{len(failures)} of {len(LOAD)} students failed: {failures}"
    assert all(n == 1 for n in per_student.values()), f"submissions per student: {per_student}"
    assert all(n == 1 for n in collected_once.values()), f"collected per student: {collected_once}"
    assert wall < 600, f"the class took {wall:.0f} s to log in, start, fetch and submit"


# ------------------------------------------------------------------ a term

def _processes(marker: str, hub_api_port: int) -> list[int]:
    """Pids of this hub's processes whose command line holds ``marker`` (by the hub API port
    JupyterHub gives its services and its own environment)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (proc / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and f"127.0.0.1:{hub_api_port}" in env:
            found.append(int(proc.name))
    return found


def _hub_pid(hub: Hub) -> int:
    supervisor = (hub.prefix / "state" / "supervisor.pid").read_text().split()[0]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == supervisor and "jupyterhub" in stat:
                return int(proc.name)
    raise AssertionError(f"no hub process under the supervisor {supervisor}")


def test_the_hub_comes_back_when_its_process_is_killed_with_one_idle_culler(hub):
    killed = _hub_pid(hub)
    cullers = _processes("jupyterhub_idle_culler", hub.port + 1)
    assert len(cullers) == 1, f"idle cullers of this hub before: {cullers}"
    os.kill(killed, 9)
    began = time.monotonic()
    time.sleep(1)
    hub.wait_until_up(120)
    MEASURED["back_after_kill_9_s"] = round(time.monotonic() - began, 1)
    assert _hub_pid(hub) != killed
    for _ in range(60):  # the new hub starts its culler a moment after it answers
        now = _processes("jupyterhub_idle_culler", hub.port + 1)
        if now and not set(now) & set(cullers):
            break
        time.sleep(0.5)
    assert len(now) == 1 and not set(now) & set(cullers), f"cullers before {cullers}, after {now}"
    assert "the hub ended by itself" in hub.supervisor_log.read_text()


def test_a_backup_restores_into_a_fresh_prefix_a_gradebook_that_exports_the_same(hub):
    backup = hub.prefix / "backups" / "term.tar.gz"
    made = hub.make("hub-backup", f"BACKUP={backup}")
    assert made.returncode == 0, made.stdout + made.stderr
    assert backup.stat().st_mode & 0o077 == 0, "the backup holds every hidden test and submission"
    fresh = hub.prefix / "restored"
    restored = hub.make("hub-restore", f"BACKUP={backup}", HUB_PREFIX=fresh, HUB_EXCHANGE=fresh / "exchange")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert f"restored {RIGHT[0]}'s home" in restored.stdout
    exports = []
    for course in (hub.settings.course, fresh / "course"):
        out = course / "grading" / "export-check.csv"
        ran = subprocess.run([str(HUB_ENV / "bin" / "nbgrader"), "export",
                              f"--CourseDirectory.root={course / 'grading'}",
                              f"--CourseDirectory.course_id={classhub.COURSE_ID}",
                              f"--CsvExportPlugin.to={out}"],
                             cwd="/tmp", capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        exports.append(out.read_text())
    assert exports[0] == exports[1] and RIGHT[0] in exports[0], exports
    inbound = sorted(p.name for p in (fresh / "exchange" / classhub.COURSE_ID / "inbound").iterdir())
    assert inbound == sorted(p.name for p in (hub.exchange / classhub.COURSE_ID / "inbound").iterdir())
    MEASURED["backup_bytes"] = backup.stat().st_size


def test_make_hub_again_keeps_an_instructors_edit_and_serves_https(hub):
    import requests

    solution = hub.settings.course / "solutions" / LESSON / f"{LESSON}.py"
    edited = hub.login_shell(TEACHER[0], f"echo '# one more hidden test, by the instructor' >> '{solution}'")
    assert edited.returncode == 0, edited.stderr
    cert, key = hub.prefix / "state" / "cert.pem", hub.prefix / "state" / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    assert hub.make("hub-stop").returncode == 0
    again = hub.make("hub", f"ROSTER={hub.roster}", HUB_SSL_CERT=cert, HUB_SSL_KEY=key)
    said = again.stdout + again.stderr
    assert again.returncode == 0, said[-3000:]
    assert f"kept the instructors' edit of solutions/{LESSON}/{LESSON}.py" in said, said[-3000:]
    assert solution.read_text().endswith("# one more hidden test, by the instructor\n")
    hub.scheme = "https"
    hub.wait_until_up(300, verify=str(cert))
    page = requests.get(f"{hub.url}/hub/login", verify=str(cert), timeout=60)
    assert page.ok and "username_input" in page.text
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{hub.url}/hub/login", timeout=60)  # a certificate the machine does not trust
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{hub.port}/hub/login", timeout=60)


def test_uninstall_removes_what_make_hub_made_and_accounts_only_when_asked(hub):
    kept = hub.make("hub-uninstall")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "the class accounts are kept" in kept.stdout
    assert not (hub.prefix / "course").exists() and not (hub.prefix / "state").exists()
    assert not (hub.exchange / classhub.COURSE_ID).exists()
    assert HUB_ENV.exists(), "an environment outside the prefix is left alone"
    backup = re.search(r"backed up .*: (/var/backups/attention-hub-\S+\.tar\.gz)", kept.stdout)
    assert backup, kept.stdout
    Path(backup.group(1)).unlink()  # the test's class, not one to keep
    assert classhub.role_of(TEACHER[0]) == "instructor"
    gone = hub.make("hub-uninstall", "ACCOUNTS=1")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert f"removed the class accounts ({len(hub.users)})" in gone.stdout, gone.stdout
    assert classhub.role_of(TEACHER[0]) is None and classhub.role_of(RIGHT[0]) is None
    for group in (classhub.STUDENTS, classhub.INSTRUCTORS):
        assert subprocess.run(["getent", "group", group]).returncode == 2, f"{group} is still there"
