"""A Python environment in which `import helpers` finds another checkout of the course: what an
instructor has whose environment was set up for a second clone, or for last term's copy.

It is a real virtual environment of the course's interpreter. Its site-packages holds two
``.pth`` lines: the other checkout first (as an editable install of it would put it), then the
course environment's own site-packages for every dependency. Or, like a class hub's environment,
it holds an installed copy of the course package itself.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from conftest import ROOT


def clone(dest: Path) -> Path:
    """A real second checkout of the course (``git clone`` of this repository) at ``dest``."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    return dest


def environment_for(checkout: Path | None, venv: Path) -> Path:
    """A virtual environment at ``venv`` whose ``helpers`` is ``checkout``'s; its python. With no
    checkout, a copy of this course's packages is installed in it, as on a class hub."""
    import shutil

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    ask = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(python), "-c", ask], capture_output=True, text=True,
                               check=True).stdout.strip())
    if checkout is None:
        for package in ("helpers", "experiments", "tooling"):
            shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
        checkout = site
    (site / "other_checkout.pth").write_text(f"{checkout}\n{sysconfig.get_paths()['purelib']}\n")
    # nbgrader runs the `alembic` command found beside the interpreter
    (venv / "bin" / "alembic").symlink_to(Path(sys.executable).parent / "alembic")
    found = subprocess.run([str(python), "-c", "import helpers, nbgrader; print(helpers.__file__)"],
                           cwd=venv, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(found).resolve() == (checkout / "helpers" / "__init__.py").resolve(), found
    return python
