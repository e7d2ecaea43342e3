"""What each kind of user sees of nbgrader in JupyterLab, started by the Makefile's own targets:
a learner's `make lab` shows the lessons without the instructor's tools (no Formgrader, no
Create Assignment, no Nbgrader menu) and without JupyterLab's news pop-up; an instructor's
`make formgrader` has them all. The settings come from hub/classhub.py, the same ones the class
hub gives its students and instructors."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import classhub
import pytest
from conftest import ROOT, free_port, launch_chromium, require_chromium

TOKEN = "roles-test"



def _get(url: str) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except OSError:
        return 0, ""  # not listening yet


def _make_target(target: str, tmp_path):
    """`make TARGET` on a free port with a token; yields the base URL, then stops it."""
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    env.pop("JUPYTER_CONFIG_PATH", None)
    args = f"--no-browser --ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    log = tmp_path / f"{target}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["make", "-s", target, f"PORT={port}", f"LAB_ARGS={args}"], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while _get(f"{base}/api/status")[0] != 200:
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"make {target} did not start JupyterLab:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)
    return proc, base


def _stop(proc) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def _page_config(html: str) -> dict:
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no page config in the JupyterLab page"
    return json.loads(found.group(1))


def test_role_settings_hide_what_each_role_must_not_see():
    learner, student, instructor = (
        classhub.role_settings(r)["labconfig/page_config.json"]["disabledExtensions"]
        for r in ("learner", "student", "instructor"))
    tools = classhub.NBGRADER_PLUGINS
    for hidden in ("formgrader", "create-assignment", "course-list"):
        assert learner.get(tools[hidden]) and student.get(tools[hidden])
        assert not instructor.get(tools[hidden])
    assert student.get(tools["assignment-list"]) is None, "students fetch and submit in the Assignments tab"
    assert all(d.get(classhub.NEWS_PLUGIN) for d in (learner, student, instructor))


def test_a_learners_make_lab_has_no_instructor_tools_and_no_news(tmp_path):
    proc, base = _make_target("lab", tmp_path)
    try:
        status, html = _get(f"{base}/lab")
        disabled = _page_config(html)["disabledExtensions"]
        for plugin in ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                       "@jupyter/nbgrader:menu", classhub.NEWS_PLUGIN):
            assert plugin in disabled, f"make lab shows {plugin}"
        assert _get(f"{base}/formgrader")[0] == 404, "the formgrader must not be served to a learner"
        assert _get(f"{base}/api/contents/02_attention_lookup")[0] == 200, "the lessons are the root"
        require_chromium()
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = launch_chromium(pw, tmp_path / "profile")
            page = browser.new_page()
            page.goto(f"{base}/lab?token={TOKEN}")
            page.wait_for_selector(".lm-MenuBar-itemLabel", timeout=60_000)
            page.wait_for_timeout(1500)
            menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
            assert "Nbgrader" not in menus and "File" in menus, menus
            assert not page.locator("text=Would you like to receive official Jupyter news").count()
            browser.close()
    finally:
        _stop(proc)


def test_an_instructors_make_formgrader_has_every_tool(tmp_path):
    proc, base = _make_target("formgrader", tmp_path)
    try:
        disabled = _page_config(_get(f"{base}/lab")[1])["disabledExtensions"]
        assert not any(p.startswith("@jupyter/nbgrader") for p in disabled), disabled
        assert _get(f"{base}/formgrader")[0] == 200
    finally:
        _stop(proc)
