"""Offline slides: a lesson's deck shows what it should, loads nothing remote, and runs in a browser.

The remote-URL rule is ``tooling.slides.remote_references``: a remote URL (``https://``, ``http://``
or ``//host``) must not be *loaded* — no ``src``, ``<link href>``, CSS ``url()``/``@import`` or
script URL — while links a reader may click and text (a citation in the prose) are allowed. In the
vendored JavaScript every URL counts unless it is a reviewed mention (``JS_MENTIONS``). The browser
test is the final word: it blocks and records every request that is not a local file.
"""

import re
import time
from pathlib import Path

import conftest
import nbformat
import pytest
from bs4 import BeautifulSoup
from conftest import ROOT, launch_chromium, lessons, require_chromium

from tooling import deck_review, slides
from tooling.build import solution_notebook

LESSON = "02_attention_lookup"
CDN_HOSTS = ("unpkg.com", "cdnjs.cloudflare.com", "cdn.jsdelivr.net", "fonts.googleapis.com",
             "cdn.mathjax.org", "code.jquery.com")


# ------------------------------------------------------------------------------------ the deck

@pytest.fixture(scope="module")
def built(tmp_path_factory, built_solutions) -> dict[str, Path]:
    """Every lesson's deck, executed and exported with the vendor files into a temporary folder,
    as `make slides` does (about a minute on 2 cores)."""
    out = tmp_path_factory.mktemp("slides")
    start = time.perf_counter()
    decks = slides.export(out)
    print(f"exported {len(decks)} decks in {time.perf_counter() - start:.1f} s")
    return {path.name.removesuffix(".slides.html"): path for path in decks}


@pytest.fixture(scope="module")
def deck(built) -> Path:
    return built[LESSON]


@pytest.fixture(scope="module")
def soup(deck) -> BeautifulSoup:
    return BeautifulSoup(deck.read_text(encoding="utf-8"), "html.parser")


def test_deck_and_vendor_files_load_nothing_remote(deck):
    assert slides.offline_problems(deck.parent) == {}
    for path in deck.parent.rglob("*"):
        if path.suffix in (".html", ".js", ".css") and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not [h for h in CDN_HOSTS if h in text], f"{path.name} names a CDN"
    html = deck.read_text(encoding="utf-8")
    assert "embed-amd" not in html and "mermaid" not in html, "nbconvert's CDN scripts are in the deck"


def test_remote_reference_rule_bites():
    found = slides.remote_references
    assert found('<script src="https://unpkg.com/x.js"></script>', "html")
    assert found('<link rel="stylesheet" href="//cdn.example.org/a.css">', "html")
    assert found('<img srcset="a.png 1x, https://example.org/b.png 2x">', "html")
    assert found('<div style="background: url(\'http://example.org/bg.png\')"></div>', "html")
    assert found("<style>@import 'https://fonts.example.org/font.css';</style>", "html")
    assert found("<script>require(['https://cdn.example.org/reveal.js'])</script>", "html")
    assert found("a { background: url(//example.org/x.png) }", "css")
    assert found('load("https://cdn.example.org/lib.js")', "js")
    assert found("var u = '//cdn.example.org/lib.js';", "js")
    # a link is not a load; text, data URIs, comments and local files are fine
    assert not found('<p>See <a href="https://arxiv.org/abs/1706.03762">Vaswani et al.</a></p>', "html")
    assert not found("<p>https://example.org in the prose</p>", "html")
    assert not found('<img src="data:image/png;base64,iVBORw0KGgo=">', "html")
    assert not found("<script>\n  // docs: https://revealjs.com/config/\n  init();\n</script>", "html")
    assert not found('<script src="vendor/reveal.js/dist/reveal.js"></script>', "html")
    assert not found("/* https://example.org */ a { background: url(./fonts/x.woff) }", "css")
    assert not found('ns = "http://www.w3.org/2000/svg"; // see //node.attachEvent(', "js")


def test_missing_local_files_are_reported(tmp_path):
    (tmp_path / "deck.html").write_text('<link rel="stylesheet" href="vendor/theme.css">')
    assert slides.offline_problems(tmp_path) == {"deck.html": ["missing vendor/theme.css"]}
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "theme.css").write_text("@import url(./fonts/a.css);")
    assert slides.offline_problems(tmp_path) == {"vendor/theme.css": ["missing ./fonts/a.css"]}


def _shown_headings(level: str, lesson: str = LESSON) -> list[str]:
    """The text of the ``level`` headings ('#' or '##') that open a shown markdown cell."""
    heads = []
    for cell in solution_notebook(lesson).cells:
        first = cell.source.lstrip().split("\n", 1)[0]
        if cell.cell_type == "markdown" and slides.shown_in_slides(cell) and first.startswith(level + " "):
            heads.append(first[len(level) + 1:].strip())
    return heads


def _normal(text: str) -> str:
    return re.sub(r"[`*_]", "", re.sub(r"\s+", " ", text)).strip()


def _check_title_and_sections(soup: BeautifulSoup, lesson: str) -> int:
    """The first slide holds the lesson's # title, and each ## heading opens a slide of its own."""
    title, *rest = soup.select("div.slides > section")
    (h1,) = title.find_all("h1")
    assert _normal(h1.get_text()).startswith(_normal(_shown_headings("#", lesson)[0])), "no title slide"
    opening = [_normal(s.find(["h1", "h2"]).get_text()) for s in rest if s.find(["h1", "h2"])]
    expected = [_normal(h) for h in _shown_headings("##", lesson)]
    assert expected and all(any(o.startswith(e) for o in opening) for e in expected), (
        f"section slides {opening} do not match the lesson's ## headings {expected}")
    return len(rest)


def test_title_and_section_slides(soup):
    n_sections = _check_title_and_sections(soup, LESSON)
    assert n_sections == len(_shown_headings("##")), "one slide per ## heading after the title"
    assert soup.title.get_text().startswith("02 · Attention is a differentiable lookup")


@pytest.mark.parametrize("lesson", lessons())
def test_every_lesson_makes_an_offline_deck(lesson):
    """Without executing it (fast): title and section slides, no left-out cell, nothing remote."""
    nb = solution_notebook(lesson)
    html = slides.deck_html(nb, lesson)
    assert slides.remote_references(html, "html") == []
    _check_title_and_sections(BeautifulSoup(html, "html.parser"), lesson)
    for marker in ("BEGIN HIDDEN TESTS", "BEGIN SOLUTION", "MARK SCHEME"):
        assert marker not in html, f"'{marker}' is in the {lesson} deck"
    soup = BeautifulSoup(html, "html.parser")
    answers = [slides.model_answer(c) for c in nb.cells if slides.model_answer(c)]
    notes = " ".join(a.get_text() for a in soup.select("aside.notes"))
    assert answers, f"{lesson} has no free-text question"
    for answer in answers:  # the model answer is in the speaker notes, and not on a slide
        words = _normal(answer.split("\n\n", 1)[1].split("\n")[0])[:80]
        assert words in _normal(notes), f"the model answer is not in the {lesson} deck's notes"
        assert words not in _normal(_on_slides(soup)), f"the model answer is on a {lesson} slide"


def _on_slides(soup: BeautifulSoup) -> str:
    """The deck's text without its speaker notes."""
    soup = BeautifulSoup(str(soup), "html.parser")
    for aside in soup.select("aside.notes"):
        aside.decompose()
    return soup.get_text()


def test_grade_solution_and_hidden_cells_are_absent(soup):
    text = _on_slides(soup)
    nb = solution_notebook(LESSON)
    shown = "\n".join(c.source for c in nb.cells if slides.shown_in_slides(c))
    left_out = [c for c in nb.cells if not slides.shown_in_slides(c)]
    assert any(c.metadata.get("nbgrader", {}).get("grade") for c in left_out)
    assert any(c.metadata.get("nbgrader", {}).get("solution") for c in left_out)
    for marker in ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN SOLUTION", "MARK SCHEME"):
        assert marker not in text, f"'{marker}' is in the deck"
    for cell in left_out:
        for line in cell.source.splitlines():
            line = line.strip()
            if len(line) > 12 and line not in shown and not line.startswith("#"):
                assert line not in text, f"a left-out cell's line is in the deck: {line!r}"
    assert "def softmax(x, axis=-1):" not in text, "the exercise's solution is on a slide"
    assert "perm = np.array([3, 0, 4, 1, 2])" in text, "code cells' input is shown"


def test_figures_are_embedded_as_data_uris(soup):
    images = soup.select(".jp-OutputArea img")
    assert len(images) >= 3, "lesson 02 shows at least three figures"
    assert all(img["src"].startswith("data:image/png;base64,") for img in images)


def test_slide_rules_on_a_small_notebook():
    """Solution cells only with show-in-slides; grade cells never; a left-out slide start moves on."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [md("# Title"), md("## Exercise"), code("def f():\n    return 1"), code("check(f)"),
             code("answer = 2"), code("x = 3"), md("## Next")]
    cells[2].metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "f"}
    cells[3].metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "f_tests"}
    cells[3].metadata["tags"] = ["show-in-slides"]
    cells[4].metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "a"}
    cells[4].metadata["tags"] = ["show-in-slides"]
    cells[1].metadata["tags"] = ["hide-in-slides"]
    for cell, kind in zip(cells, ["slide", "slide", "-", "skip", "-", "-", "slide"]):
        cell.metadata["slideshow"] = {"slide_type": kind}
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"widgets": {"state": {}}})
    out = slides.slide_notebook(nb)
    assert [c.source for c in out.cells] == ["# Title", "answer = 2", "x = 3", "## Next"]
    assert out.cells[1].metadata.slideshow.slide_type == "slide", "the hidden ## cell's slide start moves on"
    assert "widgets" not in out.metadata and out.metadata.title == "Title"
    assert "widgets" in nb.metadata, "the input notebook is not modified"


def test_headings_inside_a_cell_start_slides_and_long_prose_continues():
    """A ## heading in the middle of a cell opens a slide, ### a sub-slide; a heading inside a
    code fence does not; prose past MAX_WORDS continues on a sub-slide between paragraphs."""
    md = nbformat.v4.new_markdown_cell
    words = " ".join(["word"] * (slides.MAX_WORDS // 2 + 5))
    long = md(f"## Long\n\n{words}\n\n{words}\n\n- item {words}\n- item two")
    mixed = md("Intro text.\n\n```python\n# not a heading\n```\n\n## Second\nBody.\n\n### Detail\nMore.")
    cells = [md("# Title"), mixed, long]
    for cell, kind in zip(cells, ["slide", "-", "slide"]):
        cell.metadata["slideshow"] = {"slide_type": kind}
    out = slides.slide_notebook(nbformat.v4.new_notebook(cells=cells))
    kinds = [(c.metadata.slideshow.slide_type, c.source.split("\n")[0]) for c in out.cells]
    assert kinds[:4] == [("slide", "# Title"), ("-", "Intro text."), ("slide", "## Second"),
                         ("subslide", "### Detail")]
    assert "# not a heading" in out.cells[1].source, "a heading inside a code fence is code"
    assert [k for k, _ in kinds[4:]] == ["slide", "subslide", "subslide"]
    assert all(len(c.source.split()) <= slides.MAX_WORDS + 10 for c in out.cells[4:])
    assert "\n\n".join(c.source for c in out.cells[4:]) == long.source, "nothing of the prose is lost"


def test_a_second_figure_on_a_slide_moves_to_a_sub_slide():
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    code = nbformat.v4.new_code_cell

    def figure(src):
        return code(src, outputs=[nbformat.v4.new_output("display_data", data=png)])

    cells = [nbformat.v4.new_markdown_cell("## Two plots"), figure("plot_a()"), code("x = 1"),
             figure("plot_b()"), nbformat.v4.new_markdown_cell("## Next"), figure("plot_c()")]
    for cell, kind in zip(cells, ["slide", "-", "-", "-", "slide", "-"]):
        cell.metadata["slideshow"] = {"slide_type": kind}
    out = slides.slide_notebook(nbformat.v4.new_notebook(cells=cells))
    # each code cell is its input and then its outputs (split_outputs); a figure takes its code along
    kinds = [(c.metadata.slideshow.slide_type, c.source, bool(c.get("outputs"))) for c in out.cells]
    assert kinds == [("slide", "## Two plots", False), ("-", "plot_a()", False), ("-", "plot_a()", True),
                     ("-", "x = 1", False), ("subslide", "plot_b()", False), ("-", "plot_b()", True),
                     ("slide", "## Next", False), ("-", "plot_c()", False), ("-", "plot_c()", True)]
    assert [slides._is_output_piece(c) for c in out.cells] == [c[2] for c in kinds]


@pytest.mark.parametrize("lesson", lessons())
def test_no_lesson_puts_several_headings_or_paragraphs_past_the_limit_on_one_slide(lesson):
    for cell in slides.slide_notebook(solution_notebook(lesson)).cells:
        if cell.cell_type != "markdown" or cell.metadata.slideshow.slide_type == "notes":
            continue
        heads = [line for line in cell.source.split("\n") if re.match(r"#{1,3} ", line)]
        assert len(heads) <= 1 and (not heads or cell.source.startswith(heads[0])), cell.source[:200]
        paragraphs = [p for p in cell.source.split("\n\n") if p.strip()]
        if len(paragraphs) > 1:
            assert len(cell.source.split()) <= slides.MAX_WORDS, cell.source[:200]


def test_a_widget_shows_its_static_figure():
    """Widget state stripped: nbconvert falls back to the PNG that WithFallback adds."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2,
                                                          "version_minor": 0},
            "image/png": png, "text/plain": "VBox(...)"}
    cell = nbformat.v4.new_code_cell("display(calculator)", outputs=[
        nbformat.v4.new_output("display_data", data=view)])
    state = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
                                                            "state": {"abc": {"model_name": "VBoxModel"}}}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T"), cell],
                                  metadata={"widgets": state})
    html = slides.deck_html(nb, "widget")
    assert f'src="data:image/png;base64,{png}"' in html
    assert "jupyter-widgets" not in html and "widget-state" not in html and "embed-amd" not in html


# --------------------------------------------------------------------------------- in a browser

def test_missing_browser_skips_unless_required(monkeypatch):
    monkeypatch.setattr(conftest, "CHROMIUM", Path("/nonexistent/chromium"))
    monkeypatch.delenv("REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="REQUIRE_BROWSER=1"):
        require_chromium()
    monkeypatch.setenv("REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_BROWSER=1 but"):
        require_chromium()


def test_deck_renders_offline_in_chromium(deck, tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    blocked, failed = [], []

    def only_files(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    start = time.perf_counter()
    with sync_playwright() as pw:
        browser = launch_chromium(pw, tmp_path / "profile")
        try:
            page = browser.new_page()
            page.route("**/*", only_files)
            # MathJax's placeholder font MathJax_Blank is url('about:blank'): not a missing file
            page.on("requestfailed", lambda r: None if r.url == "about:blank" else failed.append(r.url))
            page.goto(deck.as_uri())
            page.wait_for_selector(".reveal.ready", state="attached", timeout=30_000)
            # reveal.js is loaded by require.js, so it is a module, not a global
            page.evaluate("window.Reveal = require('vendor/reveal.js/dist/reveal.js')")
            assert page.evaluate("Reveal.isReady()")
            assert page.evaluate("Reveal.getTotalSlides()") >= 5
            page.wait_for_function("window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0",
                                   timeout=30_000)

            def show(selector: str):
                """Go to the slide holding the first element matching selector; return that slide."""
                indices = page.evaluate(
                    f"Reveal.getIndices(document.querySelector({selector!r}).closest('section'))")
                page.evaluate(f"Reveal.slide({indices['h']}, {indices.get('v') or 0})")
                page.wait_for_timeout(900)  # the slide transition
                return page.locator(".slides section.present").last

            math = show("div.slides .jp-MarkdownCell .MathJax_Display")
            page.wait_for_function("MathJax.Hub.queue.pending === 0", timeout=10_000)
            assert math.locator(".MathJax_Display").first.is_visible(), "display math is not rendered"
            assert "$$" not in math.inner_text(), "raw $$ left on the math slide"
            assert page.locator(".MathJax_Error, merror").count() == 0
            page.screenshot(path=str(tmp_path / "deck-math.png"))

            figure = show("div.slides .jp-OutputArea img")
            img = figure.locator(".jp-OutputArea img").first
            img.scroll_into_view_if_needed()
            assert img.is_visible() and img.evaluate("i => i.complete && i.naturalWidth > 0")
            box = img.bounding_box()
            assert box["width"] > 200 and box["height"] > 100
            page.screenshot(path=str(tmp_path / "deck-figure.png"))

            page.evaluate("Reveal.slide(0, 0)")
            for _ in range(page.evaluate("Reveal.getTotalSlides()")):  # visit every slide
                page.evaluate("Reveal.next()")
            page.wait_for_timeout(500)
            page.screenshot(path=str(tmp_path / "deck-last.png"))
        finally:
            browser.close()
    print(f"browser check in {time.perf_counter() - start:.1f} s; screenshots in {tmp_path}")
    assert not blocked, f"the deck tried to fetch remote resources: {blocked}"
    assert not failed, f"local files the deck needs are missing: {failed}"
    assert (tmp_path / "deck-figure.png").stat().st_size > 10_000


@pytest.fixture(scope="module")
def reviews(built, tmp_path_factory) -> dict[str, deck_review.Review]:
    """Every deck walked with the keyboard at 1280×720, photographed and printed, as `make slides`
    does after the export."""
    require_chromium()
    start = time.perf_counter()
    done = deck_review.review(list(built.values()), tmp_path_factory.mktemp("browser"))
    print(f"reviewed {len(done)} decks in {time.perf_counter() - start:.1f} s")
    for r in done:
        print(f"{r.deck.name}: {len(r.slides)} slides, tallest {r.tallest:.0f} px, smallest text "
              f"{r.smallest_text:.1f} px, {len(r.figures)} figures, smallest figure text "
              f"{r.smallest_figure_text:.1f} px")
    return {r.deck.name.removesuffix(".slides.html"): r for r in done}


def test_every_slide_of_every_deck_fits_a_projector_walked_with_the_keyboard(reviews):
    """No slide taller or wider than 1280×720, no code cut at the right, every figure's text at
    least MIN_TEXT_PX on screen, nothing requested from the network — in every executed deck."""
    assert sorted(reviews) == lessons()
    problems = {name: r.problems for name, r in reviews.items() if r.problems}
    assert not problems, f"slides that do not work on a 1280×720 projector: {problems}"
    for name, r in reviews.items():
        assert len(r.slides) >= 10, f"{name}: only {len(r.slides)} slides"
        assert r.tallest <= deck_review.SCREEN["height"] + deck_review.FIT_SLACK_PX
    figures = [f for r in reviews.values() for f in r.figures]
    assert len(figures) >= 30 and all(f["text_px"] >= deck_review.MIN_TEXT_PX for f in figures)


def test_contact_sheets_and_pdf_handouts_sit_next_to_the_decks(reviews):
    from PIL import Image

    for name, r in reviews.items():
        assert r.contact_sheet == r.deck.with_name(f"{name}.contact.png")
        with Image.open(r.contact_sheet) as sheet:
            rows = -(-len(r.slides) // deck_review.SHEET_COLUMNS)
            assert sheet.width >= deck_review.SHEET_COLUMNS * deck_review.THUMB_WIDTH
            assert sheet.height >= rows * deck_review.THUMB_WIDTH * 720 // 1280, "thumbnails are missing"
        pdf = r.handout.read_bytes()
        assert r.handout == r.deck.with_name(f"{name}.handout.pdf") and pdf.startswith(b"%PDF")
        pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
        assert pages == r.handout_pages == len(r.slides), f"{name}: {pages} pages for {len(r.slides)} slides"
        assert b"speaker-notes" not in pdf


def test_think_questions_have_their_model_answer_in_the_speaker_notes(reviews, built):
    for name, r in reviews.items():
        noted = [s for s in r.slides if s["notes"].startswith("Model answer")]
        assert len(noted) == 1, f"{name}: model answers in the notes of {len(noted)} slides"
        html = built[name].read_text(encoding="utf-8")
        assert "=== BEGIN MARK SCHEME" not in html


def test_the_fit_check_bites_on_an_unpaginated_deck(deck, tmp_path):
    """Without the paginating script, lesson 02's deck has slides taller than the screen."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    html = deck.read_text(encoding="utf-8")
    start = html.index("<script>\n(function () {\n  // Printed text keeps its columns")
    end = html.index("</script>", start) + len("</script>")
    flag = "<script>document.querySelector('.reveal').setAttribute('data-paginated', 'true');</script>"
    raw = deck.parent / "unpaginated.slides.html"
    raw.write_text(html[:start] + flag + html[end:], encoding="utf-8")
    with sync_playwright() as pw:
        browser = deck_review.launch(pw, tmp_path / "profile")
        seen = deck_review.walk(browser.new_page(), raw.as_uri())
        browser.close()
    assert deck_review.misfits(seen), "the check must find the slides that overflow without pagination"


_TEXT_FIT = ("kids = [].concat.apply([], kids.map(function (kid) { return textParts(kid, limit); }));",
             "fitWidth(s);")


def test_a_long_printed_table_continues_on_sub_slides_at_full_size(built, reviews, tmp_path):
    """Lesson 07 prints a 32-line table (three seeds) whose lines are wider than a slide: on the
    deck its columns stay in line and its rows continue on a sub-slide, cut between seeds, with
    no text under MIN_TEXT_PX; without that rule the cell is zoomed out and the text check says so."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    deck = built["07_transformer"]
    html = deck.read_text(encoding="utf-8")
    assert all(line in html for line in _TEXT_FIT), "the template's text rule changed: update this test"
    zoomed = deck.with_name("zoomed.slides.html")
    zoomed.write_text(html.replace(_TEXT_FIT[0], "").replace(_TEXT_FIT[1], ""), encoding="utf-8")
    parts = """() => Array.from(document.querySelectorAll('.jp-OutputArea-output pre'))
        .filter(p => p.textContent.includes('layer head'))
        .map(p => ({text: p.textContent, wraps: p.scrollWidth > p.clientWidth + 1
                                                || getComputedStyle(p).whiteSpace !== 'pre',
                    px: parseFloat(getComputedStyle(p).fontSize) * Reveal.getScale()}))"""
    with sync_playwright() as pw:
        browser = deck_review.launch(pw, tmp_path / "profile")
        page = browser.new_page()
        deck_review.open_deck(page, deck.as_uri())
        shown = page.evaluate(parts)
        seen = deck_review.walk(page, zoomed.as_uri())
        browser.close()
    rows = [line for part in shown for line in part["text"].splitlines() if line.strip()]
    assert len(shown) >= 2 and len(rows) == 3 * 10, [p["text"][:40] for p in shown]
    assert all(p["text"].lstrip().startswith("seed") for p in shown), "a part must begin with a seed's header"
    assert not any(p["wraps"] for p in shown), "the table's lines must not wrap"
    assert min(p["px"] for p in shown) >= deck_review.MIN_TEXT_PX
    assert [m for m in deck_review.misfits(seen) if "text" in m], "the zoomed table must be caught"


def test_the_text_check_bites_on_figures_drawn_for_a_notebook(built, reviews, tmp_path):
    """Lesson 02's figures as a learner's notebook draws them are too small on a projector; the
    slide build enlarges them (its smallest text before and after is printed)."""
    require_chromium()
    out = tmp_path / "plain"
    slides.copy_vendor(out)
    plain = slides.export_lesson(LESSON, out, enlarge=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = deck_review.launch(pw, tmp_path / "profile")
        seen = deck_review.walk(browser.new_page(), plain.as_uri())
        browser.close()
    figures = deck_review.figure_text(plain.read_text(encoding="utf-8"), seen)
    before = min(f["text_px"] for f in figures)
    after = min(f["text_px"] for f in reviews[LESSON].figures)
    print(f"lesson 02, smallest figure text on screen: {before} px as drawn for a notebook, "
          f"{after} px in the deck")
    assert deck_review.figure_problems(figures), "figures drawn for a notebook must be caught"
    assert before < deck_review.MIN_TEXT_PX <= after


def test_the_speaker_view_shows_the_model_answer(deck, tmp_path):
    """S opens reveal.js's speaker view, offline; walking to the think question with the keyboard
    brings its model answer into the view's notes."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = deck_review.launch(pw, tmp_path / "profile")
        try:
            page = browser.new_page()
            deck_review.open_deck(page, deck.as_uri())
            page.locator(".reveal").click(position={"x": 5, "y": 5})
            with browser.expect_page() as opened:
                page.keyboard.press("s")
            speaker = opened.value
            # the view says it is connected to the deck by hiding its status line
            speaker.wait_for_function("document.querySelector('#connection-status') && "
                                      "document.querySelector('#connection-status').style.display === 'none'",
                                      timeout=30_000)
            page.bring_to_front()
            for _ in range(80):
                page.keyboard.press("Space")
                page.wait_for_timeout(100)
                if page.evaluate("(Reveal.getSlideNotes() || '').length > 0"):
                    break
            speaker.wait_for_function(
                "document.querySelector('.speaker-controls-notes').innerText.includes('Model answer')",
                timeout=30_000)
            assert "weighted average" in speaker.locator(".speaker-controls-notes").inner_text()
            speaker.screenshot(path=str(tmp_path / "speaker-view.png"))
        finally:
            browser.close()


def test_a_deck_made_from_the_same_inputs_is_kept(tmp_path, monkeypatch):
    """`make slides` again with nothing changed executes no lesson; a changed input (here, its
    digest) makes the deck again."""
    made = []

    def fake_export(lesson, out_dir, root):
        made.append(lesson)
        deck = Path(out_dir) / f"{lesson}.slides.html"
        deck.write_text("a deck")
        return deck

    monkeypatch.setattr(slides, "export_lesson", fake_export)
    lesson = "02_attention_lookup"
    first = slides._export_timed(lesson, tmp_path, ROOT, 1)
    again = slides._export_timed(lesson, tmp_path, ROOT, 1)
    assert made == [lesson] and first[1] is not None and again == (first[0], None)
    (tmp_path / f"{lesson}.slides.digest").write_text("made from other inputs")
    assert slides._export_timed(lesson, tmp_path, ROOT, 1)[1] is not None and made == [lesson, lesson]
