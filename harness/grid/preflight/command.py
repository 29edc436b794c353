"""``harness check``: a pre-flight check of everything a grid needs, in seconds, before the night.

For the runs that ``harness grid SPEC... --profile P`` would plan: the data root, every SentEval file
the runs' dev evaluation and final tasks read (read with the runs' own readers: every malformed line,
gold score that is not a finite number or lies outside the task's range, or gold file that does not pair
up with its input is listed as ``file:line``), the corpora (read and validated as training reads
them), the encoders (packaged, random, a local folder, or a hub name found in the local Hugging Face
cache: never downloaded, never waited on when offline) with their hidden sizes, the runs folder
(writable, not held by another grid), free disk, GPUs, and with an address the Ray cluster and every
alive node of it (:mod:`harness.grid.preflight.cluster`). Every problem goes into one list; the exit status
is 1 when there is any, else 0.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.atomic import check_output_dir
from harness.config.inputs import check_spec_paths
from harness.config.paths import resolve_data_root
from harness.config.profiles import PROFILES
from harness.config.settings import steps_per_epoch
from harness.errors import HarnessError
from harness.grid.launch import distrust_scoreless
from harness.grid.lock import GridLock
from harness.grid.options import GridOptions, check_options
from harness.grid.plan.status import attach_status
from harness.grid.preflight.cluster import NodeNeeds, check_ray
from harness.grid.preflight.machine import (
    Report,
    check_data,
    check_disk,
    check_gpus,
    check_model,
    longest_lengths,
    runs_folder_problems,
    trial_arithmetic_problems,
)
from harness.run.data import read_corpus
from harness.specs.cells import expand
from harness.specs.find import load_plot_specs, load_table_specs
from harness.store.run_store import RunStore


def run_preflight(options: GridOptions) -> int:
    """Plan the grid as ``harness grid`` would, check what its runs need, print one list; the exit
    status (1 when there is a problem, else 0)."""
    check_options(options)  # as grid does: seeds, threads, HARNESS_*
    check_spec_paths(list(options.specs))
    specs = load_table_specs(options.specs)  # a bad spec is one error line (exit 2), as for grid
    report = Report()
    profile = options.resolved_profile
    data_root = _data_root(options.data_dir, report)
    print(f"harness check: {', '.join(s.name for s in specs)} under profile {profile}")
    plan = _plan(options, specs, profile, dict(options.overrides), data_root, report)
    store = RunStore(options.runs_dir)
    configs: list[Any] = []
    if plan is not None:
        configs = _check_plan(plan, store, data_root, report)
    _check_runs_folder(store, report)
    storage = None if options.cluster.remote_storage() else options.cluster.storage_folder(store.root)
    pending_ids = [c.run_id() for c in configs if hasattr(c, "run_id")]
    for problem in runs_folder_problems(
        store.root, pending_ids, storage=storage, save_model=options.save_model
    ):
        report.problem(problem)
    check_disk(Path(options.runs_dir), report)
    check_gpus(options.cluster, report)
    for problem in trial_arithmetic_problems(configs, options.cluster, options.compile):
        report.problem(problem)
    if options.cluster.address:
        needs = NodeNeeds.of(data_root, configs)
        check_ray(options.cluster, report, needs)
    return _print_report(report)


def _data_root(data_dir: str | None, report: Report) -> Path | None:
    try:
        data_root = resolve_data_root(data_dir)
    except HarnessError as exc:
        report.problem(str(exc))
        return None
    report.ok(f"data root {data_root}")
    return data_root


def _plan(
    options: GridOptions,
    specs: list[Any],
    profile: str,
    overrides: dict[str, Any],
    data_root: Path | None,
    report: Report,
) -> Any:
    """The grid's plan (corpus not required); when it cannot be made, a problem, the profile's own
    inputs checked, and None."""

    extra = []
    if "all" in options.specs:
        extra = [(p.name, s.label, s.run) for p in load_plot_specs() for s in p.series]
    try:
        return expand(
            specs,
            profile,
            seeds=options.seeds,
            overrides=overrides,
            data_root=data_root,
            extra=extra,
            require_corpus=False,  # a missing corpus is reported below, and the runs still planned
        )
    except HarnessError as exc:
        report.problem(f"planning the runs: {exc}")
        _check_profile_inputs(profile, overrides, data_root, report, read_corpus)
        return None


def _check_plan(plan: Any, store: Any, data_root: Path | None, report: Report) -> list[Any]:
    """The plan's state in the store, its unresolved cells, and the data and models its runs use;
    returns the configs it checked (what every node of a cluster must also have)."""

    attach_status(plan, store)
    for line in distrust_scoreless(plan, store):
        report.note(line.removeprefix("warning: "))
    counts = plan.counts()
    pending = plan.pending(True)
    na = sum(1 for c in plan.cells if c.state == "n/a")
    report.ok(
        f"planned: {len(plan.runs)} distinct run(s): {counts['finished']} finished, {len(pending)} to "
        f"run ({counts['missing']} new, {counts['running']} interrupted, {counts['failed']} failed); "
        f"{na} n/a cell(s)"
    )
    for cell in plan.cells:
        if cell.state == "unresolved":
            report.problem(f"{cell.spec}: {cell.key}: {cell.reason}")
    # no planned runs (e.g. every cell's encoder unresolved): still check the profile's inputs
    configs = [r.config for r in pending] or [r.config for r in plan.runs] or [plan.settings]
    if data_root is not None:
        sizes = check_data(data_root, configs, report, read_corpus)
        if pending:
            _estimate(pending, sizes, report)
    for model, length in sorted(longest_lengths(configs).items()):
        check_model(model, report, length)
    return list(configs)


def _print_report(report: Report) -> int:
    """Print the report; 1 when it holds a problem, else 0."""
    print("\n".join(report.lines))
    if report.problems:
        print(f"{len(report.problems)} problem(s): fix them before starting the grid")
        return 1
    print("everything the grid needs is here")
    return 0


def _check_profile_inputs(
    profile: str, overrides: dict[str, Any], data_root: Path | None, report: Report, read_corpus: Any
) -> None:
    """When the runs cannot be planned (e.g. the corpus is missing), still check what the profile uses."""

    settings = {**PROFILES.get(profile, {}), **overrides}
    corpus = Path(str(settings.get("corpus", "corpus/nli-sentences.txt")))
    if data_root is not None and not corpus.is_absolute():
        corpus = data_root / corpus
    config = SimpleNamespace(
        corpus=corpus,
        batch_size=int(settings.get("batch_size", 1)),
        final_tasks=str(settings.get("final_tasks", "sts")),
        model=str(settings.get("model", "minilm")),
    )
    if data_root is not None:
        check_data(data_root, [config], report, read_corpus)
    try:
        length: int | None = int(settings.get("max_length"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        length = None  # a bad value: the settings' own check says so
    check_model(config.model, report, length)


def _estimate(pending: list[Any], sizes: dict[str, int], report: Report) -> None:
    """The work the pending runs are: optimiser steps and dev evaluations, in all and per model."""
    per_model: dict[str, list[int]] = {}
    for run in pending:
        c = run.config
        if c.max_steps is not None:
            steps = int(c.max_steps)
        elif str(c.corpus) in sizes:
            steps = steps_per_epoch(sizes[str(c.corpus)], int(c.batch_size))
        else:
            continue  # unreadable corpus: already a problem
        dev_evals = 1 + (steps // int(c.eval_every) if c.eval_every else 0)
        totals = per_model.setdefault(str(c.model), [0, 0, 0])
        totals[0] += 1
        totals[1] += steps
        totals[2] += dev_evals
    for model, (runs, steps, dev_evals) in sorted(per_model.items()):
        report.ok(
            f"cost on {model}: {runs} run(s), {steps} optimiser step(s) and {dev_evals} "
            "STS-B dev evaluation(s) in all, plus each run's final tasks"
        )


def _check_runs_folder(store: Any, report: Report) -> None:
    """Writable (proved with a temporary file; a folder created for that is removed) and not locked."""

    root = Path(store.root)
    created = [p for p in (root, *root.parents) if not p.exists()]
    try:
        check_output_dir(root, "runs folder")
    except HarnessError as exc:
        report.problem(str(exc))
        return
    finally:
        for folder in created:  # innermost first: a check leaves nothing behind
            with contextlib.suppress(OSError):
                folder.rmdir()
    lock = GridLock.of(store.root)
    if lock.path.exists() and not lock.path.is_file():
        report.problem(f"the grid lock {lock.path} is a folder, not a file: remove it")
        return
    if lock.is_held():
        report.problem(f"runs folder {root} is in use by {lock.describe()}")
        return
    if lock.holder():
        report.note(f"a stale grid lock ({lock.describe()}) will be taken over by the grid")
    report.ok(f"runs folder {root}: writable, no grid running on it")
