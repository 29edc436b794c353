"""The end of a run (harness.run.final): the final scores and the seconds each task group took, and a
run whose final scores are not finite numbers failed, not finished."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.run.training as train_mod
from harness.config.run_config import resolve_config
from harness.errors import TrainingError
from harness.run.final import check_final_scores, final_scores
from harness.run.hooks import FINAL_SECONDS
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


def no_embed(sentences: list[str]) -> np.ndarray:
    raise AssertionError("the stand-in evaluator embeds nothing")


def test_the_final_scores_and_their_seconds_come_apart(corpus_root: Path) -> None:
    config = resolve_config("simcse", None, "smoke", {}, data_root=corpus_root)
    calls: list[tuple[str, str]] = []

    def evaluate(embed: Any, root: Path, tasks: str, mode: str) -> dict[str, Any]:
        calls.append((tasks, mode))
        return {"sts": {"avg": 70.0}, FINAL_SECONDS: {"sts": 1.5}}

    assert final_scores(evaluate, no_embed, corpus_root, config) == (
        {"sts": {"avg": 70.0}},
        {"sts": 1.5},
    )
    assert calls == [(config.final_tasks, config.transfer_mode)]
    no_seconds = final_scores(lambda *a: {"sts": {"avg": 1.0}}, no_embed, corpus_root, config)
    assert no_seconds == ({"sts": {"avg": 1.0}}, None)


def test_the_check_of_the_final_scores_names_four_and_counts_the_rest() -> None:
    check_final_scores({"sts": {"STS12": 70.0, "avg": 70.0}, "transfer": {"MR": 80.0}})
    bad = {"sts": {f"STS{i}": math.nan for i in range(12, 18)}}
    with pytest.raises(TrainingError) as caught:
        check_final_scores(bad)
    line = str(caught.value)
    assert line.startswith("final scores are not finite numbers: sts.STS12=nan, ")
    assert line.endswith(" and 2 more") and line.count("=nan") == 4
