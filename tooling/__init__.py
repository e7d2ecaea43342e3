"""Attention from Scratch: the tools that make the course's notebooks and slides.

- ``build``        ``python -m tooling.build``: solution notebooks from the jupytext sources in
  ``solutions/`` (``make build``; the student notebooks are nbgrader's release of them,
  ``helpers.grading.release``)
- ``slides``       ``python -m tooling.slides``: offline reveal.js decks of the lessons (``make slides``)
- ``deck_review``  a deck walked in Chromium at 1280×720, as a lecturer meets it
- ``projector``    figures drawn for a projector while a deck's notebook runs
- ``slides_template/``  the deck's HTML template (no CDN)

Used by: instructors and contributors (``make build``, ``make slides``), the grading machinery
(``helpers.grading`` builds the notebooks it grades from with ``build``) and the tests. No lesson
imports them.
"""
