"""Offline reveal.js slides of every lesson, exported from the executed solution notebooks.

    python -m tooling.slides OUT_DIR [LESSON ...]   # OUT_DIR/NN_topic.slides.html and OUT_DIR/vendor/

What a deck shows:

- slides from each cell's ``slideshow`` metadata, as ``tooling.build`` sets it: the lesson's ``#``
  heading is the title slide, each ``##`` heading a section slide, each ``###`` a sub-slide —
  also where a heading sits in the middle of a markdown cell; prose longer than ``MAX_WORDS``
  continues on sub-slides, cut between paragraphs; a second figure on a slide moves to a
  sub-slide of its own;
- a deck that fits the screen: once the browser has laid it out, the template's script moves
  what overflows a slide onto further sub-slides, cuts printed output taller than a slide between
  lines and zooms out any other single cell taller than a slide; code wraps instead of running
  off the right edge, and printed lines a little too wide get a smaller font (not under
  ``deck_review.MIN_TEXT_PX`` on screen) so tables keep their columns;
- the input and the outputs of every code cell (each output a piece of its own, so a figure can
  continue on a sub-slide after its code): figures as embedded PNG data URIs drawn for a projector
  (``tooling.projector``: text at least about 14 px on a 1280-wide screen, thicker lines), math
  typeset by MathJax, and for a widget its static figure (``metadata.widgets`` is stripped, so
  nbconvert falls back to the PNG that ``helpers.widgets.WithFallback`` puts beside the widget);
- speaker notes (reveal.js's ``S`` key): the model answer of each free-text question (its mark
  scheme) and every markdown cell tagged ``notes``. They are in the HTML: students get the PDF
  handout that ``tooling.deck_review`` prints, which leaves them out.

What a deck leaves out:

- cells tagged ``hide-in-slides`` and every grade cell: visible checks, hidden tests, free-text
  answers with their mark scheme;
- the solution cells of exercises (nbgrader ``"solution": true``): the instructor teaches the
  exercise prompt, not its answer. Tag a solution cell ``show-in-slides`` to show it anyway, for
  example to discuss it after the deadline. Grade cells are never shown, whatever their tags.

Offline: a deck loads nothing from the network. reveal.js comes from the ``sphinx-revealjs``
package, require.js, jQuery and MathJax 2 from ``nbclassic``; the files a deck loads are copied
into ``OUT_DIR/vendor/`` at export time (third-party code is never committed), and the template in
``tooling/slides_template/`` removes nbconvert's CDN scripts (mermaid, widget embedding). Every
exported file is checked with :func:`remote_references` (the rule is in its docstring);
``tests/test_slides.py`` also opens a deck in a headless browser that blocks every non-file request.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import nbformat

from .build import ROOT, build_solutions, lesson_ids, slide_type

TEMPLATE_DIR = Path(__file__).resolve().parent / "slides_template"
SHOW_TAG, HIDE_TAG, NOTES_TAG = "show-in-slides", "hide-in-slides", "notes"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # nbclassic's MathJax has no TeX-AMS_CHTML-full
THEME = "white"  # its fonts ship with reveal.js; nbconvert's default, "simple", imports Google Fonts
# Prose a room can read on one slide; a longer markdown cell continues on sub-slides, split
# between paragraphs.
MAX_WORDS = 110
PROJECTOR_CELL = "import tooling.projector\ntooling.projector.install(enlarge={enlarge})"
_HEADING = re.compile(r"^(#{1,3}) \S")


def _vendor_sources() -> dict[str, tuple[Path, list[str]]]:
    """vendor/<name>: (package folder, the files and folders a deck loads from it)."""
    import nbclassic
    import sphinx_revealjs

    reveal = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    components = Path(nbclassic.__file__).parent / "static" / "components"
    return {
        "reveal.js": (reveal, ["LICENSE", "dist/reveal.js", "dist/reveal.css", f"dist/theme/{THEME}.css",
                               "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js"]),
        "requirejs": (components / "requirejs", ["require.js"]),
        "jquery": (components / "jquery", ["dist/jquery.min.js"]),
        # The combined config, its input and output jax, the STIX-Web fonts it is told to use and the
        # extensions it or its menu loads. Left out: the SVG renderer (3 MB), other languages, and the
        # accessibility explorer, whose speech engine would come from a CDN.
        "mathjax": (components / "MathJax", [
            "MathJax.js", f"config/{MATHJAX_CONFIG.split(',')[0]}.js", "config/Safe.js",
            "extensions/a11y/accessibility-menu.js", "jax/input", "jax/element",
            *(f"jax/output/{out}" for out in ("HTML-CSS", "NativeMML", "PreviewHTML", "CommonHTML")),
            "fonts/HTML-CSS/STIX-Web/woff", "localization/en",
            *(f"extensions/{p.name}" for p in (components / "MathJax" / "extensions").iterdir()
              if p.name != "a11y")]),
    }


def copy_vendor(out_dir: Path) -> Path:
    """Copy the third-party files decks load into ``out_dir/vendor``; returns that folder."""
    vendor = Path(out_dir) / "vendor"
    for name, (source, parts) in _vendor_sources().items():
        for part in parts:
            src, dst = source / part, vendor / name / part
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
    return vendor


def _exporter():
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    c = Config()
    c.SlidesExporter.reveal_url_prefix = "vendor/reveal.js"
    c.SlidesExporter.require_js_url = "vendor/requirejs/require.js"
    c.SlidesExporter.jquery_url = "vendor/jquery/dist/jquery.min.js"
    c.SlidesExporter.mathjax_url = f"vendor/mathjax/MathJax.js?config={MATHJAX_CONFIG}"
    c.SlidesExporter.extra_template_paths = [str(TEMPLATE_DIR)]
    c.SlidesExporter.template_file = "offline_reveal.html.j2"
    c.SlidesExporter.reveal_theme = THEME
    c.SlidesExporter.reveal_scroll = True  # a long code cell scrolls instead of overflowing
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    c.SlidesExporter.embed_images = True  # images in markdown become data URIs too
    return SlidesExporter(config=c)


def shown_in_slides(cell) -> bool:
    """The rules of the module docstring: hidden, grade and (untagged) solution cells are left out."""
    tags = cell.metadata.get("tags", [])
    nbg = cell.metadata.get("nbgrader", {})
    if HIDE_TAG in tags or nbg.get("grade"):
        return False
    if nbg.get("solution"):
        return SHOW_TAG in tags
    return cell.metadata.get("slideshow", {}).get("slide_type") != "skip" or SHOW_TAG in tags


def _with_fences(text: str):
    """Each line of markdown ``text`` with whether it lies inside a code fence."""
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        yield line, fenced


def _split_at_headings(source: str) -> list[str]:
    """The markdown ``source`` cut before every ``#``, ``##`` and ``###`` heading outside code fences."""
    pieces, current = [], []
    for line, fenced in _with_fences(source):
        if not fenced and _HEADING.match(line) and any(x.strip() for x in current):
            pieces.append("\n".join(current).strip("\n"))
            current = []
        current.append(line)
    pieces.append("\n".join(current).strip("\n"))
    return [p for p in pieces if p.strip()]


def _split_long(piece: str, max_words: int = MAX_WORDS) -> list[str]:
    """``piece`` in runs of whole paragraphs of at most ``max_words`` words (a longer paragraph,
    list or fenced block stays whole)."""
    blocks, current = [], []
    for line, fenced in _with_fences(piece):  # paragraphs: blank-line separated, fences kept whole
        if not line.strip() and not fenced:
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    blocks = [part for block in blocks for part in _list_items(block, max_words)]
    runs, run, words = [], [], 0
    for block in blocks:
        n = len(block.split())
        if run and words + n > max_words:
            runs.append("\n\n".join(run))
            run, words = [], 0
        run.append(block)
        words += n
    if run:
        runs.append("\n\n".join(run))
    return runs


_ITEM = re.compile(r"^(?:[-*+]|\d+[.)]) \S")


def _list_items(block: str, max_words: int) -> list[str]:
    """A block longer than ``max_words`` that is a list, or ends in one: its lead-in and each
    top-level item apart, so a long list can continue on the next sub-slide."""
    if len(block.split()) <= max_words:
        return [block]
    parts, current = [], []
    for line in block.split("\n"):
        if _ITEM.match(line) and current:
            parts.append("\n".join(current))
            current = []
        current.append(line)
    parts.append("\n".join(current))
    return parts


def split_markdown(cell) -> list:
    """A shown markdown cell as the cells its slides need: a new slide at each ``#``/``##``
    heading, a sub-slide at each ``###`` heading and where prose runs past ``MAX_WORDS``."""
    kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
    out = []
    for i, piece in enumerate(_split_at_headings(cell.source)):
        # after the first piece every piece opens with a heading: the build's own rule applies
        piece_kind = kind if i == 0 else slide_type(nbformat.v4.new_markdown_cell(piece))
        for j, run in enumerate(_split_long(piece)):
            new = nbformat.from_dict(cell)
            new.source = run
            new.id = f"{cell.get('id', 'md')}-{len(out)}"[:64]
            new.metadata.slideshow = {"slide_type": piece_kind if j == 0 else "subslide"}
            out.append(new)
    return out or [cell]


def _has_figure(cell) -> bool:
    return cell.cell_type == "code" and any(
        "image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {})
        for out in cell.get("outputs", []))


def _is_output_piece(cell) -> bool:
    return cell.cell_type == "code" and cell.metadata.get("transient", {}).get("remove_source", False)


def one_figure_per_slide(cells: list) -> list:
    """A code cell that draws a figure starts a sub-slide when the slide it would continue
    already shows a figure: a projected slide holds one figure at a readable size. (A figure
    split from its code by :func:`split_outputs` takes its code along.)"""
    seen_figure = False
    for i, cell in enumerate(cells):
        kind = cell.metadata.setdefault("slideshow", {}).get("slide_type", "-")
        if kind in ("slide", "subslide"):
            seen_figure = False
        figure = _has_figure(cell)
        if figure and seen_figure and kind in ("-", "fragment"):
            start = i
            while (start > 0 and _is_output_piece(cells[start]) and cells[start - 1].cell_type == "code"
                   and cells[start - 1].source == cell.source):
                start -= 1
            if cells[start].metadata.slideshow.get("slide_type", "-") in ("-", "fragment"):
                cells[start].metadata.slideshow["slide_type"] = "subslide"
            seen_figure = False
        seen_figure = seen_figure or figure
    return cells


_MARK_SCHEME = re.compile(r"=== BEGIN MARK SCHEME ===(.*?)=== END MARK SCHEME ===", re.S)


def model_answer(cell) -> str | None:
    """A free-text answer cell's model answer (its mark scheme), for the speaker notes; else None."""
    nbg = cell.metadata.get("nbgrader", {})
    if cell.cell_type != "markdown" or not (nbg.get("grade") and nbg.get("solution")):
        return None
    scheme = _MARK_SCHEME.search(cell.source)
    if not scheme:
        return None
    points = nbg.get("points")
    return f"**Model answer**{f' ({points:g} points)' if points else ''}:\n\n{scheme.group(1).strip()}"


def _as_notes(cell, source: str):
    new = nbformat.v4.new_markdown_cell(source)
    new.id = f"{cell.get('id', 'notes')}-notes"[:64]
    new.metadata.slideshow = {"slide_type": "notes"}
    return new


def split_outputs(cell) -> list:
    """A code cell as its input and then each output as a cell of its own, so that a slide too
    tall for the screen can continue between the code and its figure rather than shrink both."""
    if cell.cell_type != "code" or not cell.get("outputs"):
        return [cell]
    kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
    pieces = []
    if cell.source.strip():
        head = nbformat.from_dict(cell)
        head.outputs = []
        pieces.append(head)
    for i, output in enumerate(cell.outputs):
        part = nbformat.from_dict(cell)
        part.id = f"{cell.get('id', 'code')}-out{i}"[:64]
        part.outputs = [output]
        part.metadata.transient = {"remove_source": True}
        part.metadata.slideshow = {"slide_type": "-"}
        pieces.append(part)
    pieces[0].metadata.slideshow = {"slide_type": kind}
    return pieces


def slide_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of the executed ``nb`` holding only what the slides show, widgets as their figures,
    model answers of free-text questions and cells tagged ``notes`` as speaker notes."""
    nb = nbformat.from_dict(nb)
    nb.metadata.pop("widgets", None)  # no widget state: nbconvert shows each widget's PNG fallback
    kept, pending = [], None
    for cell in nb.cells:
        show = cell.metadata.setdefault("slideshow", {}).get("slide_type", "-")
        answer = model_answer(cell)
        if answer:
            kept.append(_as_notes(cell, answer))
            continue
        if NOTES_TAG in cell.metadata.get("tags", []) and cell.cell_type == "markdown":
            kept.append(_as_notes(cell, cell.source))
            continue
        if not shown_in_slides(cell):
            if show in ("slide", "subslide"):  # a left-out cell that opened a slide hands that on
                pending = show if pending != "slide" else pending
            continue
        if show == "skip":  # shown by its show-in-slides tag
            cell.metadata.slideshow["slide_type"] = show = "-"
        if pending and show in ("-", "fragment"):
            cell.metadata.slideshow["slide_type"] = pending
        pending = None
        kept += split_markdown(cell) if cell.cell_type == "markdown" else split_outputs(cell)
    nb.cells = one_figure_per_slide(kept)
    title = next((c.source.lstrip()[2:].split("\n")[0] for c in kept
                  if c.cell_type == "markdown" and c.source.lstrip().startswith("# ")), None)
    if title:
        nb.metadata["title"] = title.strip()
    return nb


KERNEL = "python3"  # in export's processes: the warm kernels of helpers.grading.warmkernel


def _use_kernels(spec_dir: str, name: str) -> None:
    """In an export process: run notebooks in the kernels of the kernelspec ``name`` in ``spec_dir``."""
    global KERNEL
    os.environ["JUPYTER_PATH"] = spec_dir
    KERNEL = name


def execute(path: Path, timeout: int = 600, enlarge: bool = True) -> nbformat.NotebookNode:
    """Run a copy of the notebook at ``path`` in a fresh kernel whose working directory is
    temporary, its figures made for a projector (``tooling.projector``; ``enlarge=False``: drawn
    as in a learner's notebook, their text size only recorded)."""
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="slides-") as tmp:
        copy = Path(tmp) / Path(path).name
        shutil.copy2(path, copy)
        nb = nbformat.read(copy, as_version=4)
        nb.cells.insert(0, nbformat.v4.new_code_cell(PROJECTOR_CELL.format(enlarge=enlarge)))
        NotebookClient(nb, timeout=timeout, kernel_name=KERNEL,
                       resources={"metadata": {"path": tmp}}).execute()
        del nb.cells[0]
    return nb


def deck_html(nb: nbformat.NotebookNode, name: str, folder: Path | None = None) -> str:
    """The deck of an executed notebook; ``folder`` resolves images linked from its markdown."""
    html, _ = _exporter().from_notebook_node(
        slide_notebook(nb), resources={"metadata": {"name": name, "path": str(folder or ROOT)}})
    problems = remote_references(html, "html")
    if problems:
        raise RuntimeError(f"the {name} deck would load remote resources: {problems}")
    return html


def export_lesson(lesson: str, out_dir: Path, root: Path = ROOT, enlarge: bool = True) -> Path:
    """Execute ``solutions/<lesson>/<lesson>.ipynb`` and write ``out_dir/<lesson>.slides.html``."""
    source = root / "solutions" / lesson / f"{lesson}.ipynb"
    html = deck_html(execute(source, enlarge=enlarge), lesson, source.parent)
    out = Path(out_dir) / f"{lesson}.slides.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out


# ---------------------------------------------------------------- what counts as a remote resource

_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # a scheme or protocol-relative //host
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_CSS_REF = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)|@import\s+(['\"])(.*?)\3", re.I | re.S)
_JS_URL = re.compile(r"(?:https?:|(?<=[\"'`]))//[a-z0-9-]+(?:\.[a-z0-9-]+)+[^\s\"'`()<>,;\\]*", re.I)
_JS_LINE_COMMENT = re.compile(r"^\s*//.*$", re.M)
_LOADING_ATTRS = {"src", "srcset", "poster", "data", "background", "xlink:href"}
_HREF_LOADS_ON = {"link", "base", "image", "use", "script", "feimage"}  # not <a>: a link is not a load

# URLs that vendored JavaScript mentions but never fetches, each reviewed: XML namespace names,
# licence and documentation links in comments and in messages shown to the reader.
JS_MENTIONS = {
    "http://www.w3.org/1998/Math/MathML", "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/1999/xlink", "http://www.w3.org/1999/XSL/Transform", "http://exslt.org/common",
    "http://www.w3.org/2001/10/synthesis",
    "http://www.apache.org/licenses/LICENSE-2.0", "http://www.mathjax.org", "http://www.mathjax.org/",
    "http://www.stixfonts.org/", "https://github.com/mathjax/MathJax/tree/master/fonts/HTML-CSS/TeX/otf",
    "https://webkit.org/b/153317", "http://dev.jquery.com/ticket/2709",
    "https://requirejs.org/docs/errors.html#", "https://github.com/requirejs/requirejs/issues/273",
    "https://github.com/requirejs/requirejs/issues/187",
    "https://github.com/requirejs/requirejs/blob/master/LICENSE",
    "https://github.com/google/closure-library/wiki/goog.module:-an-ES6-module-like-alternative-to-goog.provide.",
    "https://connect.microsoft.com/IE/feedback/details/648057/"
    "script-onload-event-is-not-fired-immediately-after-script-execution",
    "https://revealjs.com", "https://hakim.se", "https://github.com/markedjs/marked.",
    "https://marked.js.org/#/USING_ADVANCED.md#options",
}


def _css_refs(text: str) -> list[str]:
    """Every ``url()`` and ``@import`` target of a style sheet, comments removed, ``data:`` URIs left out."""
    refs = ((m.group(2) or m.group(4) or "").strip() for m in _CSS_REF.finditer(_CSS_COMMENT.sub("", text)))
    return [r for r in refs if r and not r.lower().startswith("data:")]


class _HTMLRefs(HTMLParser):
    """Collects what an HTML page loads: ``loads`` from attributes and CSS, ``scripts`` inline code."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads: list[tuple[str, str]] = []  # (where, reference)
        self.scripts: list[str] = []
        self._raw: str | None = None  # inside <script> or <style>

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if not value:
                continue
            if name in _LOADING_ATTRS or (name == "href" and tag in _HREF_LOADS_ON):
                values = [v.strip().split(" ")[0] for v in value.split(",")] if name == "srcset" else [value]
                self.loads += [(f"<{tag} {name}>", v.strip()) for v in values if v.strip()]
            elif name == "style":
                self.loads += [(f"<{tag} style>", r) for r in _css_refs(value)]
        if tag in ("script", "style"):
            self._raw = tag

    def handle_endtag(self, tag):
        self._raw = None

    def handle_data(self, data):
        if self._raw == "style":
            self.loads += [("<style>", r) for r in _css_refs(data)]
        elif self._raw == "script":
            self.scripts.append(_JS_LINE_COMMENT.sub("", data))


def _html_refs(text: str) -> _HTMLRefs:
    parser = _HTMLRefs()
    parser.feed(text)
    parser.close()
    return parser


def remote_references(text: str, kind: str) -> list[str]:
    """Remote resources that ``text`` (an ``html``, ``css`` or ``js`` file) would load; [] when offline.

    A remote URL starts with a scheme (``https:``) or is protocol-relative (``//host``).

    - HTML: remote URLs in attributes that load something — ``src``, ``srcset``, ``poster``,
      ``data``, ``xlink:href``, and ``href`` on ``<link>``, ``<base>`` and SVG elements —, in CSS
      (``<style>``, ``style=``) and in inline scripts, minus whole-line ``//`` comments. Links a
      reader may click (``<a href>``) and any text are allowed: a citation in the prose is a link,
      not a loaded resource.
    - CSS: the targets of ``url()`` and ``@import``, comments removed; ``data:`` URIs are local.
    - JS (vendored libraries, minified: no reliable way to tell code from comments): every
      ``http(s)://`` URL and every string starting ``//host``, except the reviewed mentions in
      ``JS_MENTIONS``.
    """
    if kind == "html":
        refs = _html_refs(text)
        found = [f"{where} {ref}" for where, ref in refs.loads if _REMOTE.match(ref)]
        return found + [f"<script> {url}" for code in refs.scripts for url in _JS_URL.findall(code)]
    if kind == "css":
        return [r for r in _css_refs(text) if _REMOTE.match(r)]
    if kind == "js":
        return [u for u in _JS_URL.findall(text) if u not in JS_MENTIONS]
    raise ValueError(f"kind must be html, css or js, not {kind!r}")


def offline_problems(out_dir: Path) -> dict[str, list[str]]:
    """Per .html, .css and .js file under ``out_dir``: the remote resources it loads and the local
    files it loads (by HTML attribute or CSS) that are missing; files without problems are left out."""
    out_dir, problems = Path(out_dir), {}
    for path in sorted(out_dir.rglob("*")):
        kind = path.suffix.lstrip(".")
        if kind not in ("html", "css", "js") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found = remote_references(text, kind)
        local = ([r for _, r in _html_refs(text).loads] if kind == "html"
                 else _css_refs(text) if kind == "css" else [])
        for ref in local:
            target = re.split(r"[?#]", ref)[0]
            if _REMOTE.match(ref) or ref.lower().startswith("data:") or not target:
                continue
            if not (path.parent / target).exists():
                found.append(f"missing {ref}")
        if found:
            problems[str(path.relative_to(out_dir))] = found
    return problems


def inputs_digest(lesson: str, root: Path = ROOT) -> str:
    """A digest of everything a lesson's deck is made from: its source, the code its cells run
    (helpers/, experiments/), the deck's own tools and template (tooling/) and the shipped
    results in data/."""
    import hashlib

    digest = hashlib.sha256()
    files = [root / "solutions" / lesson / f"{lesson}.py",
             *sorted(p for folder in ("helpers", "experiments", "tooling")
                     for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts),
             *sorted(p for p in (root / "data").rglob("*") if p.is_file())]
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _is_current(deck: Path, digest: str) -> bool:
    """Whether ``deck`` exists and was made from the inputs whose digest is ``digest``."""
    stamp = deck.with_suffix(".digest")
    return deck.exists() and stamp.exists() and stamp.read_text() == digest


def _export_timed(lesson: str, out_dir: Path, root: Path, threads: int) -> tuple[Path, float | None]:
    """Export one deck, unless the one in ``out_dir`` was made from the same inputs (then its
    time is None: the deck is reused)."""
    deck = Path(out_dir) / f"{lesson}.slides.html"
    stamp = deck.with_suffix(".digest")
    digest = inputs_digest(lesson, root)
    if _is_current(deck, digest):
        return deck, None
    os.environ["OMP_NUM_THREADS"] = str(threads)  # inherited by the kernel this worker starts
    start = time.perf_counter()
    out = export_lesson(lesson, out_dir, root)
    stamp.write_text(digest)
    return out, time.perf_counter() - start


def export(out_dir: Path, lessons: list[str] | None = None, root: Path = ROOT,
           workers: int | None = None, kept: list[Path] | None = None, on_deck=None) -> list[Path]:
    """Build the solution notebooks, copy the vendor files and export each lesson's deck, as many
    at once as there are cores (each kernel gets its share of them). A deck already in
    ``out_dir`` that was made from the same inputs (``inputs_digest``) is kept as it is (and
    added to ``kept``). ``on_deck(deck, kept)`` is called as each deck is ready."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    build_solutions(root)
    out_dir = Path(out_dir)
    copy_vendor(out_dir)
    lessons = lessons or lesson_ids(root)
    workers = max(1, min(workers or os.cpu_count() or 1, len(lessons)))
    threads = max(1, (os.cpu_count() or 1) // workers)
    # Kernels forked from a server that imported the libraries once (helpers.grading.warmkernel):
    # each lesson then starts in a fraction of a second instead of importing PyTorch again.
    from helpers.grading.warmkernel import KERNEL_NAME, WarmServer

    # Started only when a deck is to be made: with every deck kept, make slides takes seconds.
    stale = [lesson for lesson in lessons
             if not _is_current(out_dir / f"{lesson}.slides.html", inputs_digest(lesson, root))]
    with tempfile.TemporaryDirectory(prefix="slides-kernels-") as kernels:
        server = WarmServer.start(Path(kernels), env={**os.environ, "OMP_NUM_THREADS": str(threads)}) \
            if stale else None
        try:
            spec_dir = str(server.kernelspec(Path(kernels) / "share")) if server else ""
            with ProcessPoolExecutor(workers, initializer=_use_kernels,
                                     initargs=(spec_dir, KERNEL_NAME)) as pool:
                jobs = {pool.submit(_export_timed, lesson, out_dir, root, threads): lesson
                        for lesson in lessons}
                decks = {}
                for job in as_completed(jobs):
                    deck, seconds = job.result()
                    took = "unchanged inputs: kept" if seconds is None else f"{seconds:.1f} s"
                    print(f"{deck}  ({took})", flush=True)
                    if seconds is None and kept is not None:
                        kept.append(deck)
                    if on_deck is not None:
                        on_deck(deck, seconds is None)
                    decks[jobs[job]] = deck
        finally:
            if server is not None:
                server.stop()
    return [decks[lesson] for lesson in lessons]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help="default: every lesson")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.lessons) - set(lesson_ids()))
    if unknown:
        parser.error(f"no such lesson: {', '.join(unknown)} (lessons: {', '.join(lesson_ids())})")
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from . import deck_review

    browser = deck_review.CHROMIUM.exists()
    reviewing: dict[Path, object] = {}

    def reviewed(deck: Path) -> bool:  # a kept deck's contact sheet and handout are still there
        return all(deck.with_name(deck.name.removesuffix(".slides.html") + suffix).exists()
                   for suffix in (".contact.png", ".handout.pdf"))

    # Each deck is walked in the browser as soon as it is exported, while the next ones run.
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as reviewers:
        def on_deck(deck: Path, kept: bool) -> None:
            if browser and not (kept and reviewed(deck)):
                reviewing[deck] = reviewers.submit(deck_review.review, [deck.resolve()])

        decks = export(args.out_dir, args.lessons, on_deck=on_deck)
        reviews = [r for deck in decks if deck in reviewing for r in reviewing[deck].result()]
    problems = offline_problems(args.out_dir)
    if problems:
        print(f"remote resources found: {problems}", file=sys.stderr)
        return 1
    if not browser:
        print(f"{deck_review.CHROMIUM} not found: no contact sheets or PDF handouts "
              "(apt-get install chromium)", file=sys.stderr)
        return 0
    if not reviews:
        print("every deck was kept, and its review with it")
        return 0
    if deck_review.report(reviews):  # a deck that failed its review is made and reviewed again next time
        for r in reviews:
            r.deck.with_suffix(".digest").unlink(missing_ok=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
