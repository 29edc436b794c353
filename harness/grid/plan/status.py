"""A grid's plan against a store: which planned runs are done, the claims-only cut, the dry-run listing.

The plan itself (cells, their runs, seeds) is :mod:`harness.specs.cells`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.specs.cells import GridPlan, PlannedRun
from harness.store.record import covers_registered_tasks
from harness.store.run_store import missing_scores

if TYPE_CHECKING:
    from harness.specs.model import TableSpec
    from harness.store.run_store import RunStore


def claims_only(plan: GridPlan, specs: Sequence[TableSpec]) -> tuple[GridPlan, list[PlannedRun]]:
    """The plan cut to the runs some claim of ``specs`` reads (``harness grid --claims-only``).

    A run stays when one of the cells that use it is the ``better`` or ``worse`` cell of a claim;
    it keeps every use and the final tasks the whole plan gave it (its tables still read it). The
    runs left out (rows no claim compares, such as baselines quoted for context or sweep values
    between the claimed ones) render as missing in the tables until a full grid runs them.

    Returns:
        ``(plan, left_out)``: a plan with the claimed runs only, and the runs it dropped.
    """
    claimed = {(spec.name, key) for spec in specs for c in spec.claims for key in (c.better, c.worse)}
    kept: list[PlannedRun] = []
    left_out: list[PlannedRun] = []
    for run in plan.runs:
        uses = {tuple(u.split(": ", 1)) for u in run.used_by}
        (kept if uses & claimed else left_out).append(run)
    return dataclasses.replace(plan, runs=kept), left_out


def attach_status(plan: GridPlan, store: RunStore) -> GridPlan:
    """Mark each planned run with the status of its record in ``store`` (``missing`` if none).

    A finished record is also judged by what THIS plan needs (``final_tasks`` is not in the run id):
    a record scored on STS only is ``missing`` for a run a transfer table uses. (A record missing
    scores its own config asked for is left ``finished`` here; ``harness grid`` reports and re-runs
    it.)
    """

    records = {str(r.get("run_id")): r for r in store.records()}
    for run in plan.runs:
        record = records.get(run.run_id)
        status = record.get("status") if record is not None else None
        run.state = status if status in ("finished", "running", "failed") else "missing"
        # complete for what it was asked; run again only if this plan asks for more
        asked = record is not None and run.state == "finished" and missing_scores(record) is None
        if asked and not complete_for(record, run.config.final_tasks):
            run.state = "missing"
    return plan


def complete_for(record: Mapping[str, Any] | None, final_tasks: str) -> bool:
    """Whether ``record`` is finished with every final score ``final_tasks`` needs, over the tasks
    registered now (a run scored on STS only is not complete for a plan whose transfer table uses
    the same run id; a run whose STS average covers other tasks than the registry's is not complete
    either: ``final_tasks`` is not in the run id, and its numbers would not share a cell)."""

    if record is None or record.get("status") != "finished":
        return False
    wanted = {**record, "config": {**(record.get("config") or {}), "final_tasks": final_tasks}}
    groups = {"sts": ("sts",), "transfer": ("transfer",), "all": ("sts", "transfer")}.get(final_tasks, ())
    return missing_scores(dict(wanted)) is None and all(covers_registered_tasks(record, g) for g in groups)


def describe(plan: GridPlan, *, retry_failed: bool = True) -> list[str]:
    """Human-readable lines listing every run and whether it is done (for ``--dry-run``)."""
    lines = [
        f"profile {plan.profile}, seeds {', '.join(map(str, plan.seeds))}: {len(plan.runs)} distinct runs"
    ]
    for run in plan.runs:
        c = run.config
        todo = run.state != "finished" and (retry_failed or run.state != "failed")
        mark = "todo" if todo else ("done" if run.state == "finished" else "skip")
        params = ", ".join(f"{k}={v}" for k, v in sorted(c.params.to_dict().items()))
        settings = (
            f"model={c.model} max_steps={c.max_steps} eval_pooler={c.eval_pooler} final={c.final_tasks}"
        )
        if c.post_whiten != "none":
            settings += f" post_whiten={c.post_whiten}"
        lines.append(f"  [{mark}] {run.run_id} ({run.state}) {c.method}({params}) {settings} seed={c.seed}")
        lines.extend(f"         used by {u}" for u in run.used_by)
    for cell in plan.cells:
        if cell.state == "run":
            continue
        what = {"n/a": f"n/a (d={cell.hidden_size})", "profile": "not run"}.get(cell.state, cell.state)
        lines.append(f"  [{what}] {cell.spec}: {cell.key}: {cell.reason}")
    counts = plan.counts()
    lines.append(
        f"{counts['finished']} finished, {len(plan.pending(retry_failed))} to run "
        f"({counts['missing']} new, {counts['running']} interrupted, {counts['failed']} failed"
        f"{'' if retry_failed else ', failed ones skipped'})"
    )
    return lines
