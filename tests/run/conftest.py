"""The run tests' data root with a stand-in STS-B dev evaluation (the loop's final scores are the tests')."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.run.training as train_mod
from tests.helpers import DOG_CORPUS, corpus_text, make_corpus_root


def dev_eval(data_root: Path, token_lengths: Any = None) -> Callable[[Any], dict[str, float]]:
    def scores(embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        x = embed(["a b .", "a c ."]).astype(np.float64)
        return {"stsb_dev": float(x[0] @ x[1]), "align": 0.1, "uniform": -1.0}

    return scores


@pytest.fixture
def fake_dev_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data root holding an 80-sentence corpus; the loop's STS-B dev evaluation is a two-sentence
    stand-in (the tests set the final evaluation)."""
    monkeypatch.setattr(train_mod, "make_dev_eval", dev_eval)
    return make_corpus_root(tmp_path / "data", corpus_text(DOG_CORPUS))
