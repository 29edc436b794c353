"""Seeds in rounds until the claims are decided (``harness grid --until-decided``).

The grid's side of it: which seeds each round runs, for which cells, within which budget. Which
claims are still undecided, and what a claim needs, is the claims' statistics' side
(:mod:`harness.stats.decisions`, through the :data:`Decide` the command hands in: the grid never
imports the reporters).

A round:

1. ``decide()`` reads the store and says which claims are undecided (not decided after correction,
   not ruled out, not short of seeds), most promising first, and the cells they compare;
2. the round's seed count ``T`` is the next step of :func:`next_seeds` (from ``--seeds``, default
   :data:`FIRST_SEEDS`; about 25 % more seeds a round, to ``max_seeds``) at which those cells have
   runs to do; the runs are ``expand(specs, seeds=T)``'s, so a seed's run id is the same whatever
   round runs it (seeds are consecutive from the profile's seed; the id hashes the config);
3. the budget: the runs this grid already ran count their measured wall seconds (their estimate where
   a record has none), the round's runs their estimate from the cost model; a round that does not fit
   keeps the most promising claims that do, then fewer seeds; a round that cannot fit one claim's one
   seed ends the grid ("budget reached"). So the planned trial-hours never exceed ``--budget``;
4. the round runs through :func:`harness.grid.launch.run_pending` (Ray Tune) and the loop goes on
   until no claim is undecided, ``max_seeds`` is reached or the budget is.

A run that fails is not retried by the same grid (its claim has one seed fewer). Every round writes
``<runs>/sequential.json`` (:data:`SEQUENTIAL_FILE`): the design (test, mixture ``c``, alpha,
correction, family, effect, maximum seeds, budget) and each claim's state, which ``harness claims``
reads to test those claims with the same anytime-valid sequence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.atomic import write_json
from harness.errors import ConfigError
from harness.grid.launch import (
    PlannedGrid,
    check_cluster,
    cost_model,
    longest_first_with_estimate,
    run_pending,
)
from harness.grid.lock import GridLock
from harness.grid.plan.cost import CostModel
from harness.grid.plan.estimate import hours, makespan
from harness.grid.plan.status import attach_status
from harness.grid.progress.report import GridReport
from harness.specs.cells import PlannedRun, expand
from harness.stats.decisions import CellKey, Decide, Decision
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore

SEQUENTIAL_FILE = "sequential.json"
"""The design and the claims' states of the last ``--until-decided`` grid, in the runs folder."""
FIRST_SEEDS = 5
"""The first round's seeds when ``--seeds`` is not given: the fewest at which the anytime sequence
can exclude 0 for a difference within a few spreads of 0 (docs/guide.md)."""
GROWTH = 0.25
"""Each round adds this share of the seeds so far (at least one)."""


@dataclass(frozen=True)
class Sequential:
    """``--until-decided``'s own settings (the claims' side holds effect, correction and family).

    Attributes:
        max_seeds: the most seeds a claim gets.
        budget_hours: the most trial-hours (the cost model's unit: CPU-trial-hours, or GPU-hours)
            the grid plans; None = no limit.
        design: what :data:`SEQUENTIAL_FILE` records of the test (its ``c``, alpha, correction,
            family, effect), written before the first round.
    """

    max_seeds: int
    budget_hours: float | None = None
    design: Mapping[str, Any] = field(default_factory=dict)


def check_sequential(max_seeds: int | None, budget_hours: float | None, first: int) -> None:
    """``--max-seeds`` and ``--budget`` as ``--until-decided`` needs them (one error line each)."""
    from harness.specs.cells import check_seed_count

    if max_seeds is None:
        raise ConfigError("--until-decided needs --max-seeds N (the most seeds a claim may get)")
    check_seed_count(max_seeds, "--max-seeds")
    if max_seeds < first:
        raise ConfigError(f"--max-seeds {max_seeds} is below the first round's {first} seed(s)")
    if budget_hours is not None and (not math.isfinite(budget_hours) or budget_hours <= 0):
        raise ConfigError(f"--budget must be a number of hours > 0, got {budget_hours}")


def next_seeds(seeds: int, max_seeds: int) -> int:
    """The next round's seed count: about :data:`GROWTH` more, at least one, at most ``max_seeds``."""
    return min(max_seeds, seeds + max(1, math.ceil(seeds * GROWTH)))


def schedule(first: int, max_seeds: int) -> list[int]:
    """Every round's seed count, from ``first`` to ``max_seeds``."""
    out = [min(first, max_seeds)]
    while out[-1] < max_seeds:
        out.append(next_seeds(out[-1], max_seeds))
    return out


def read_sequential(runs_dir: str | Path) -> dict[str, Any] | None:
    """The runs folder's :data:`SEQUENTIAL_FILE` (None when there is none or it is unreadable)."""
    path = Path(runs_dir) / SEQUENTIAL_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("design"), dict) else None


class Pending:
    """The runs each cell still has to do at a number of seeds (one expansion per seed count)."""

    def __init__(self, grid: PlannedGrid, skip: set[str]) -> None:
        self.grid = grid
        self.skip = skip
        self._by_seeds: dict[int, dict[CellKey, list[PlannedRun]]] = {}

    def cells(self, seeds: int) -> dict[CellKey, list[PlannedRun]]:
        """``{cell: runs to do}`` at ``seeds`` seeds: not finished (failed ones as the grid's
        ``retry_failed`` says), not tried by this grid already."""
        if seeds not in self._by_seeds:
            grid = self.grid
            plan = expand(
                grid.specs,
                grid.profile,
                seeds=seeds,
                overrides=grid.options.overrides,
                data_root=grid.data_root,
                require_corpus=not grid.options.dry_run,
            )
            attach_status(plan, grid.store)
            todo = {r.run_id: r for r in plan.pending(grid.options.retry_failed) if r.run_id not in self.skip}
            self._by_seeds[seeds] = {
                (cell.spec, cell.key): [todo[c.run_id()] for c in cell.configs if c.run_id() in todo]
                for cell in plan.cells
            }
        return self._by_seeds[seeds]

    def runs(self, cells: Sequence[CellKey], seeds: int) -> list[PlannedRun]:
        """The distinct runs ``cells`` have to do at ``seeds`` seeds."""
        by_cell = self.cells(seeds)
        out: dict[str, PlannedRun] = {}
        for cell in cells:
            out.update((r.run_id, r) for r in by_cell.get(cell, []))
        return list(out.values())


def spent_seconds(store: RunStore, ran: Mapping[str, float]) -> float:
    """The seconds this grid's runs took: each record's wall time, else its estimate."""
    total = 0.0
    for run_id, estimate in ran.items():
        record = store.load(run_id)
        wall = (record or {}).get("wall_time_s")
        total += float(wall) if isinstance(wall, int | float) and wall > 0 else estimate
    return total


@dataclass
class _Round:
    seeds: int
    runs: list[PlannedRun]
    seconds: float
    claims: int


def plan_round(
    decision: Decision, pending: Pending, first: int, max_seeds: int, model: CostModel, room_s: float
) -> _Round | None:
    """The next round: the smallest scheduled seed count (:func:`schedule`) at which the undecided
    claims' cells have runs to do, with the most promising claims whose runs fit ``room_s`` seconds
    (a claim that does not fit is passed over for the next); fewer seeds, down to the scheduled count
    before, where not even one claim fits. None when nothing is left to run or nothing fits."""
    cells = [c for need in decision.needs for c in need.cells]
    steps = schedule(first, max_seeds)
    at = next((i for i, seeds in enumerate(steps) if pending.runs(cells, seeds)), None)
    if at is None:
        return None
    lower = steps[at - 1] if at else 0
    for seeds in range(steps[at], lower, -1):
        chosen: dict[str, PlannedRun] = {}
        seconds = 0.0
        claims = 0
        for need in decision.needs:
            todo = pending.runs(need.cells, seeds)
            runs = [r for r in todo if r.run_id not in chosen]
            cost = sum(model.run_seconds(r.config) for r in runs)
            if not todo or seconds + cost > room_s:
                continue
            claims += 1  # its runs are in the round (some already for a claim sharing a cell)
            seconds += cost
            chosen.update((r.run_id, r) for r in runs)
        if chosen:
            return _Round(seeds, list(chosen.values()), seconds, claims)
    return None


def run_until_decided(grid: PlannedGrid, decide: Decide, sequential: Sequential) -> int:
    """Holding the grid lock, rounds of seeds until every claim is decided, ruled out or short of
    seeds (at the most seeds, or beyond reach of them), or the budget is reached; the exit status
    (0, or 1 when a run failed, 130 interrupted)."""
    store = grid.store
    budget_s = math.inf if sequential.budget_hours is None else sequential.budget_hours * 3600.0
    ran: dict[str, float] = {}
    rounds: list[dict[str, Any]] = []
    failed = 0
    with GridLock.of(store.root, log=print):
        configs = [r.config for r in grid.plan.runs]
        check_cluster(grid, configs)  # the trials' GPUs before the budget is priced: once per grid
        model, _ = cost_model(grid.options, store, configs, grid.trial_gpus)
        share = model.trials_per_gpu
        decision = decide()
        _write_state(store, sequential, rounds, decision)
        while True:
            _print_state(decision, rounds)
            if not decision.needs:
                print("until decided: no claim is left undecided")
                break
            pending = Pending(grid, set(ran))
            room = budget_s * share - spent_seconds(store, ran)
            step = plan_round(decision, pending, grid.options.seeds, sequential.max_seeds, model, room)
            if step is None:
                free = plan_round(
                    decision, pending, grid.options.seeds, sequential.max_seeds, model, math.inf
                )
                why = (
                    "no runs left to do up to --max-seeds"
                    if free is None
                    else (f"the budget ({sequential.budget_hours:g} trial-h: the next round does not fit)")
                )
                print(f"until decided: stopped: {why}")
                decision = decide(stopped=why)  # the claims left have not enough seeds, for this reason
                _write_state(store, sequential, rounds, decision, stopped=why)
                break
            ordered = longest_first_with_estimate(grid, step.runs)
            print(
                f"round {len(rounds) + 1}: seeds up to {step.seeds} for {step.claims} undecided claim(s): "
                f"{len(step.runs)} run(s), {step.seconds / 3600 / share:.2f} trial-h planned, "
                f"{spent_seconds(store, ran) / 3600 / share:.2f} spent"
                + (f" of {sequential.budget_hours:g}" if sequential.budget_hours is not None else "")
            )
            ran.update((c.run_id(), model.run_seconds(c)) for c in ordered)
            outcome = run_pending(grid, step.runs, ordered)
            if isinstance(outcome, int):
                return outcome
            print("\n".join(outcome.summary()))
            failed += len(outcome.failed)
            rounds.append(_round_json(step, outcome, spent_seconds(store, ran) / 3600 / share, share))
            decision = decide()
            _write_state(store, sequential, rounds, decision)
    counts = ", ".join(f"{k} {v}" for k, v in decision.counts.items())
    print(f"until decided: {len(rounds)} round(s), {len(ran)} run(s); claims: {counts}")
    print(f"state: {store.root / SEQUENTIAL_FILE}; claims: harness claims --profile {grid.profile}")
    return 1 if failed else 0


def _round_json(step: _Round, outcome: GridReport, spent_hours: float, share: int) -> dict[str, Any]:
    return {
        "seeds": step.seeds,
        "runs": len(step.runs),
        "claims": step.claims,
        "planned_hours": round(step.seconds / 3600 / share, 4),
        "finished": outcome.finished,
        "failed": len(outcome.failed),
        "spent_hours": round(spent_hours, 4),
    }


def _write_state(
    store: RunStore,
    sequential: Sequential,
    rounds: list[dict[str, Any]],
    decision: Decision,
    stopped: str = "",
) -> None:
    state = {
        "design": dict(sequential.design),
        "rounds": rounds,
        "counts": dict(decision.counts),
        "claims": list(decision.claims),
        **({"stopped": stopped} if stopped else {}),
    }
    write_json(store.root / SEQUENTIAL_FILE, state)


STOP_REASONS = ("the budget", "no runs left")
"""How the reasons a grid stops with claims open begin (a claim's own reason for not enough seeds
begins otherwise: ``has all N seeds``, ``needs N seeds ...``)."""


def stop_reason(state: Mapping[str, Any]) -> str:
    """Why the grid that wrote ``state`` stopped with claims open, or empty: its ``stopped``; in a
    state written before that key, the reason its claims left open carry."""
    if isinstance(state.get("stopped"), str):
        return str(state["stopped"])
    for claim in state.get("claims") or []:
        detail = claim.get("detail") if isinstance(claim, Mapping) else None
        if isinstance(detail, str) and detail.startswith(STOP_REASONS):
            return detail
    return ""


def _print_state(decision: Decision, rounds: list[dict[str, Any]]) -> None:
    when = "before the first round" if not rounds else f"after round {len(rounds)}"
    counts = ", ".join(f"{k} {v}" for k, v in decision.counts.items())
    print(f"claims {when}: {counts}")
    for line in decision.lines:
        print(f"  {line}")


def dry_run_until_decided(grid: PlannedGrid, decide: Decide, sequential: Sequential) -> int:
    """What ``--until-decided`` would do: the claims' states, the first round, and the cost of the
    undecided claims' cells up to their expected seeds and up to ``max_seeds`` (capped by the budget)."""
    model, slots = cost_model(grid.options, grid.store, [r.config for r in grid.plan.runs])
    share = model.trials_per_gpu
    unit = "GPU" if model.device == "cuda" else "CPU-trial"
    decision = decide()
    _print_state(decision, [])
    pending = Pending(grid, set())
    step = plan_round(decision, pending, grid.options.seeds, sequential.max_seeds, model, math.inf)
    if step is None:
        print("until decided: nothing to run")
        return 0
    print(
        f"first round: seeds up to {step.seeds} for {step.claims} undecided claim(s): {len(step.runs)} "
        f"run(s), {step.seconds / 3600 / share:.2f} {unit}-h"
    )
    for label, to_needed in (("expected", True), ("at most", False)):
        runs: dict[str, RunConfig] = {}
        for need in decision.needs:
            seeds = sequential.max_seeds
            if to_needed and need.seeds_needed is not None:
                seeds = max(step.seeds, min(sequential.max_seeds, need.seeds_needed))
            runs.update((r.run_id, r.config) for r in pending.runs(need.cells, seeds))
        seconds = [model.run_seconds(c) for c in runs.values()]
        total = sum(seconds) / 3600 / share
        capped = ""
        if sequential.budget_hours is not None and total > sequential.budget_hours:
            capped = f"; the budget stops it at {sequential.budget_hours:g} {unit}-h"
        what = (
            "each undecided claim to the seeds it needs for 80% power at its effect"
            if to_needed
            else f"every undecided claim to {sequential.max_seeds} seeds"
        )
        print(
            f"{label}: {what}: {len(seconds)} run(s), {total:.2f} {unit}-h, about "
            f"{hours(makespan(seconds, slots))} on {slots} slot(s){capped}"
        )
    return 0


__all__ = [
    "FIRST_SEEDS",
    "SEQUENTIAL_FILE",
    "Sequential",
    "check_sequential",
    "dry_run_until_decided",
    "next_seeds",
    "read_sequential",
    "run_until_decided",
    "schedule",
    "stop_reason",
]
