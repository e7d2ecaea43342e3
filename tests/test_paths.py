"""Where the lessons find the shipped results: data/ of a checkout, or $ATTENTION_DATA for an
installed copy of the helpers (the class hub's shared environment, a container image)."""

import pytest
from conftest import ROOT

from experiments import training
from helpers import paths


def test_a_checkout_finds_data_beside_the_helpers(monkeypatch):
    monkeypatch.delenv("ATTENTION_DATA", raising=False)
    assert paths.data_root() == ROOT / "data"


def test_attention_data_points_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_DATA", str(tmp_path))
    assert paths.data_root() == tmp_path


def test_a_missing_folder_says_where_it_looked_and_what_to_set(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        training.load_results(tmp_path / "sentiment")
    message = str(err.value)
    assert str(tmp_path / "sentiment") in message and "ATTENTION_DATA" in message
    assert training.COMMAND in message
