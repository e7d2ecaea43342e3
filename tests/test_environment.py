"""pyproject.toml is the single source of dependencies; environment.yml must agree with it."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _split(requirement: str) -> tuple[str, str]:
    name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0)
    return name.lower().replace("_", "-"), requirement[len(name):].replace(" ", "")


def test_environment_yml_lists_the_same_packages_and_ranges():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip, "environment.yml must install the course itself (-e .)"
    assert dict(map(_split, deps)) == dict(_split(p) for p in pip if p != "-e .")


def test_torch_range_admits_2_13_0_and_not_2_14():
    from packaging.specifiers import SpecifierSet

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = SpecifierSet(next(_split(d)[1] for d in deps if _split(d)[0] == "torch"))
    assert "2.13.0" in spec and "2.13.1" in spec and "2.14.0" not in spec


def test_the_fast_tier_names_real_files_and_every_checks_bite_tests():
    """`make test-fast` (the edit loop) lists its test files by name: each exists, and no check's
    bite tests are left out of it."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    names = re.search(r"^FAST_TESTS := (.*)$", text, re.M).group(1).split()
    files = {ROOT / "tests" / f"test_{name}.py" for name in names}
    assert all(f.exists() for f in files), sorted(str(f) for f in files if not f.exists())
    missing = sorted(p.name for p in (ROOT / "tests").glob("test_checks_*.py") if p not in files)
    assert not missing, f"check tests left out of make test-fast: {missing}"


def test_make_tests_units_of_work_keep_shared_state_in_one_worker():
    """The hub's files (Linux accounts, one exchange) never run in two workers at once; each
    lesson's grading round trip is a unit of its own; any other file is one unit."""
    import inspect

    import conftest

    hub = {conftest.work_unit(f"tests/{name}::test_x") for name in conftest.ONE_MACHINE}
    assert len(hub) == 1
    lessons = {conftest.work_unit(f"tests/test_every_lesson_grades.py::test_x[{lesson}]")
               for lesson in ("01_rnn_bottleneck", "02_attention_lookup")}
    assert len(lessons) == 2
    assert conftest.work_unit("tests/test_slides.py::test_x[a]") == "tests/test_slides.py"
    # xdist's own scheduler answers `-n` first unless ours is asked before it
    assert "tryfirst=True" in inspect.getsource(conftest).split("def pytest_xdist_make_scheduler")[0][-200:]


def test_reading_a_notebook_compiles_no_grammar():
    """Every grading worker, nbgrader command and Jupyter server imports nbformat, and with it
    jsonschema; jsonschema 4.24+ then compiles an IRI grammar (rfc3987-syntax), 1 s of CPU each
    time. pyproject.toml keeps jsonschema below that."""
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-c", "import sys, time; t = time.process_time(); import nbformat; "
                          "print('rfc3987_syntax' in sys.modules, time.process_time() - t)"],
                         capture_output=True, text=True, check=True)
    compiled, seconds = ran.stdout.split()
    assert compiled == "False", f"importing nbformat compiled the IRI grammar ({float(seconds):.2f} s of CPU)"
