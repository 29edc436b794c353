"""A run whose final scores are not finite is failed, not finished; a loss beyond float16's range
(overflowing logits, e.g. ``temperature=1e-30``) fails the run at that step, naming the temperature."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.run.training as train_mod
from harness.config.run_config import RunConfig, resolve_config
from harness.errors import TrainingError
from harness.run.hooks import non_finite_scores
from harness.run.training import train_run
from harness.run.trajectory import LOSS_LIMIT
from harness.store.run_store import RunStore

CORPUS = [f"the dog number {i} walks to the park ." for i in range(80)]


def probe(data_root: Path, token_lengths: Any = None) -> Callable[[Any], dict[str, float]]:
    def scores(embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        x = embed(["a b .", "a c ."]).astype(np.float64)
        return {"stsb_dev": float(x[0] @ x[1]), "align": 0.1, "uniform": -1.0}

    return scores


def final_with(value: float) -> Callable[..., dict[str, Any]]:
    def final(embed: Any, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        return {"sts": {"STS12": 70.0, "STSB": value, "avg": value}, "sts_tasks": ["STS12", "STSB"]}

    return final


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(train_mod, "make_probe", probe)
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "nli-sentences.txt").write_text("\n".join(CORPUS) + "\n")
    return root


def smoke(data_root: Path, params: dict[str, Any] | None = None) -> RunConfig:
    return resolve_config("simcse", params, "smoke", {"max_steps": 2, "eval_every": 1}, data_root=data_root)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_run_with_non_finite_final_scores_is_failed_not_finished(
    value: float, data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final_with(value))
    config = smoke(data_root)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(
        TrainingError, match=rf"final scores are not finite numbers: sts.STSB={value}, sts.avg"
    ):
        train_run(config, data_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed"
    assert saved["error"].startswith("TrainingError: final scores are not finite numbers")
    assert saved["final"]["sts"] == {"STS12": 70.0, "STSB": None, "avg": None}  # kept, as strict JSON
    assert store.finished_ids() == set()


def test_finite_final_scores_finish(data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final_with(71.5))
    config = smoke(data_root)
    store = RunStore(tmp_path / "runs")
    assert train_run(config, data_root, store, log=None)["status"] == "finished"
    assert store.finished_ids() == {config.run_id()}


def test_non_finite_scores_lists_every_group() -> None:
    final = {"sts": {"A": 1.0, "B": None, "C": True}, "transfer": {"MR": "x", "CR": 80}, "sts_tasks": ["A"]}
    assert non_finite_scores(final) == ["sts.B=None", "sts.C=True", "transfer.MR=x"]
    assert non_finite_scores({"sts": {"A": np.float32(1.5)}}) == []


def test_a_temperature_that_overflows_the_logits_fails_the_run_at_its_first_step(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final_with(71.5))
    config = smoke(data_root, {"temperature": 1e-30})
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError) as caught:
        train_run(config, data_root, store, log=None)
    line = str(caught.value)
    assert line.startswith("loss ") and " at step 1 is beyond 65504 (float16's range)" in line
    assert "temperature 1e-30 scales cosines up to 1e+30" in line and "\n" not in line and len(line) < 200
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and saved["trajectory"][-1]["step"] == 0
    assert LOSS_LIMIT == 65504.0


def test_a_singular_whitening_error_is_one_short_line_and_the_record_keeps_the_eigenvalues(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final_with(71.5))
    config = resolve_config(
        "whitenedcse", {"num_groups": 1, "eps": 0.0}, "smoke", {"max_steps": 2}, data_root=data_root
    )
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError) as caught:
        train_run(config, data_root, store, log=None)
    line = str(caught.value)
    assert "step 1: " in line and "block 0, group 0 is singular or non-finite" in line
    assert len(line) < 250 and "[" not in line, line  # not the eigenvalues themselves
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and saved["error"] == f"TrainingError: {line}"
    details = saved["error_details"]
    assert details.startswith("eigenvalues of block 0, group 0: [") and details.count(",") >= 63
