"""Grading machinery for instructors: nbgrader settings, the sandbox students' code runs in,
warm kernels, the integrity scan and class grading. No lesson imports it; a learner meets it only
through `make check`.

- ``settings``     the course's nbgrader configuration (read by ``nbgrader_config.py``): one
                   course root, ``grading/``, for every instructor command
- ``execute``      how a submission runs: sandboxed, recovering from dead or stuck kernels
- ``sandbox``      the namespaces, mounts and limits a graded kernel runs under
- ``warmkernel``   kernels forked from a process that has already imported the libraries (also
                   what ``tooling.slides`` runs the decks' notebooks in)
- ``autograde``    ``python -m helpers.grading.autograde``: grade a class, feedback, CSVs
- ``submissions``  importing a folder of downloads or nbgrader's layout, every file accounted for
- ``records``      what grading writes in the gradebook: never a lost score, holds for review
- ``integrity``    static scan of submissions for signs of tampering
- ``sanitize``     what the formgrader and the feedback pages show of a submission: inert HTML,
                   under a Content-Security-Policy (a Jupyter server extension for the formgrader)
- ``mistakes``     what the class got wrong: summary, mistakes table and chart
- ``cells``        a notebook's cells as grading reads them: which answers a grade cell grades,
                   which answers changed
- ``hidden_tests`` what the hidden tests import, and their own failures (not the learner's)
- ``environment``  the grading kernels' Python environment checked before any score is touched
- ``validation``   ``nbgrader validate`` with the course's limits, for learners and students
- ``selfcheck``    ``make check``: a learner's notebook graded as the instructor would
- ``exchange``     nbgrader's exchange on a class hub: who handed in what
- ``platforms``    the gradebook import files of Moodle, Canvas and Blackboard
- ``release``      ``python -m helpers.grading.release``: the student notebooks (``make release``)

Used by: instructors (``make grade``, ``make export``, ``make release``, the formgrader) and
learners' ``make check``. It builds the notebooks it grades from with ``tooling.build``.

Nothing is imported here: the kernel launcher of ``warmkernel`` starts with every graded
notebook and must not pay for importing nbgrader.
"""
