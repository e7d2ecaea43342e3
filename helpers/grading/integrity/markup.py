"""Active content in HTML: what of a markdown answer, or of an output, would run script or load a
page or a plugin in the grader's browser — script, frames, objects and embeds, event-handler
attributes, ``javascript:`` URLs and ``data:`` URLs that are not images, SVG holding any of them.
HTML is read with the standard library's parser; markdown is rendered as the formgrader renders it
(nbconvert's markdown), so code spans that merely mention ``<script>`` are no finding."""

from __future__ import annotations

from html.parser import HTMLParser

from .rules import ACTIVE_TAGS, IMAGE_DATA, MARKUP_OUTPUTS, SCRIPT_OUTPUTS, SCRIPT_SCHEMES

QUOTE = 60  # characters of the offending markup a finding quotes


def _url(value: str) -> str:
    """A URL as a browser reads its scheme: without whitespace and control characters, lower case."""
    return "".join(ch for ch in value if ch > " ").lower()


class _Active(HTMLParser):
    """Collects a short quote of each piece of active content, in document order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def _quote(self) -> str:
        text = " ".join((self.get_starttag_text() or "").split())
        return text if len(text) <= QUOTE else text[:QUOTE - 1] + "…"

    def handle_starttag(self, tag, attrs):
        active = tag in ACTIVE_TAGS or (tag == "meta" and any(k == "http-equiv" for k, _ in attrs))
        for name, value in attrs:
            url = _url(value or "")
            if name.startswith("on") or name == "srcdoc" or url.startswith(SCRIPT_SCHEMES) or (
                    url.startswith("data:") and not (tag == "img" and url.startswith(IMAGE_DATA))):
                active = True
        if active:
            self.found.append(self._quote())

    handle_startendtag = handle_starttag


def active_content(html: str) -> list[str]:
    """A quote of each tag in ``html`` that is active content ([] for inert HTML)."""
    parser = _Active()
    parser.feed(str(html))
    parser.close()
    return parser.found


def markdown_active(source: str) -> list[str]:
    """Active content in markdown, as the page that renders it would hold it."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return active_content(markdown2html_mistune(source))


def output_active(output: dict) -> list[str]:
    """Active content an output would put in the page: script outputs by type, markup by content,
    image sizes that are not numbers."""
    data = output.get("data", {}) if isinstance(output, dict) else {}
    if not isinstance(data, dict):
        return []
    found = [f"an output of type {kind}" for kind in sorted(SCRIPT_OUTPUTS & set(data))]
    # an image's size is written into its <img> tag: anything but a number there is markup
    for kind, meta in sorted((output.get("metadata") or {}).items()):
        for key, value in sorted(meta.items()) if isinstance(meta, dict) else []:
            if key in ("width", "height") and not isinstance(value, (int, float)):
                found.append(f"{kind} {key} {str(value)[:QUOTE]!r}")
    for kind, value in sorted(data.items()):
        text = "".join(value) if isinstance(value, list) else str(value)
        if kind in MARKUP_OUTPUTS:
            found += active_content(text)
        elif kind == "text/markdown":
            found += markdown_active(text)
    return found


def cell_outputs_active(cell) -> list[str]:
    """Active content in all the outputs of a code cell."""
    if cell.get("cell_type") != "code":
        return []
    return [quote for out in cell.get("outputs", []) for quote in output_active(out)]
