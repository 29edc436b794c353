"""The steps between two evaluation points (harness.run.trajectory): their losses and metrics averaged
into one trajectory point, and a loss that is not finite or beyond float16's range failing the run at
the first step it happened at."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

import harness.run.training as train_mod
from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError, TrainingError
from harness.run.training import train_run
from harness.run.trajectory import LOSS_LIMIT, PendingSteps, overflow_message, trajectory_point
from harness.store.run_store import RunStore
from methods import REGISTRY
from methods.base import LossOutput
from methods.checks import Check
from methods.simcse import SimCSE, SimCSEParams
from methods.whitenedcse import WhitenedCSE
from tests.helpers import final_with, smoke_config


class NanAtStep3(SimCSE):
    name = "nan_at_3"

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        out = super().compute_loss(encode, batch, step)
        if step == 3:
            out.loss = out.loss * float("nan")
        return LossOutput(out.loss, {"extra_metric": 1.0})


def test_nan_loss_writes_a_failed_record_naming_the_step(
    fakes: None, train_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(REGISTRY, "nan_at_3", NanAtStep3)
    config = smoke_config(train_root, "nan_at_3", eval_every=1)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError, match="step 3"):
        train_run(config, train_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and "step 3" in saved["error"]
    assert [p["step"] for p in saved["trajectory"]] == [0, 1, 2]
    assert saved["trajectory"][1]["extra_metric"] == 1.0
    assert saved["finished_at"] is not None and store.finished_ids() == set()
    assert "peak_rss_mb" in saved or not Path("/proc/self/status").exists()


class HugeAtStep1(SimCSE):
    name = "huge_at_1"

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        out = super().compute_loss(encode, batch, step)
        return LossOutput(out.loss * 1e30 if step == 1 else out.loss, out.metrics)


def test_a_loss_that_overflows_float16s_range_fails_the_run_at_its_first_step(
    fake_dev_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final_with(71.5)
    )
    monkeypatch.setitem(REGISTRY, "huge_at_1", HugeAtStep1)
    config = smoke_config(fake_dev_root, "huge_at_1", max_steps=2, eval_every=1)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError) as caught:
        train_run(config, fake_dev_root, store, log=None)
    line = str(caught.value)
    assert line.startswith("loss ") and " at step 1 is beyond 65504 (float16's range)" in line
    assert "\n" not in line and len(line) < 200
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and saved["trajectory"][-1]["step"] == 0
    assert LOSS_LIMIT == 65504.0


def test_a_temperature_that_would_overflow_the_logits_never_reaches_the_loop(fake_dev_root: Path) -> None:
    config = smoke_config(fake_dev_root, max_steps=2, eval_every=1)
    with pytest.raises(ConfigError, match=r"^temperature must be from 0\.001 to 1000 .*got 1e-30$"):
        dataclasses.replace(config, params=SimCSEParams(temperature=1e-30))


def test_pending_steps_average_their_losses_and_metrics_and_start_again() -> None:
    pending = PendingSteps()
    assert pending.summary() == (None, {})  # no step ran
    pending.add(1, torch.tensor(1.0), {"acc": torch.tensor(0.25), "n": 2.0})
    pending.add(2, torch.tensor(3.0, requires_grad=True) * 1, {"acc": 0.75, "n": torch.tensor(4.0)})
    assert not any(loss.requires_grad for loss in pending.losses)  # kept detached
    pending.check()
    loss, metrics = pending.summary()
    assert loss == pytest.approx(2.0) and metrics == {"acc": pytest.approx(0.5), "n": pytest.approx(3.0)}
    assert pending.steps == [] and pending.losses == [] and pending.metrics == {}


def test_the_check_names_the_first_bad_step() -> None:
    pending = PendingSteps()
    for step, value in ((4, 1.0), (5, math.inf), (6, math.nan)):
        pending.add(step, torch.tensor(value), {})
    with pytest.raises(TrainingError, match=r"^non-finite loss \(inf\) at step 5$"):
        pending.check()
    big = PendingSteps()
    big.add(6, torch.tensor(LOSS_LIMIT), {})  # the limit itself passes
    big.add(7, torch.tensor(-2 * LOSS_LIMIT), {})
    with pytest.raises(TrainingError) as caught:
        big.check()
    assert str(caught.value) == overflow_message(-2 * LOSS_LIMIT, 7)
    assert "at step 7 is beyond 65504" in str(caught.value) and "temperature" not in str(caught.value)


def test_a_trajectory_point_keeps_the_scores_and_renames_a_metric_that_would_overwrite_one() -> None:
    scores = {"stsb_dev": 0.5, "align": 0.2, "uniform": -1.5, "sts12": 0.4}
    point = trajectory_point(3, scores, 1.25, {"loss": 9.0, "queue_fill": 0.5}, 1e-4, 1.23456)
    assert point == {
        "step": 3,
        "loss": 1.25,
        "stsb_dev": 0.5,
        "align": 0.2,
        "uniform": -1.5,
        "lr": 1e-4,
        "elapsed_s": 1.235,
        "sts12": 0.4,
        "method_loss": 9.0,  # a method's metric named like a reserved key
        "queue_fill": 0.5,
    }


def test_a_failed_device_check_fails_at_the_evaluation_point_naming_its_step_before_the_loss() -> None:
    pending = PendingSteps()
    check = "whitening got {0} non-finite input values (the first at row {1})"
    pending.add(3, torch.tensor(1.0), {}, [Check(check, torch.tensor([0, 0]))])  # nothing wrong
    bad = Check(check, torch.tensor([2, 5]), "the row's values: {values}", torch.tensor([1.5, math.nan]))
    pending.add(4, torch.tensor(math.nan), {}, [bad])  # the check says why the loss is NaN
    pending.add(5, torch.tensor(math.nan), {}, [Check(check, torch.tensor([9, 0]))])
    with pytest.raises(TrainingError) as caught:
        pending.check()
    assert str(caught.value) == "step 4: whitening got 2 non-finite input values (the first at row 5)"
    assert caught.value.__notes__ == [
        "the row's values: [1.5, nan]",
        "found at the evaluation point after steps 3-5",
    ]
    clean = PendingSteps()
    clean.add(6, torch.tensor(1.0), {}, [Check(check, torch.tensor([0, 0]))])
    clean.check()
    clean.summary()
    assert clean.checks == []  # read once, then started again


class NonFiniteViewsAtStep3(WhitenedCSE):
    name = "non_finite_views_at_3"

    def raw_views(self, encode: EncodeFn, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        views = super().raw_views(encode, batch)
        if self._step == 3:
            views = views.index_fill(2, torch.tensor([5], device=views.device), float("inf"))
        return views

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        self._step = step
        return super().compute_loss(encode, batch, step)


def test_a_whitenings_non_finite_input_fails_the_run_at_the_next_point_naming_its_step(
    fakes: None, train_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(REGISTRY, "non_finite_views_at_3", NonFiniteViewsAtStep3)
    config = smoke_config(train_root, "non_finite_views_at_3", eval_every=2, params={"num_groups": 128})
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError) as caught:
        train_run(config, train_root, store, log=None)
    assert str(caught.value).startswith("step 3: group whitening got ")
    assert "non-finite input values (the first at block 0, row 0, channel 5)" in str(caught.value)
    saved = store.load(config.run_id())
    assert (
        saved is not None
        and saved["status"] == "failed"
        and saved["error"].startswith("TrainingError: step 3:")
    )
    assert [p["step"] for p in saved["trajectory"]] == [0, 2]  # what was computed before is kept
    assert "after steps 3-4" in saved["error_details"]
