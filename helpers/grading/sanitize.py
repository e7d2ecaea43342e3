"""What the formgrader and the feedback pages show of a submission: inert HTML, under a
Content-Security-Policy that forbids inline script.

A student writes the markdown of their answers and chooses what their code displays when it is
graded; both become HTML in the instructor's browser, logged in to the Jupyter server that holds
the solutions (the formgrader), and in the feedback pages. So everything a submission brings is
cleaned with bleach, the sanitiser nbconvert itself uses, against an allow-list: script, frames,
plugins, forms, event handlers and ``javascript:``/``data:`` links are shown as text, not run.

- ``clean_html``, ``clean_svg``  one fragment of HTML, one SVG image, made inert
- ``CleanMarkdown``     the exporter's ``markdown2html`` filter: nbconvert's rendering, then
                        ``clean_html`` (markdown cells, markdown outputs, comments)
- ``SanitizeOutputs``   the exporter's preprocessor: each output kept, cleaned or dropped by type
- ``FeedbackExporter``  nbgrader's feedback pages, with ``FEEDBACK_POLICY`` in their head
- ``configure_pages``   all of it for the formgrader and ``nbgrader generate_feedback`` (called
                        by ``settings.configure``, so every nbgrader_config.py of the course has it)
- a Jupyter server extension (this module, loaded by the instructor's Jupyter settings,
  ``hub/classhub.py``): the formgrader's submission pages get ``submission_policy``, which lets
  only nbgrader's own scripts run
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import re
from html.parser import HTMLParser
from pathlib import Path

import bleach
from bleach.css_sanitizer import CSSSanitizer
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from tornado.web import RequestHandler, StaticFileHandler
from traitlets.config import Config, LoggingConfigurable

# What markdown renders to, and what plain HTML outputs (tables, styled text) use.
TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details",
        "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
        "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong",
        "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var"}
# No id or name: the formgrader's own script finds its grade boxes by id (a heading "why_rows" would
# otherwise take the place of the grade box of cell why_rows).
ATTRIBUTES = {"*": {"class", "title", "align", "style"}, "a": {"href"},
              "img": {"src", "alt", "width", "height"}, "td": {"colspan", "rowspan"},
              "th": {"colspan", "rowspan", "scope"}, "ol": {"start", "type"}, "details": {"open"}}
# What matplotlib and most plotting libraries write into an SVG figure.
SVG_TAGS = {"svg", "g", "defs", "path", "rect", "circle", "ellipse", "line", "polyline", "polygon", "text",
            "tspan", "use", "symbol", "clipPath", "mask", "pattern", "marker", "linearGradient",
            "radialGradient", "stop", "title", "desc", "style"}
SVG_ATTRIBUTES = {"id", "class", "style", "d", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry",
                  "width", "height", "viewBox", "version", "xmlns", "xmlns:xlink", "transform", "points",
                  "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-opacity",
                  "stroke-linecap", "stroke-linejoin", "stroke-dasharray", "stroke-miterlimit", "opacity",
                  "clip-path", "clipPathUnits", "mask", "font-family", "font-size", "font-weight",
                  "text-anchor", "dominant-baseline", "offset", "stop-color", "stop-opacity",
                  "gradientUnits", "gradientTransform", "patternUnits", "markerWidth", "markerHeight",
                  "refX", "refY", "orient", "preserveAspectRatio", "xlink:href", "href", "type"}
# Images an <img> may show inline (an image never runs script, an SVG one included); every other
# data: URL (an HTML page, a script) is dropped.
IMAGE_DATA = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;",
              "data:image/svg+xml;")
# Output types shown as they are: text, images, and data the page only prints.
PLAIN_OUTPUTS = {"text/plain", "text/latex", "image/png", "image/jpeg", "image/gif", "application/json"}
IMAGE_METADATA = {"width", "height", "unconfined"}
# The feedback pages have no script of their own: nothing runs, nothing is fetched.
FEEDBACK_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
                   "form-action 'none'")
SUBMISSIONS_PATH = "formgrader/submissions/"  # the formgrader's pages that show a submission
MATHJAX_PATH = "formgrader-mathjax/"  # where this server extension serves nbclassic's MathJax
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # the configuration nbclassic's copy has
_CSS = CSSSanitizer()
_MATHJAX_CDN = HTMLExporter.class_traits()["mathjax_url"].default_value  # what nbgrader's template loads
_MATHJAX_BLOCK = '<script type="text/x-mathjax-config">'  # nbconvert's settings for MathJax, inline
MATHJAX_SETTINGS = """MathJax.Hub.Config({
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
            processEscapes: true, processEnvironments: true},
  displayAlign: "center", messageStyle: "none"
});
MathJax.Ajax.loadComplete("[MathJax]/config/local/course.js");
"""


def _allowed(tag: str, name: str, value: str) -> bool:
    """Whether an attribute may stay: listed for its tag, and no data: URL but an image's."""
    if name not in ATTRIBUTES.get(tag, set()) | ATTRIBUTES["*"]:
        return False
    return not value.strip().lower().startswith("data:") or (tag == "img" and name == "src"
                                                             and value.strip().lower().startswith(IMAGE_DATA))


def _svg_allowed(tag: str, name: str, value: str) -> bool:
    """An SVG attribute may stay if listed; a link only to a part of the same image (``#id``)."""
    if name in ("href", "xlink:href"):
        return value.strip().startswith("#")
    return name in SVG_ATTRIBUTES


_HTML = bleach.Cleaner(tags=TAGS, attributes=_allowed, protocols={"http", "https", "mailto", "data"},
                       strip=False, css_sanitizer=_CSS)
_SVG = bleach.Cleaner(tags=SVG_TAGS, attributes=_svg_allowed, protocols=set(), strip=True, css_sanitizer=_CSS)


def clean_html(html: str) -> str:
    """``html`` with every tag and attribute off the allow-list shown as text or removed."""
    return _HTML.clean(str(html))


def clean_svg(svg: str) -> str:
    """An SVG image with script, foreign content, event handlers and outside links removed."""
    return _SVG.clean(str(svg))


class CleanMarkdown(LoggingConfigurable):
    """The exporter's ``markdown2html`` filter, then ``clean_html``: what the templates render
    markdown cells, markdown outputs and grading comments with (nbgrader's own templates never
    sanitise them, whatever ``HTMLExporter.sanitize_html`` says)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        pass_context(self)  # the template's context names the cell, whose attachments markdown shows

    def __call__(self, context, source: str) -> str:
        return clean_html(self.parent.markdown2html(context, source))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sanitize_output(output: dict) -> dict:
    """One output as the page may show it: text and raster images kept, HTML, markdown and SVG
    cleaned, every other type (Javascript, widgets) replaced by a line saying it is not shown."""
    if output.get("output_type") not in ("display_data", "execute_result"):
        return output  # streams and errors are printed as escaped text
    data, kept = output.get("data", {}), {}
    for kind, value in data.items():
        text = "".join(value) if isinstance(value, list) else value
        if kind in PLAIN_OUTPUTS or kind == "text/markdown":
            kept[kind] = value  # markdown is cleaned when rendered (CleanMarkdown)
        elif kind == "text/html":
            kept[kind] = clean_html(text)
        elif kind == "image/svg+xml":
            kept[kind] = clean_svg(text)
    dropped = sorted(set(data) - set(kept))
    if dropped and "text/plain" not in kept:
        kept["text/plain"] = f"[{', '.join(dropped)} output not shown: pages of submissions run no script]"
    output["data"] = kept
    # Only sizes that are numbers: the template writes them into the <img> tag unquoted.
    output["metadata"] = {kind: {k: v for k, v in meta.items() if k in IMAGE_METADATA
                                 and (_number(v) if k != "unconfined" else isinstance(v, bool))}
                          for kind, meta in output.get("metadata", {}).items()
                          if kind in kept and isinstance(meta, dict)}
    return output


class SanitizeOutputs(Preprocessor):
    """Every output of the notebook through ``sanitize_output``; raw cells cleaned as HTML."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            cell.outputs = [sanitize_output(out) for out in cell.get("outputs", [])]
        elif cell.cell_type == "raw":
            cell.source = clean_html(cell.source)
        return cell, resources


def with_policy(page: str, policy: str = FEEDBACK_POLICY) -> str:
    """The HTML page with a Content-Security-Policy meta tag first in its head."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    if meta in page:
        return page
    at = page.find("<head>")
    return page.replace("<head>", "<head>\n" + meta, 1) if at >= 0 else meta + "\n" + page


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback page (its template and settings) with ``FEEDBACK_POLICY`` in the head."""

    def from_notebook_node(self, nb, resources=None, **kw):
        page, resources = super().from_notebook_node(nb, resources, **kw)
        return with_policy(page), resources


def configure_pages(c: Config) -> Config:
    """Sanitise what the formgrader and ``nbgrader generate_feedback`` render of a notebook.

    Both build an ``HTMLExporter`` from the course's nbgrader config (the formgrader with its
    ``formgrade`` template, feedback with ``feedback``), so this reaches both."""
    c.HTMLExporter.preprocessors = [SanitizeOutputs]
    # nbconvert's templates clean outputs with `clean_html` when `sanitize_html` is set: with the
    # course's allow-list, which keeps tables and images (nbconvert's own escapes them).
    c.HTMLExporter.filters = {"markdown2html": CleanMarkdown, "clean_html": clean_html}
    c.HTMLExporter.sanitize_html = True
    c.GenerateFeedback.exporter_class = FeedbackExporter
    return c


# ------------------------------------------------------------------ the formgrader's submission pages

class _PageScripts(HTMLParser):
    """The inline scripts and event handlers of a page up to the notebook's container: the
    formgrader's own (nbgrader's template puts none after it)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.handlers: list[str] = []
        self.inline = False
        self.done = False

    def handle_starttag(self, tag, attrs):
        if self.done:
            return
        attrs = dict(attrs)
        if tag == "div" and attrs.get("id") == "notebook-container":
            self.done = True
            return
        self.handlers += [v or "" for k, v in attrs.items() if k.startswith("on")]
        if tag == "script" and "src" not in attrs:
            self.inline = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self.inline = False

    def handle_data(self, data):
        if self.inline and not self.done:
            self.scripts[-1] += data


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def submission_policy(page: str, frame_ancestors: str = "'self'") -> str:
    """The Content-Security-Policy of a formgrader page showing a submission: scripts from the
    server itself, and of inline script only the page's own before the notebook (by hash), so
    that nothing the notebook holds could run even if it escaped the cleaning."""
    found = _PageScripts()
    found.feed(page)
    scripts = " ".join(sorted({_hash(s) for s in found.scripts}))
    handlers = " ".join(sorted({_hash(h) for h in found.handlers}))
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' {scripts}" + (f" 'unsafe-hashes' {handlers}" if handlers else ""),
        "style-src 'self' 'unsafe-inline'", "img-src 'self' data:", "font-src 'self' data:",
        "connect-src 'self'", "object-src 'none'", "frame-src 'none'", "worker-src 'none'",
        "base-uri 'none'", "form-action 'self'", f"frame-ancestors {frame_ancestors}"])


@functools.cache
def _local_mathjax() -> Path | None:
    """nbclassic's copy of MathJax 2 (a course dependency), if installed."""
    spec = importlib.util.find_spec("nbclassic")
    folder = Path(spec.origin).parent / "static" / "components" / "MathJax" if spec and spec.origin else None
    return folder if folder is not None and (folder / "MathJax.js").exists() else None


def local_mathjax(page: str, base_url: str = "/") -> str:
    """The page loading MathJax from this server, with the course's MathJax settings file.

    nbgrader's template always names the CDN's MathJax, and its grading script stops where MathJax
    is missing (offline, or under ``submission_policy``); the settings nbconvert gives MathJax in an
    inline block, which MathJax would evaluate as a string (forbidden here), come as a file."""
    container = page.find('id="notebook-container"')
    start = page.find(_MATHJAX_BLOCK)
    end = page.find("</script>", start)
    if 0 <= start < end < container:  # only the page's own block, in its head
        page = page[:start] + page[end + len("</script>"):]
    local = f"{base_url}{MATHJAX_PATH}MathJax.js?config={MATHJAX_CONFIG},local/course"
    return page.replace(_MATHJAX_CDN, local, 1)


class _MathJaxSettings(RequestHandler):
    """The course's MathJax settings for the formgrader (nbconvert's: $…$ inline, $$…$$ display)."""

    def get(self):
        self.set_header("Content-Type", "application/javascript")
        self.write(MATHJAX_SETTINGS)


class _SubmissionPolicy:
    """A tornado output transform: the formgrader's submission pages get ``submission_policy``,
    and load MathJax from this server (``MATHJAX_PATH``) rather than from the network."""

    base_url = "/"

    def __init__(self, request):
        self.applies = SUBMISSIONS_PATH in request.path and "/api/" not in request.path

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if not (self.applies and "html" in headers.get("Content-Type", "")):
            return status_code, headers, chunk
        page = chunk.decode("utf-8", "replace") if finishing else ""  # a streamed page: no script runs
        if page and _local_mathjax() is not None:
            page = local_mathjax(page, self.base_url)
            chunk = page.encode("utf-8")
            if "Content-Length" in headers:
                headers["Content-Length"] = str(len(chunk))
        # the server's own frame-ancestors stay: JupyterLab (or the hub) shows the formgrader in a frame
        ancestors = re.search(r"frame-ancestors ([^;]*)", headers.get("Content-Security-Policy", ""))
        headers["Content-Security-Policy"] = submission_policy(
            page, ancestors.group(1).strip() if ancestors else "'self'")
        return status_code, headers, chunk

    def transform_chunk(self, chunk, finishing):
        return chunk


def _jupyter_server_extension_points() -> list[dict]:
    """This module is a Jupyter server extension (``jpserver_extensions``)."""
    return [{"module": "helpers.grading.sanitize"}]


def _load_jupyter_server_extension(serverapp) -> None:
    """Serve the formgrader's submission pages under ``submission_policy``, with MathJax."""
    from jupyter_server.utils import url_path_join

    web = serverapp.web_app
    policy = type("SubmissionPolicy", (_SubmissionPolicy,), {"base_url": web.settings.get("base_url", "/")})
    # First: the page must be read before the server's own transforms compress it.
    web.transforms.insert(0, policy)
    mathjax = _local_mathjax()
    if mathjax is not None:
        folder = url_path_join(policy.base_url, MATHJAX_PATH)
        web.add_handlers(".*$", [(url_path_join(folder, "config/local/course.js"), _MathJaxSettings),
                                 (url_path_join(folder, "(.*)"), StaticFileHandler, {"path": str(mathjax)})])
    serverapp.log.info("formgrader submission pages: served under a Content-Security-Policy")
