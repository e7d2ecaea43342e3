"""Grading machinery for instructors: nbgrader settings, the sandbox students' code runs in,
warm kernels, the integrity scan and class grading. Learners never need this subpackage.

- ``settings``     the course's nbgrader configuration (read by ``nbgrader_config.py``): one
                   course root, ``grading/``, for every instructor command
- ``execute``      how a submission runs: sandboxed, recovering from dead or stuck kernels
- ``sandbox``      the namespaces, mounts and limits a graded kernel runs under
- ``warmkernel``   kernels forked from a process that has already imported the libraries
- ``autograde``    ``python -m helpers.grading.autograde``: grade a class, feedback, CSVs
- ``submissions``  importing a folder of downloads or nbgrader's layout, every file accounted for
- ``records``      what grading writes in the gradebook: never a lost score, holds for review
- ``integrity``    static scan of submissions for signs of tampering
- ``mistakes``     what the class got wrong: summary, mistakes table and chart

Nothing is imported here: the kernel launcher of ``warmkernel`` starts with every graded
notebook and must not pay for importing nbgrader.
"""
