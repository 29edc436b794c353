"""The transfer classifiers' device engine: every fit of a stage, of every task, at once.

On a GPU (``device``), as SentEval runs its PyTorch classifier there, every fit of a stage (the
selection fits of every task of one feature width, then their refits) trains at once on the device
(:func:`~harness.evaluation.logreg_batched.fit_batched`): the same folds, data order, seeds, stopping
and model selection, the same arithmetic in batched kernels, so the accuracies match the CPU path's to
within float rounding (a sample now and then).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from harness.evaluation.logreg import ClassifierConfig
from harness.evaluation.logreg_batched import BatchedFit, fit_batched
from harness.evaluation.transfer_protocol import FitJob, Rows, TaskProtocol, TransferTiming


def classify_batched(
    protocols: dict[str, TaskProtocol],
    config: ClassifierConfig,
    device: torch.device,
    timing: TransferTiming,
    start: float,
) -> dict[str, float]:
    """Every task's fits on ``device``, stage by stage: the selection fits of all tasks of one
    feature width at once, then all their refits at once (each task's from its own selection)."""
    results: dict[str, float] = {}
    widths: dict[int, list[TaskProtocol]] = {}
    for proto in protocols.values():
        widths.setdefault(next(iter(proto.features.splits.values()))[0].shape[1], []).append(proto)
    for group in widths.values():
        x, y, offsets = _stacked(group, device)

        stage = [(proto, job) for proto in group for job in proto.selection_jobs]
        selection = _fit_stage(x, y, offsets, stage, config, timing.steps)
        finals: list[tuple[TaskProtocol, FitJob]] = []
        counts = []
        for proto in group:
            chosen, selection = selection[: len(proto.selection_jobs)], selection[len(proto.selection_jobs) :]
            jobs = proto.final_jobs(chosen)
            finals += [(proto, job) for job in jobs]
            counts.append(len(jobs))
        scores = _fit_stage(x, y, offsets, finals, config, timing.steps)
        for proto, count in zip(group, counts, strict=True):
            mine, scores = scores[:count], scores[count:]
            results[proto.name] = proto.accuracy(mine)
            timing.finished_at[proto.name] = time.perf_counter() - start
    return results


def _fit_stage(
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: Mapping[tuple[str, str], int],
    jobs: Sequence[tuple[TaskProtocol, FitJob]],
    config: ClassifierConfig,
    steps: list[int],
) -> list[float]:
    """The fits of ``jobs`` at once; each one's value as :func:`run_fit` returns it."""
    batched = [
        BatchedFit(
            _global_rows(offsets, proto, job.train),
            None if job.valid is None else _global_rows(offsets, proto, job.valid),
            None if job.score is None else _global_rows(offsets, proto, job.score),
            proto.features.nclasses,
            job.l2,
        )
        for proto, job in jobs
    ]
    return [r.best_valid if r.score is None else r.score for r in fit_batched(x, y, batched, config, steps)]


def _stacked(
    group: Sequence[TaskProtocol], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, dict[tuple[str, str], int]]:
    """The splits of ``group``'s tasks as one feature matrix and label vector on ``device``, and the
    first row of each (task, split)."""
    xs, ys, offsets, row = [], [], {}, 0
    for proto in group:
        for split, (x, y) in proto.features.splits.items():
            offsets[(proto.name, split)] = row
            xs.append(np.ascontiguousarray(x, dtype=np.float32))
            ys.append(np.asarray(y, dtype=np.int64))
            row += len(y)
    return (
        torch.from_numpy(np.concatenate(xs)).to(device),
        torch.from_numpy(np.concatenate(ys)).to(device),
        offsets,
    )


def _global_rows(offsets: Mapping[tuple[str, str], int], proto: TaskProtocol, rows: Rows) -> np.ndarray:
    split, idx = rows
    first = offsets[(proto.name, split)]
    return first + (np.arange(len(proto.features.splits[split][1])) if idx is None else np.asarray(idx))
