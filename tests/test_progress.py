"""Progress bars of the long searches (latentlab._progress): shown by default once a
search has run two seconds on a terminal or in a notebook, forced by verbose, off by
``set_config(progress=False)`` or ``compare(progress=False)``."""

from __future__ import annotations

import numpy as np
import pytest
import tqdm.auto

import latentlab
from latentlab._progress import DELAY, progress


@pytest.fixture
def bars(monkeypatch):
    """Every tqdm bar made, as its keyword arguments."""
    made = []

    def fake_tqdm(items, **kwargs):
        made.append(kwargs)
        return items

    monkeypatch.setattr(tqdm.auto, "tqdm", fake_tqdm)
    return made


def test_default_bar_waits_and_stays_off_logs(bars):
    assert list(progress(range(3), "search")) == [0, 1, 2]
    assert bars == [
        {"desc": "search", "file": bars[0]["file"], "leave": False, "disable": None, "delay": DELAY}
    ]


def test_verbose_shows_the_bar_at_once_even_when_bars_are_off(bars):
    with latentlab.config_context(progress=False):
        assert list(progress(range(2), "refits", verbose=1)) == [0, 1]
        assert list(progress(range(2), "refits")) == [0, 1]
    assert len(bars) == 1 and "delay" not in bars[0] and "disable" not in bars[0]


def test_compare_shows_a_default_bar_unless_told_not_to(bars):
    X = np.random.default_rng(0).normal(size=(40, 3))
    models = [latentlab.PPCA(1), latentlab.PPCA(2)]
    latentlab.compare(models, X, cv=2)
    assert [bar["desc"] for bar in bars] == ["compare"]
    latentlab.compare(models, X, cv=2, progress=False)
    with latentlab.config_context(progress=False):
        latentlab.compare(models, X, cv=2)
    assert len(bars) == 1


def test_progress_setting_must_be_a_bool():
    with pytest.raises(ValueError, match="progress"):
        latentlab.set_config(progress="auto")
