"""Lesson 07's [CLS] reading of lesson 01's shipped attention models, measured once.

``python -m experiments.cls_reading`` measures where [CLS] reads in every layer and head of the
three shipped attention classifiers over the 1,000 reviews of the ``fillers_4`` test set
(``helpers.cls_reading.readings``), removes every *sink* head in turn and measures the accuracy
lost on each of lesson 06's four test sets (``helpers.cls_reading.removal_cost``), and writes it
all to ``data/cls_reading/results.json``. The lesson reads it back with
``helpers.cls_reading.load_readings`` and ``load_sink_removals``. A few seconds on one thread;
a rerun on the same machine rewrites the file byte for byte.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from helpers import cls_reading, paths, trained

TEST_SET = "fillers_4"


def measure(test_set: str = TEST_SET, seeds=cls_reading.SEEDS) -> dict:
    """The readings of every seed and the removal cost of every sink, as ``results.json`` holds them."""
    found = cls_reading.readings(test_set, seeds)
    data = trained.test_data(add_cls=True)
    removals = []
    for reading in found:
        model = trained.load_model("attention", reading.seed)
        for layer, head in reading.sinks():
            removals.append({"seed": reading.seed, "layer": layer, "head": head,
                             "lost": cls_reading.removal_cost(model, layer, head, data)})
    return {"command": cls_reading.COMMAND, "torch": torch.__version__, "test_set": test_set,
            "sink_share": cls_reading.SINK_SHARE, "roles": list(cls_reading.ROLES),
            "readings": [r.to_dict() for r in found], "sink_removals": removals}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=cls_reading.DATA_DIR)
    args = parser.parse_args(argv)
    path = paths.write_results(args.out, measure())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
