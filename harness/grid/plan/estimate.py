"""What a grid's estimate prints and how it schedules: the makespan of runs on N slots (longest
first), the ``--dry-run`` lines per table and the whole grid from scratch, from the run seconds of
:class:`~harness.grid.plan.cost.CostModel`."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from harness.grid.plan.cost import CostModel
from harness.store.run_config import RunConfig


def makespan(seconds: Sequence[float], slots: int) -> float:
    """Wall time of running these jobs on ``slots`` parallel slots, longest first (LPT list
    scheduling: within 4/3 of the optimum)."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    loads = [0.0] * min(slots, max(len(seconds), 1))
    heapq.heapify(loads)
    for s in sorted(seconds, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + s)
    return max(loads) if loads else 0.0


def longest_first(configs: Sequence[RunConfig], model: CostModel) -> list[RunConfig]:
    """The configs in the order a grid should start them: longest estimated run first (stable)."""
    return sorted(configs, key=lambda c: -model.run_seconds(c))


def hours(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def scratch_line(configs: Sequence[RunConfig], model: CostModel, slots: int) -> str:
    """What the whole grid costs from an empty store (finished runs estimated too, not counted as
    done): the figure to plan a fresh machine's night by."""
    seconds = [model.run_seconds(c) for c in configs]
    unit = "GPU" if model.device == "cuda" else "CPU-trial"
    slots = max(1, slots)
    return (
        f"whole grid from scratch ({len(seconds)} distinct runs, finished ones included): "
        f"{sum(seconds) / 3600 / model.trials_per_gpu:.2f} {unit}-h, about {hours(makespan(seconds, slots))} "
        f"on {slots} slot(s)"
    )


def estimate_lines(
    runs: Sequence[tuple[RunConfig, Sequence[str]]],
    model: CostModel,
    *,
    local_slots: int,
    slot_counts: Sequence[int] = (1, 2, 4, 8),
) -> list[str]:
    """The ``--dry-run`` estimate: per-table trial hours, the total, and the makespan on N slots.

    Args:
        runs: (config, cells that use it as ``"spec: key"``) for each run still to do.
        model: the cost model.
        local_slots: how many trials this machine (or cluster) runs at once.
        slot_counts: other slot counts to print a makespan for.
    """
    if not runs:
        return ["estimate: nothing to run"]
    share = model.trials_per_gpu
    unit = "GPU" if model.device == "cuda" else "CPU-trial"
    seconds = [model.run_seconds(c) for c, _ in runs]
    per_table: dict[str, list[float]] = {}
    for (_, used_by), s in zip(runs, seconds):
        for table in sorted({u.split(":", 1)[0] for u in used_by}):
            per_table.setdefault(table, []).append(s)
    sources = sorted({model.source(c) for c, _ in runs})
    shared = f", {share} trials sharing each GPU" if share > 1 else ""
    warning = model.uncalibrated_line([c for c, _ in runs])
    lines = [warning] if warning else []
    lines.append(f"estimate ({unit}-hours{shared}; runs shared by tables count in each):")
    for table, values in sorted(per_table.items()):
        lines.append(f"  {table:24} {len(values):4d} run(s)  {sum(values) / 3600 / share:7.2f} {unit}-h")
    total = sum(seconds)
    lines.append(
        f"  {'all (distinct runs)':24} {len(seconds):4d} run(s)  {total / 3600 / share:7.2f} {unit}-h; "
        f"longest run {hours(max(seconds))}"
    )
    if model.device == "cuda":  # slots = GPUs x trials per GPU
        here = max(1, local_slots // share)
        counts = sorted({here, *slot_counts})
        spans = ", ".join(
            f"{n} GPU(s) {hours(makespan(seconds, n * share))}{' (here)' if n == here else ''}"
            for n in counts
        )
    else:
        counts = sorted({local_slots, *slot_counts})
        spans = ", ".join(
            f"{n} slot(s) {hours(makespan(seconds, n))}{' (here)' if n == local_slots else ''}"
            for n in counts
        )
    lines.append(f"  makespan, longest first: {spans}")
    lines.extend(f"  unit costs: {s}" for s in sources)
    if not math.isfinite(total):
        lines.append("  warning: an estimate is not finite")
    return lines
