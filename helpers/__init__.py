"""Attention from Scratch: the helpers every lesson imports.

Modules, by what a learner looks for:

- ``attention``   reference implementations the checks compare against
- ``checks``      the functions grade cells call; each names the likely mistake
- ``quiz``        multiple-choice answers: format checks and grading
- ``calculator``  the step-by-step attention lookup behind the lesson 02 widget
- ``plots``       figures (each takes ``ax=None`` and returns the Axes)
- ``widgets``     thin ipywidgets wrappers with a static fallback
- ``build``       ``python -m helpers.build``: solution notebooks and student release
- ``grading``     nbgrader preprocessors used for feedback
"""
