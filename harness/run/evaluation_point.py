"""A run's evaluation points: the STS-B dev evaluation, the trajectory point, the best state, the checkpoint.

:class:`EvaluationPoints` is the part of :class:`~harness.run.training.TrainingRun` that runs at step
0 and at every ``eval_every`` steps; the run builds it once its encoder, method and step exist and
hands it what it reads and the run's own calls it makes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from harness.evaluation.geometry import DevEmbedFn
from harness.run import checkpoint as ckpt
from harness.run.dev_cache import DevCache, dev_cache_key
from harness.run.step import TrainStep
from harness.run.trajectory import PendingSteps, trajectory_point
from harness.store.record import RunRecord
from harness.store.run_config import RunConfig

if TYPE_CHECKING:
    from harness.encoder.model import SentenceEncoder
    from methods.base import Method

Log = Callable[[str], None]

PointHook = Callable[[Mapping[str, Any]], None]
"""``on_point(point)``: one evaluation point, as the trajectory has it plus ``total_steps`` and
``best_stsb_dev`` (the best so far); the point a resumed run starts from also has ``resumed_from_step``."""

CheckpointHook = Callable[[Path, int], None]
"""``on_checkpoint(path, step)``: the resume checkpoint of ``step`` was just written to ``path`` (a grid's
trial hands it to Ray Tune's storage)."""


def cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s state on the CPU (the best state kept apart from the training one)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


@dataclass
class RunTimes:
    """A run's clocks, shared by its parts: seconds of training and of evaluation so far, and the
    moment a trajectory point's ``elapsed_s`` counts from."""

    train_s: float = 0.0
    eval_s: float = 0.0
    elapsed0: float = 0.0


@dataclass
class RunCalls:
    """The calls of its run an evaluation point and the end of a run make."""

    save: Callable[[], None]
    say: Log
    head_into_pooler: Callable[[], None]
    embed: Callable[[list[str]], Any]


class EvaluationPoints:
    """The dev evaluation of one evaluation point and what follows it: trajectory point, selection of the
    best state by STS-B dev, the record saved, a log line, the hook, the resume checkpoint."""

    def __init__(
        self,
        *,
        config: RunConfig,
        record: RunRecord,
        total: int,
        encoder: SentenceEncoder,
        method: Method,
        step_fn: TrainStep,
        dev_eval_fn: Callable[[DevEmbedFn], dict[str, float]],
        calls: RunCalls,
        best: dict[str, Any],
        times: RunTimes,
        pending: PendingSteps,
        dev_cache: DevCache | None = None,
        resume_path: Path | None = None,
        on_point: PointHook | None = None,
        on_checkpoint: CheckpointHook | None = None,
    ) -> None:
        self.config = config
        self.record = record
        self.run_id = record["run_id"]
        self.total = total
        self.encoder = encoder
        self.method = method
        self.step_fn = step_fn
        self.dev_eval_fn = dev_eval_fn
        self.calls = calls
        self.best = best
        self.times = times
        self.pending = pending
        self.dev_cache = dev_cache
        self.resume_path = resume_path
        self.clock = ckpt.CheckpointClock()
        self.on_point = on_point
        self.on_checkpoint = on_checkpoint

    def evaluate(self, step: int) -> None:
        """One evaluation point: STS-B dev evaluation, trajectory point, selection, log line, checkpoint."""
        t0 = time.perf_counter()
        if self.config.eval_pooler == "cls":  # the dev evaluation reads the head as trained so far
            self.calls.head_into_pooler()
        cached_before = bool(self.record.get("step0_probe_cached"))
        scores = self._dev_scores(step)
        self.step_fn.train()
        took = time.perf_counter() - t0
        self.times.eval_s += took
        cached = not cached_before and bool(self.record.get("step0_probe_cached"))
        point = self._trajectory_point(step, scores, None if cached else took)
        self.record["trajectory"].append(point)
        self.select(step, point)
        self.record["train_time_s"] = round(self.times.train_s, 3)
        self.record["eval_time_s"] = round(self.times.eval_s, 3)
        self.calls.save()
        self.calls.say(
            f"[{self.run_id}] step {step}/{self.total} loss {_fmt(point['loss'])} "
            f"stsb_dev {point['stsb_dev']:.2f} align {point['align']:.4f} uniform {point['uniform']:.4f} "
            f"({point['elapsed_s']:.0f} s){' *' if self.record['best_step'] == step else ''}"
        )
        self.tell(point)
        if self.resume_path is not None and self.clock.due(step, self.total):  # last: no random draws after
            self.checkpoint(step)

    def tell(self, point: Mapping[str, Any], **extra: Any) -> None:
        """Hand ``point`` to the hook (:data:`PointHook`) with ``total_steps``, the best so far and
        ``extra`` (``resumed_from_step`` for the point a resumed run starts from)."""
        if self.on_point is not None:
            best = self.record.get("best_stsb_dev")
            self.on_point({**point, "total_steps": self.total, "best_stsb_dev": best, **extra})

    def _dev_scores(self, step: int) -> dict[str, float]:
        """The STS-B dev scores; the starting encoder's (step 0, shared by every run) may be cached,
        unless the method embeds with its own sentence head (whose fresh weights the key does not see)."""
        cache = self.dev_cache
        key = None
        if step == 0 and cache is not None and self.method.sentence_head() is None:  # a head: no sharing
            key = dev_cache_key(
                self.encoder.model,
                self.dev_eval_fn,
                pooler=self.config.eval_pooler,
                precision=self.config.precision,
                device=self.encoder.device,
            )
        cached = cache.get(key) if cache is not None and key is not None else None
        if cached is not None:
            self.record["step0_probe_cached"] = True
            return cached
        scores = self.dev_eval_fn(self.calls.embed)
        if cache is not None and key is not None:
            cache.put(key, scores, run_id=self.run_id, model=self.config.model)
        return scores

    def _trajectory_point(
        self, step: int, scores: dict[str, float], dev_eval_s: float | None
    ) -> dict[str, Any]:
        """The trajectory point of ``step``: the dev evaluation's scores and seconds, the steps' mean loss
        and metrics."""
        loss, metrics = self.pending.summary()
        elapsed = time.perf_counter() - self.times.elapsed0
        return trajectory_point(step, scores, loss, metrics, self.step_fn.lr, elapsed, dev_eval_s)

    def select(self, step: int, point: Mapping[str, Any]) -> None:
        """Keep the state of ``step`` (on the CPU) when its STS-B dev beats the best so far.

        Step 0 is no candidate (SimCSE never selects the untrained encoder) unless the run has no
        training steps.
        """
        candidate = step > 0 or self.total == 0
        if candidate and point["stsb_dev"] > self.best["score"]:
            self.best.update(
                score=point["stsb_dev"],
                step=step,
                encoder=cpu_state(self.encoder),
                method=self.method.snapshot_state(),
            )
            self.record["best_step"] = step
            self.record["best_stsb_dev"] = point["stsb_dev"]

    def checkpoint(self, step: int) -> None:
        """Write the resume checkpoint of the evaluation point ``step``."""

        assert self.resume_path is not None
        state = ckpt.training_state(
            config=self.record["config"],
            step=step,
            encoder=self.encoder,
            method=self.method,
            optimizer=self.step_fn.optimizer,
            scheduler=self.step_fn.scheduler,
            best=self.best,
            record=self.record,
            train_time=self.times.train_s,
            eval_time=self.times.eval_s,
            scaler=self.step_fn.scaler,
        )
        ckpt.save_checkpoint(self.resume_path, state)
        if self.on_checkpoint is not None:
            self.on_checkpoint(self.resume_path, step)
