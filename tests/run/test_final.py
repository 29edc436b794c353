"""The end of a run (harness.run.final): the final scores and the seconds each task group took, and a
run whose final scores are not finite numbers failed, not finished."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import harness.run.training as train_mod
from harness.errors import TrainingError
from harness.run.training import train_run
from harness.store.run_store import RunStore
from tests.helpers import final_with, smoke_config


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_run_with_non_finite_final_scores_is_failed_not_finished(
    value: float, probed_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final_with(value))
    config = smoke_config(probed_root, max_steps=2, eval_every=1)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(
        TrainingError, match=rf"final scores are not finite numbers: sts.STSB={value}, sts.avg"
    ):
        train_run(config, probed_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed"
    assert saved["error"].startswith("TrainingError: final scores are not finite numbers")
    assert saved["final"]["sts"] == {"STS12": 70.0, "STSB": None, "avg": None}  # kept, as strict JSON
    assert store.finished_ids() == set()


def test_finite_final_scores_finish(
    probed_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final_with(71.5))
    config = smoke_config(probed_root, max_steps=2, eval_every=1)
    store = RunStore(tmp_path / "runs")
    assert train_run(config, probed_root, store, log=None)["status"] == "finished"
    assert store.finished_ids() == {config.run_id()}
