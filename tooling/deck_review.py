"""A deck as a lecturer meets it: opened in Chromium at a projector's 1280×720, walked with the
keyboard, checked, and turned into a contact sheet and a PDF handout.

    python -m tooling.deck_review DECK.slides.html ...

For each deck it writes, next to it:

- ``NN_topic.contact.png``: a thumbnail of every slide and sub-slide, in order, for a glance;
- ``NN_topic.handout.pdf``: the deck printed by Chromium from reveal.js's print mode
  (``?print-pdf``), one page per slide as on screen, without speaker notes;

and reports what does not fit: a slide taller or wider than the screen, code cut at the right
edge, text on a slide or in a figure smaller than ``MIN_TEXT_PX`` screen pixels (figures are
drawn for it by ``tooling.projector``). It needs Debian's Chromium (``/usr/bin/chromium``, or
``$CHROMIUM``) and loads nothing from the network.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .projector import text_px_of_png

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREEN = {"width": 1280, "height": 720}
FIT_SLACK_PX = 4      # sub-pixel rounding
MIN_TEXT_PX = 14.0    # text on screen, in pixels: on slides and in figures
THUMB_WIDTH, SHEET_COLUMNS = 320, 6

# What the current slide measures on screen, and the figures on it (their index among all images
# of the deck, and the screen pixels per image pixel).
_MEASURE = r"""() => {
    const slide = Reveal.getCurrentSlide(), scale = Reveal.getScale();
    const wide = Array.from(slide.querySelectorAll('pre')).filter(p => p.scrollWidth > p.clientWidth + 2);
    const all = Array.from(document.querySelectorAll('.reveal .slides img'));
    const images = Array.from(slide.querySelectorAll('img')).map(img => ({
        index: all.indexOf(img),
        scale: img.naturalWidth ? img.getBoundingClientRect().width / img.naturalWidth : 0}));
    // the smallest text on the slide, in screen pixels: font size × any zoom × the deck's scale
    let text = null;
    for (const el of slide.querySelectorAll('pre, p, li, td, th, h1, h2, h3')) {
        if (el.closest('aside.notes') || !el.offsetParent || !el.textContent.trim()) continue;
        let px = parseFloat(getComputedStyle(el).fontSize) * scale;
        for (let e = el; e && e !== slide.parentElement; e = e.parentElement) {
            px *= parseFloat(e.style.zoom || 1);
        }
        text = text === null ? px : Math.min(text, px);
    }
    return {where: Reveal.getIndices(), height: slide.scrollHeight * scale, text: text,
            width: slide.scrollWidth * scale, cut: wide.length, images: images,
            notes: (Reveal.getSlideNotes() || '').replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ')
                   .trim().slice(0, 200),
            last: Reveal.isLastSlide()};
}"""


def launch(playwright, profile: Path, width: int = SCREEN["width"], height: int = SCREEN["height"]):
    """Headless Chromium with a fresh profile that fetches nothing of its own accord."""
    if not CHROMIUM.exists():
        raise FileNotFoundError(f"{CHROMIUM} not found: install Debian's chromium "
                                "(apt-get install chromium) or set CHROMIUM to a Chromium binary")
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True,
        viewport={"width": width, "height": height})


def open_deck(page, url: str) -> None:
    """Load a deck and wait until MathJax has typeset it and the deck is paginated."""
    page.goto(url)
    page.wait_for_selector(".reveal[data-paginated]", state="attached", timeout=60_000)
    page.evaluate("window.Reveal = require('vendor/reveal.js/dist/reveal.js')")


def walk(page, url: str, shots: list | None = None) -> list[dict]:
    """Open a deck and visit every slide and sub-slide with the keyboard only (Space, a clicker's
    'next'); what each slide measures on screen. With ``shots``, a PNG of each slide is appended."""
    open_deck(page, url)
    if shots is not None:  # a photograph mid-transition would show two slides at once
        page.evaluate("Reveal.configure({transition: 'none', backgroundTransition: 'none'})")
        thumbnail = _thumbnailer(page)
    page.locator(".reveal").click(position={"x": 5, "y": 5})
    seen = []
    for _ in range(500):
        seen.append(page.evaluate(_MEASURE))
        if shots is not None:
            shots.append(thumbnail())
        if seen[-1]["last"]:
            return seen
        page.keyboard.press("Space")
    raise AssertionError(f"the keyboard did not reach the deck's end after {len(seen)} slides")


def _thumbnailer(page):
    """A function that photographs the screen as the contact sheet shows it, ``THUMB_WIDTH``
    pixels wide: the browser draws it at that size (a full-size PNG of every slide, only to be
    shrunk, took half the walk's time)."""
    import base64

    session = page.context.new_cdp_session(page)
    size = page.viewport_size
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
            "scale": THUMB_WIDTH / size["width"]}

    def thumbnail() -> bytes:
        shot = session.send("Page.captureScreenshot", {"format": "png", "clip": clip})
        return base64.b64decode(shot["data"])

    return thumbnail


def _where(slide: dict) -> str:
    return f"slide {slide['where']['h']}/{slide['where'].get('v') or 0}"


def _too_small(slide: dict) -> bool:
    return slide["text"] is not None and slide["text"] < MIN_TEXT_PX


def misfits(seen: list[dict]) -> list[str]:
    """The slides whose content is taller or wider than the screen, whose code is cut, or whose
    text (prose, code, printed output) is smaller than ``MIN_TEXT_PX`` on screen."""
    return [f"{_where(s)}: {s['height']:.0f}×{s['width']:.0f} px"
            + (f", {s['cut']} code block(s) cut at the right" if s["cut"] else "")
            + (f", text {s['text']:.1f} px" if _too_small(s) else "")
            for s in seen if s["height"] > SCREEN["height"] + FIT_SLACK_PX
            or s["width"] > SCREEN["width"] + FIT_SLACK_PX or s["cut"] or _too_small(s)]


_DATA_PNG = re.compile(r'<img[^>]*?src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def figure_text(html: str, seen: list[dict]) -> list[dict]:
    """Each image of the deck's slides: the height on screen of its smallest text, from the text
    size its PNG records (``tooling.projector``; None when it records none) and the scale the walk
    measured."""
    pngs = [base64.b64decode(m) for m in _DATA_PNG.findall(html)]
    out = []
    for slide in seen:
        for image in slide["images"]:
            px = text_px_of_png(pngs[image["index"]]) if 0 <= image["index"] < len(pngs) else None
            out.append({"where": _where(slide), "figure": image["index"],
                        "text_px": None if px is None else round(px * image["scale"], 1)})
    return out


def figure_problems(figures: list[dict]) -> list[str]:
    """Figures whose text is too small on screen, or whose text size is unknown."""
    return [f"{f['where']}: figure {f['figure']} "
            + ("records no text size (not drawn for the projector)" if f["text_px"] is None
               else f"text {f['text_px']} px (at least {MIN_TEXT_PX:g})")
            for f in figures if f["text_px"] is None or f["text_px"] < MIN_TEXT_PX]


def contact_sheet(shots: list[bytes], out: Path, title: str = "") -> Path:
    """One PNG of thumbnails, ``SHEET_COLUMNS`` to a row, numbered in order."""
    from PIL import Image, ImageDraw

    thumbs = []
    for data in shots:
        with Image.open(io.BytesIO(data)) as image:
            height = round(image.height * THUMB_WIDTH / image.width)
            thumbs.append(image.convert("RGB").resize((THUMB_WIDTH, height)))
    height = max(t.height for t in thumbs)
    gap, head = 12, 36
    rows = -(-len(thumbs) // SHEET_COLUMNS)
    sheet = Image.new("RGB", (SHEET_COLUMNS * (THUMB_WIDTH + gap) + gap, head + rows * (height + gap + 18)),
                      "#e9e9e9")
    draw = ImageDraw.Draw(sheet)
    draw.text((gap, 10), f"{title}  ·  {len(thumbs)} slides", fill="#222")
    for i, thumb in enumerate(thumbs):
        x = gap + (i % SHEET_COLUMNS) * (THUMB_WIDTH + gap)
        y = head + (i // SHEET_COLUMNS) * (height + gap + 18)
        sheet.paste(thumb, (x, y + 16))
        draw.rectangle([x - 1, y + 15, x + thumb.width, y + 16 + thumb.height], outline="#888")
        draw.text((x, y), str(i + 1), fill="#222")
    sheet.save(out, optimize=True)
    return out


def print_handout(page, deck: Path, out: Path) -> int:
    """Print ``deck`` from reveal.js's print mode to ``out``; the number of pages."""
    page.goto(deck.as_uri() + "?print-pdf")
    page.wait_for_selector(".reveal[data-paginated]", state="attached", timeout=60_000)
    page.wait_for_timeout(300)
    pages = page.evaluate("document.querySelectorAll('.reveal .slides .pdf-page').length")
    page.pdf(path=str(out), prefer_css_page_size=True, print_background=True)
    return pages


@dataclass
class Review:
    """What a deck showed in the browser, and the files written next to it."""

    deck: Path
    slides: list[dict]
    figures: list[dict]
    contact_sheet: Path
    handout: Path
    handout_pages: int
    problems: list[str] = field(default_factory=list)

    @property
    def tallest(self) -> float:
        return max(s["height"] for s in self.slides)

    @property
    def smallest_text(self) -> float:
        """Of the prose, code and printed output on the slides, in screen pixels."""
        return min((s["text"] for s in self.slides if s["text"]), default=float("nan"))

    @property
    def smallest_figure_text(self) -> float:
        return min((f["text_px"] for f in self.figures if f["text_px"]), default=float("nan"))


def review(decks: list[Path], profile: Path | None = None, processes: int = 1) -> list[Review]:
    """Walk, check, photograph and print each deck; see the module docstring. With ``processes``
    > 1, that many browsers share the decks (longest first), each in a process of its own."""
    decks = [Path(d) for d in decks]
    if processes > 1 and len(decks) > 1:
        import concurrent.futures
        import multiprocessing

        by_size = sorted(decks, key=lambda d: -d.stat().st_size)
        shares = [by_size[i::processes] for i in range(processes)]
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(processes, mp_context=context) as pool:
            done = [r for part in pool.map(review, [s for s in shares if s]) for r in part]
        order = {d: i for i, d in enumerate(decks)}
        return sorted(done, key=lambda r: order[r.deck])
    return _review(decks, profile)


def _review(decks: list[Path], profile: Path | None) -> list[Review]:
    from playwright.sync_api import sync_playwright

    reviews = []
    with tempfile.TemporaryDirectory(prefix="deck-review-") as tmp, sync_playwright() as pw:
        browser = launch(pw, Path(profile or tmp) / "profile")
        try:
            page = browser.new_page()
            blocked: list[str] = []

            def local_only(route):
                if route.request.url.startswith(("file:", "data:")):
                    route.continue_()
                else:
                    blocked.append(route.request.url)
                    route.abort()

            page.route("**/*", local_only)
            for deck in map(Path, decks):
                blocked.clear()
                name = deck.name.removesuffix(".slides.html")
                shots: list[bytes] = []
                seen = walk(page, deck.as_uri(), shots)
                figures = figure_text(deck.read_text(encoding="utf-8"), seen)
                sheet = contact_sheet(shots, deck.with_name(f"{name}.contact.png"), name)
                handout = deck.with_name(f"{name}.handout.pdf")
                pages = print_handout(page, deck, handout)
                problems = misfits(seen) + figure_problems(figures) + [f"requested {url}" for url in blocked]
                if pages != len(seen):
                    problems.append(f"the handout has {pages} pages for {len(seen)} slides")
                reviews.append(Review(deck, seen, figures, sheet, handout, pages, problems))
        finally:
            browser.close()
    return reviews


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("decks", nargs="+", type=Path)
    parser.add_argument("--processes", type=int, default=2, help="browsers walking decks side by side")
    args = parser.parse_args(argv)
    return 1 if report(review(args.decks, processes=args.processes)) else 0


def report(reviews: list[Review]) -> bool:
    """Print what each deck showed; whether any deck does not fit."""
    failed = False
    for r in reviews:
        print(f"{r.deck.name}: {len(r.slides)} slides, tallest {r.tallest:.0f} px, smallest text "
              f"{r.smallest_text:.1f} px, in figures {r.smallest_figure_text:.1f} px; "
              f"{r.contact_sheet.name}, {r.handout.name} ({r.handout_pages} pages)")
        for problem in r.problems:
            print(f"  does not fit: {problem}", file=sys.stderr)
        failed = failed or bool(r.problems)
    return failed


if __name__ == "__main__":
    sys.exit(main())
