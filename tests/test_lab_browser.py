"""JupyterLab in a real browser: a learner's notebook runs, and the attention calculator is a live widget.

JupyterLab runs from this environment on a temporary copy of ``notebooks/`` with its own config,
data and runtime folders (the user's settings do not interfere); headless Chromium drives it like
a learner: open, Run ▸ Run All Cells, save, change the calculator's query. Skipped without
/usr/bin/chromium unless REQUIRE_BROWSER=1. Takes 20–30 s.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, free_port, launch_chromium, require_chromium
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

LESSON = "02_attention_lookup"
TOKEN = "attention-from-scratch-test"
# Lab settings for the run: no news or update checks (offline), every cell in the DOM.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"checkForUpdates": False, "fetchNews": "false"},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}



def _api(base: str, path: str, method: str = "GET"):
    request = urllib.request.Request(base + path, method=method, headers={"Authorization": f"token {TOKEN}"})
    return urllib.request.urlopen(request, timeout=5)


@pytest.fixture
def lab(tmp_path, built_solutions):
    """JupyterLab on a copy of notebooks/ plus the lesson's solution notebook; yields (url, root)."""
    require_chromium()
    root = tmp_path / "root"
    shutil.copytree(ROOT / "notebooks", root)
    shutil.copy(built_solutions[LESSON], root / LESSON / f"{LESSON}_solution.ipynb")
    config = tmp_path / "jupyter-config"
    for name, values in LAB_SETTINGS.items():
        path = config / "lab" / "user-settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(values))
    (config / "jupyter_server_config.json").write_text(json.dumps(
        {"LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"), IPYTHONDIR=str(tmp_path / "ipython"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    port = free_port()
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log_path = tmp_path / "jupyter-lab.log"
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        server = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"JupyterLab exited:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"JupyterLab did not start:\n{log_path.read_text()[-3000:]}"
            try:
                _api(base, "/api/status")
                break
            except OSError:
                time.sleep(0.25)
        yield base, root
    finally:
        try:
            _api(base, "/api/shutdown", method="POST")  # stops its kernels too
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in the current tab
PROMPTS = (f"Array.from(document.querySelectorAll('{PANEL} .jp-CodeCell .jp-InputPrompt'))"
           ".map(p => p.textContent)")
IDLE = f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]'


def _menu(page, menu: str, item: str) -> None:
    """Click ``menu`` ▸ ``item`` in the menu bar, like a learner."""
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    entry = page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel", has_text=item).first
    entry.wait_for(state="visible")
    page.wait_for_timeout(300)  # let the menu settle: a click while it opens is lost
    entry.click()


def _run_all_cells(page) -> None:
    """Run ▸ Run All Cells, then wait until the kernel has finished (or stopped at an error)."""
    page.locator(f"{PANEL} .jp-Cell .jp-InputArea-prompt").first.click()  # make this notebook current
    page.wait_for_selector(IDLE, timeout=30_000)
    page.locator("#jp-main-statusbar", has_text="| Idle").wait_for(timeout=30_000)  # kernel connected
    started = f"{PROMPTS}.some(t => /\\[(\\*|\\d+)\\]/.test(t))"
    for attempt in range(3):
        _menu(page, "Run", "Run All Cells")
        try:
            page.wait_for_function(started, timeout=8_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            print("Run All Cells did not start; clicking it again")
    page.wait_for_function(f"!{PROMPTS}.some(t => t.includes('*'))", timeout=60_000)
    page.wait_for_selector(IDLE, timeout=30_000)


def _save_and_read(page, path: Path) -> nbformat.NotebookNode:
    """Save from the File menu and read the saved notebook, with the outputs the browser shows."""
    _menu(page, "File", "Save Notebook")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        nb = nbformat.read(path, as_version=4)
        if any(c.get("execution_count") for c in nb.cells if c.cell_type == "code"):
            return nb
        page.wait_for_timeout(250)  # not time.sleep: Playwright serves page.route only while called
    raise AssertionError(f"{path.name} was not saved with its outputs")


def _errors(nb) -> list[tuple[str, str]]:
    return [(out.ename, cell.source[:60]) for cell in nb.cells if cell.cell_type == "code"
            for out in cell.outputs if out.output_type == "error"]


def test_lab_runs_the_lesson_and_the_calculator_is_live(lab, tmp_path):
    base, root = lab
    blocked = []

    def only_this_server(route):
        if route.request.url.startswith(base):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    start = time.perf_counter()
    with sync_playwright() as pw:
        browser = launch_chromium(pw, tmp_path / "profile", height=900)
        page = browser.new_page()
        page.route("**/*", only_this_server)
        try:

            # The student notebook stops at the first exercise, with NotImplementedError only.
            student = root / LESSON / f"{LESSON}.ipynb"
            page.goto(f"{base}/lab/tree/{LESSON}/{student.name}?reset&token={TOKEN}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            _run_all_cells(page)
            errors = _errors(_save_and_read(page, student))
            assert errors, "the student notebook should stop at an exercise's NotImplementedError"
            assert all(name == "NotImplementedError" for name, _ in errors), f"unexpected errors: {errors}"
            traceback = page.locator(f"{PANEL} .jp-OutputArea-output", has_text="NotImplementedError").first
            traceback.scroll_into_view_if_needed()
            assert traceback.is_visible()
            page.screenshot(path=str(tmp_path / "lab-student.png"))

            # The solution notebook runs without errors and shows the live calculator.
            solved = root / LESSON / f"{LESSON}_solution.ipynb"
            page.locator(".jp-DirListing-item", has_text=solved.name).first.dblclick()
            page.wait_for_selector('.lm-TabBar-tab.lm-mod-current:has-text("_solution")')
            page.wait_for_selector(f"{PANEL} .jp-Notebook .jp-Cell")
            _run_all_cells(page)
            panel = page.locator(PANEL)
            select = panel.locator(".jupyter-widgets .widget-dropdown select").first
            select.wait_for(state="visible", timeout=20_000)
            table = panel.locator(".jupyter-widgets .widget-html-content", has_text="Query").first
            assert "Query voltage" in table.inner_text()
            select.select_option(label="spike")
            page.wait_for_function(
                "Array.from(document.querySelectorAll('.widget-html-content'))"
                ".some(e => e.innerText.includes('Query spike'))", timeout=10_000)
            assert "Query voltage" not in table.inner_text(), "the table did not follow the new query"
            select.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "lab-widget.png"))
            assert _errors(_save_and_read(page, solved)) == []
        except Exception:
            page.screenshot(path=str(tmp_path / "lab-failure.png"))
            raise
        finally:
            browser.close()
    print(f"JupyterLab browser check in {time.perf_counter() - start:.1f} s; screenshots in {tmp_path}")
    assert not blocked, f"JupyterLab tried to reach the network: {blocked}"
