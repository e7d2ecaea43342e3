"""nbgrader settings for this course; run nbgrader from the repository root.

One course root, `grading/`: see ``helpers.grading.settings``. The settings live in
``helpers.grading.settings.configure`` so the build, the tests, the formgrader and the instructor's
nbgrader commands all use the same ones (what the formgrader and feedback pages show of a
submission is sanitised there too: ``helpers.grading.sanitize``).
"""


from helpers.grading.settings import configure

c = get_config()  # noqa: F821 -- provided by nbgrader when it reads this file
configure(c)
