"""A run's evaluation points (harness.run.evaluation_point): which state is kept as the best, a copy
that later training does not touch, and what one point writes, logs and hands on."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from harness.run.evaluation_point import EvaluationPoints, RunCalls, RunTimes, cpu_state
from harness.run.training import train_run
from harness.run.trajectory import PendingSteps
from tests.helpers import smoke_config


class _Method:
    def __init__(self) -> None:
        self.snapshots = 0

    def snapshot_state(self) -> dict[str, int]:
        self.snapshots += 1
        return {"snapshot": self.snapshots}


class _Step:
    lr = 0.5


def _points(total: int) -> EvaluationPoints:
    """Evaluation points of a run of ``total`` steps on a stand-in encoder, method and step."""
    return EvaluationPoints(
        config=None,  # type: ignore[arg-type]
        record={"run_id": "r"},  # type: ignore[typeddict-item]
        total=total,
        encoder=nn.Linear(2, 2),  # type: ignore[arg-type]
        method=_Method(),  # type: ignore[arg-type]
        step_fn=_Step(),  # type: ignore[arg-type]
        dev_eval_fn=lambda embed: {},
        calls=RunCalls(lambda: None, lambda line: None, lambda: None, embed=lambda batch: None),
        best={"score": -math.inf, "step": None, "encoder": None, "method": None},
        times=RunTimes(),
        pending=PendingSteps(),
    )


def test_the_best_state_is_the_first_highest_dev_score_after_step_0() -> None:
    points = _points(total=3)
    for step, score in [(0, 90.0), (1, 50.0), (2, 70.0), (3, 70.0)]:
        points.select(step, {"stsb_dev": score})
    # step 0 is no candidate; a tie keeps the first
    assert points.best["step"] == 2 and points.best["score"] == 70.0
    assert points.record == {"run_id": "r", "best_step": 2, "best_stsb_dev": 70.0}
    assert points.best["method"] == {"snapshot": 2}


def test_a_run_without_training_steps_selects_step_0() -> None:
    points = _points(total=0)
    points.select(0, {"stsb_dev": 12.5})
    assert points.best["step"] == 0 and points.record["best_step"] == 0


def test_the_kept_state_is_a_copy_training_does_not_change() -> None:
    layer = nn.Linear(3, 3)
    kept = cpu_state(layer)
    with torch.no_grad():
        layer.weight.add_(1.0)
    assert not torch.equal(kept["weight"], layer.weight)
    assert torch.equal(kept["weight"] + 1.0, layer.weight)


def test_every_point_is_saved_logged_and_handed_to_the_hook(
    fakes: None, train_root: Path, tmp_path: Path
) -> None:
    lines: list[str] = []
    points: list[Mapping[str, Any]] = []
    config = smoke_config(train_root, max_steps=3, eval_every=2)
    record = train_run(config, train_root, log=lines.append, on_point=points.append)
    assert [p["step"] for p in points] == [0, 2, 3]  # step 0, every eval_every, the last step
    assert [p["step"] for p in record["trajectory"]] == [0, 2, 3]
    assert all(p["total_steps"] == 3 for p in points)
    assert points[-1]["best_stsb_dev"] == record["best_stsb_dev"]
    step_lines = [line for line in lines if " step " in line and "stsb_dev" in line]
    assert len(step_lines) == 3
    starred = [line for line in step_lines if line.endswith(" *")]
    assert len(starred) >= 1 and f"step {record['best_step']}/3" in starred[-1]


@pytest.mark.parametrize("step", [0, 1])
def test_a_point_s_trajectory_entry_carries_the_dev_evaluation_s_scores(step: int) -> None:
    points = _points(total=1)
    point = points._trajectory_point(step, {"stsb_dev": 61.0, "align": 0.2, "uniform": -2.0}, 0.5)
    assert (point["step"], point["stsb_dev"], point["align"], point["uniform"]) == (step, 61.0, 0.2, -2.0)
