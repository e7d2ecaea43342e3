"""Static integrity scan of submitted notebooks: what a student changed that could fool the grading.

Nothing is executed. Every cell a student can edit (solution cells, cells they added, course
cells they changed) is parsed with ``ast`` and read against the released student notebook.
Locked cells are restored by nbgrader when it grades, so they are only compared.
Cells are named by grade_id, otherwise by 1-based position: "added cell 7", "cell 12".

The rule for severity (``SEVERITY`` is the one table of kinds): ``tamper`` is kept for evidence of
an attempt on the grading itself, and a class grader zeroes such a submission until the instructor
has looked. That is replacing what the checks compute or compare with (``monkeypatch``), rebinding
a check, ``np``/``torch``, a name the grade cells use or a builtin to another function or object
(``redefines-grader``), a path into the solutions, the gradebook, the grading folders, other
students' work, the exchange or home folders (``hidden-files``), the kernel's shell hooks, tracing
or stack frames (``kernel-hooks``), and Javascript or other active content for the grader's browser
(``javascript``: script, frames, plugins, event handlers, script URLs in markdown, in strings, or in
what the code displays when it is graded).
Everything else is ``review``: listed for a human, the score left alone — shell lines and unusual
magics, the network, ``exec`` and ``eval``, processes, ordinary files, duplicated grade ids, edited
or deleted locked cells, a solution that calls the reference or pastes its body (``copies``),
names rebound to plain data, cells that do not parse. Everyday magics (``%matplotlib``,
``%autoreload``, ``%timeit``, ``np.exp?``) are no finding at all; the Python after
``%time``/``%timeit`` and in ``%%time``, ``%%timeit`` and ``%%capture`` cells, and in ``exec`` of
a literal string, is scanned like any other code.

- ``rules``     what the scan looks for: grader names, modules, calls, paths, hidden places, magics
- ``parsing``   IPython lines made Python (or ``pass``) and their findings; a cell's syntax tree
- ``markup``    active content in HTML, markdown and outputs, read with ``html.parser``
- ``copies``    exercise functions whose body is the course's own reference, pasted
- ``names``     the ``Namespace``: which names stand for modules, the grading's names, the student's
- ``scan``      the visitor that reads one code cell in that namespace: ``scan_code``
- ``notebook``  a submission against the release, and a whole class: ``scan_notebook``, ``scan_class``
- ``findings``  ``SEVERITY``, ``Finding``, and the review lines, CSV and explanation made from them
"""

from .findings import SEVERITY, Finding, explain, is_tampering, review_lines, summarise, write_report
from .markup import active_content, markdown_active, output_active
from .names import Namespace
from .notebook import graded_output_findings, scan_class, scan_notebook
from .parsing import parse_cell
from .scan import scan_code

__all__ = [
    "SEVERITY",
    "Finding",
    "Namespace",
    "active_content",
    "explain",
    "graded_output_findings",
    "is_tampering",
    "markdown_active",
    "output_active",
    "parse_cell",
    "review_lines",
    "scan_class",
    "scan_code",
    "scan_notebook",
    "summarise",
    "write_report",
]
