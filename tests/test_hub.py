"""A class on one JupyterHub, end to end, with real processes on loopback: `make hub`'s pieces
(hub/install.sh, hub/roster.py, hub/jupyterhub_config.py), real Linux accounts logging in
through the hub's login page in headless Chromium, nbgrader's exchange, the sandboxed grading
of `make grade`, the formgrader, and feedback fetched back by each student. Then forty
students at once. Screenshots go to build/hub-screenshots/, measurements to
build/hub-report.json. Needs root (accounts) and Debian's Chromium; takes a few minutes."""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, require_chromium
from hubtools import (
    HUB_ENV,
    SHOTS,
    Hub,
    classhub,
    login,
    open_assignments,
    require_root,
    start_hub,
    stop_hub,
    xsrf,
)

from helpers.grading.autograde import solution_answers

LESSON = "02_attention_lookup"
PREFIX = Path(os.environ.get("HUB_TEST_PREFIX", "/var/tmp/attention-hub-test"))
REPORT = ROOT / "build" / "hub-report.json"
TEACHER = ("afs-teacher", "instructor", "teacher-Pw-7")
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
    hub = start_hub(PREFIX, [TEACHER, RIGHT, MISTAKE, BLANK, *LOAD])
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

        # The instructor collects from the exchange and grades in the sandbox, as `make grade`.
        graded = hub.as_user(TEACHER[0], "instructor", "make", "grade", f"LESSON={LESSON}",
                             "SUBMISSIONS=exchange")
        assert graded.returncode == 0, \
            f"make grade on the hub failed:\n{graded.stdout[-3000:]}\n{graded.stderr[-3000:]}"
        assert "collected from the exchange" in graded.stdout
        assert "NOT SANDBOXED" not in graded.stdout + graded.stderr
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
        returned = hub.as_user(TEACHER[0], "instructor", "make", "feedback", f"LESSON={LESSON}", "RELEASE=1")
        assert returned.returncode == 0, f"{returned.stdout[-2000:]}\n{returned.stderr[-2000:]}"

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


def test_a_student_reads_the_lessons_data_but_not_the_instructors_course(hub):
    user = RIGHT[0]
    probe = ("import helpers, helpers.training as t, helpers.vision as v; "
             "print(helpers.__file__); print(len(t.load_results()), len(v.load_results()))")
    ran = hub.as_user(user, "student", "python", "-c", probe, cwd=Path("/tmp"))
    assert ran.returncode == 0, f"a student's kernel cannot load the shipped results:\n{ran.stderr[-2000:]}"
    assert ran.stdout.startswith(str(HUB_ENV)), "students run the installed helpers, not a checkout"
    course = hub.settings.course
    for secret in (course / "solutions" / LESSON / f"{LESSON}.py", course / "grading",
                   hub.prefix / "state" / "first-passwords.csv"):
        peek = hub.as_user(user, "student", "cat", str(secret), cwd=Path("/tmp"))
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, f"a student can read {secret}"
    solution = course / "solutions" / LESSON / f"{LESSON}.py"
    teacher = hub.as_user(TEACHER[0], "instructor", "cat", str(solution))
    assert teacher.returncode == 0, "the instructor must reach the course's solutions"


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
    import subprocess

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
