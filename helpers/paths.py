"""Where the course's shipped results live: ``data/`` of the checkout, or ``$ATTENTION_DATA``.

A checkout (``make setup``, an editable install) finds ``data/`` beside ``helpers/``. An
installed copy of the helpers (a shared class environment, a container image) has no checkout
beside it: there ``ATTENTION_DATA`` names the folder holding ``sentiment/``, ``vision/`` and the
other results listed in data/README.md (``make hub`` sets it for every user).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout (solutions/, data/, …)
CHECKOUT_DATA = ROOT / "data"


def data_root() -> Path:
    """The folder holding the shipped results (``sentiment/``, ``vision/``, …; data/README.md)."""
    configured = os.environ.get("ATTENTION_DATA")
    return Path(configured) if configured else CHECKOUT_DATA


def require(folder: Path, command: str) -> Path:
    """``folder``, or an error that says where the results were looked for, how to point there
    (``ATTENTION_DATA``) and which ``command`` makes them again."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"the course's trained results are not at {folder}. In a checkout they are in data/; "
            "for an installed copy of the helpers set ATTENTION_DATA to the folder that holds "
            f"sentiment/ and vision/; `{command}` makes them again.")
    return folder


def read_results(folder: Path, command: str, name: str = "results.json") -> dict:
    """``folder/name``, or an error naming the ``command`` that writes it."""
    path = require(folder, command) / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{command}` to make it")
    return json.loads(path.read_text())


def write_results(folder: Path, results: dict) -> Path:
    """Write ``results`` to ``folder/results.json`` in the compact form the shipped files use."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps(results, indent=None, separators=(",", ":")) + "\n")
    return path
