"""The steps between two evaluation points: their losses and metrics, kept on the device until the
point reads them, checked, averaged and written as one trajectory point.

A step hands back its loss, the method's metrics and its checks (:func:`~methods.checks.device_check`)
as detached tensors and never waits for the device to finish; the evaluation point reads them all at
once. A failed check, a loss that is not finite, or one beyond :data:`LOSS_LIMIT` (overflowing
arithmetic), fails the run there, naming the first step it happened at (a step's checks before its
loss: they say why). The check is on the numbers only: the run's parameters were checked when its
configuration was built (:class:`~harness.store.run_config.RunConfig`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from harness.errors import TrainingError
from methods.base import Metric
from methods.checks import Check

LOSS_LIMIT = float(torch.finfo(torch.float16).max)
"""The largest loss a run accepts (float16's largest number, 65504). The methods' losses stay far
below it (InfoNCE is about log(batch); the Barlow terms are bounded by d and d**2 x their weights),
so a larger loss means the arithmetic overflowed: the run fails instead of training to meaningless
numbers."""

RESERVED_KEYS: frozenset[str] = frozenset(
    {"step", "loss", "stsb_dev", "align", "uniform", "lr", "elapsed_s", "probe_s"}
)
"""Keys of a trajectory point that a method's metric of the same name must not overwrite (it is
written as ``method_<key>`` instead)."""


def overflow_message(loss: float, step: int) -> str:
    """One line: the loss, the step and the limit."""
    return (
        f"loss {loss:.3g} at step {step} is beyond {LOSS_LIMIT:g} (float16's range): the arithmetic "
        "overflowed; the run's numbers would mean nothing"
    )


class PendingSteps:
    """The losses and metrics of the steps since the last evaluation point, on the device."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.losses: list[torch.Tensor] = []
        self.metrics: dict[str, list[Metric]] = {}
        self.checks: list[tuple[int, Check]] = []

    def add(
        self, step: int, loss: torch.Tensor, metrics: Mapping[str, Metric], checks: Sequence[Check] = ()
    ) -> None:
        self.steps.append(step)
        self.losses.append(loss.detach())
        for key, value in metrics.items():
            kept = value.detach() if isinstance(value, torch.Tensor) else value
            self.metrics.setdefault(key, []).append(kept)
        self.checks.extend((step, check) for check in checks)

    def check(self) -> None:
        """Raise :class:`TrainingError` naming the first step with a failed check, a loss that is not
        finite or one beyond :data:`LOSS_LIMIT` (one read of all pending losses, one of the checks)."""
        if not self.losses:
            return
        values = torch.stack([loss.float() for loss in self.losses]).cpu().tolist()
        failed = self._failed_checks()
        for step, value in zip(self.steps, values, strict=True):
            if step in failed:
                message, note = failed[step]
                error = TrainingError(f"step {step}: {message}")
                if note:
                    error.add_note(note)  # kept in the record
                error.add_note(f"found at the evaluation point after steps {self.steps[0]}-{self.steps[-1]}")
                raise error
            if not math.isfinite(value):
                raise TrainingError(f"non-finite loss ({value}) at step {step}")
            if abs(value) > LOSS_LIMIT:
                raise TrainingError(overflow_message(value, step))

    def _failed_checks(self) -> dict[int, tuple[str, str]]:
        """The first failed check of each step that has one, as its message and note (one read)."""
        if not self.checks:
            return {}
        device = self.checks[0][1].numbers.device
        read = iter(torch.cat([check.numbers.to(device) for _, check in self.checks]).cpu().tolist())
        failed: dict[int, tuple[str, str]] = {}
        for step, check in self.checks:
            numbers = [next(read) for _ in range(check.numbers.numel())]
            if numbers and numbers[0] > 0 and step not in failed:
                failed[step] = check.text(numbers)
        return failed

    def summary(self) -> tuple[float | None, dict[str, float]]:
        """The mean loss (None when no step ran) and each metric's mean, read from the device; clears
        the pending steps."""
        loss = None
        if self.losses:
            loss = float(torch.stack([value.float() for value in self.losses]).double().mean())
        metrics = {key: _mean(values) for key, values in sorted(self.metrics.items())}
        self.steps.clear()
        self.losses.clear()
        self.metrics.clear()
        self.checks.clear()
        return loss, metrics


def _mean(values: list[Metric]) -> float:
    """The mean in float64 of float32 readings (one device read for the tensors)."""
    tensors = [v.detach().float().reshape(()) for v in values if isinstance(v, torch.Tensor)]
    read = iter(torch.stack([v.to(tensors[0].device) for v in tensors]).cpu().tolist() if tensors else [])
    numbers = [next(read) if isinstance(v, torch.Tensor) else float(v) for v in values]
    return float(torch.tensor(numbers, dtype=torch.float64).mean())


def trajectory_point(
    step: int,
    scores: Mapping[str, float],
    loss: float | None,
    metrics: Mapping[str, float],
    lr: float,
    elapsed_s: float,
    dev_eval_s: float | None = None,
) -> dict[str, Any]:
    """The trajectory point of ``step``: the dev evaluation's scores, the steps' mean loss and metrics,
    and the seconds the dev evaluation took (``probe_s``, the key keeps its first name; absent where the
    scores came from the cache)."""
    point: dict[str, Any] = {
        "step": step,
        "loss": loss,
        "stsb_dev": float(scores["stsb_dev"]),
        "align": float(scores["align"]),
        "uniform": float(scores["uniform"]),
        "lr": lr,
        "elapsed_s": round(elapsed_s, 3),
    }
    if dev_eval_s is not None:
        point["probe_s"] = round(dev_eval_s, 3)
    for key in sorted(scores):
        if key not in point:
            point[key] = float(scores[key])
    for key, value in sorted(metrics.items()):
        point[key if key not in RESERVED_KEYS else f"method_{key}"] = value
    return point
