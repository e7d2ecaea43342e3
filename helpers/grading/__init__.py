"""Grading machinery for instructors: nbgrader settings, the sandbox students' code runs in,
warm kernels, the integrity scan and class grading. Learners never need this subpackage.

- ``settings``    the course's nbgrader configuration (read by ``nbgrader_config.py``)
- ``autograde``   ``python -m helpers.grading.autograde``: grade a class, feedback, CSVs
- ``sandbox``     the namespaces, mounts and limits a graded kernel runs under
- ``warmkernel``  kernels forked from a process that has already imported the libraries
- ``integrity``   static scan of submissions for signs of tampering

Nothing is imported here: the kernel launcher of ``warmkernel`` starts with every graded
notebook and must not pay for importing nbgrader.
"""
