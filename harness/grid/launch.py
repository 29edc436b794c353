"""A grid from plan to records: the plan, the pending runs, their order and estimate, the trials.

:func:`plan_grid` loads the specs and expands them under the profile; :func:`run_grid` takes the
grid lock, checks the pending runs' inputs (corpora and every SentEval file, read with the runs' own
readers, so a bad line stops the grid before Ray starts), orders them longest first with an estimate
and runs them through Ray Tune (:mod:`harness.grid.tune`, imported only then); :func:`dry_run`
prints the plan and its cost instead.

Runs are deduplicated across specs and skipped when a finished record exists, so a grid killed and
started again finishes the remaining runs without redoing finished ones. Runs left ``running`` by a
kill or ``interrupted`` by Ctrl-C are run again; ``failed`` ones too unless ``retry_failed`` is off. A
record that says finished but lacks its final scores is reported and run again.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.atomic import check_output_dir
from harness.config.inputs import check_spec_paths, is_regular_file
from harness.config.models import check_model_inputs
from harness.config.paths import resolve_data_root, senteval_dir
from harness.errors import ConfigError, DataError, HarnessError
from harness.evaluation.preread import data_problems
from harness.grid.cleanup import remove_stale_temp_dirs
from harness.grid.lock import GridLock
from harness.grid.options import ClusterOptions, GridOptions, GridRequest, check_options, decide_trial_gpus
from harness.grid.plan.calibrate_here import MIN_GRID_S, calibrate, uncalibrated
from harness.grid.plan.calibration_files import CALIBRATION_DIR, load_calibrations
from harness.grid.plan.cost import CostModel
from harness.grid.plan.estimate import estimate_lines, hours, longest_first, makespan, scratch_line
from harness.grid.plan.status import attach_status, claims_only, complete_for, describe
from harness.grid.preflight.machine import (
    Report,
    corpus_fit_problems,
    longest_lengths,
    runs_folder_problems,
    trial_arithmetic_problems,
)
from harness.grid.progress.tracking import Tracking
from harness.grid.signals import sigterm_as_interrupt
from harness.run.data import read_corpus
from harness.run.footprint import FootprintCache
from harness.specs.cells import GridPlan, PlannedRun, expand
from harness.specs.find import load_plot_specs, load_table_specs
from harness.specs.model import TableSpec
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore, missing_scores

if TYPE_CHECKING:  # the progress reporter imports the run's evaluation (transformers): not for a dry run
    from harness.grid.progress.report import GridReport


@dataclass
class PlannedGrid:
    """What a grid planned: its options, the specs, the expanded runs, the store and the data root;
    once :func:`check_cluster` ran, the GPUs each trial gets and whether the address was checked."""

    options: GridOptions
    specs: list[TableSpec]
    plan: GridPlan
    store: RunStore
    data_root: Path
    trial_gpus: float | None = None
    address_checked: bool = False

    @property
    def profile(self) -> str:
        return self.options.resolved_profile


def plan_grid(options: GridOptions) -> PlannedGrid:
    """Load the specs and expand them under the profile (with ``claims_only``, what claims read)."""
    check_options(options)
    check_spec_paths(list(options.specs))
    specs = load_table_specs(options.specs)
    extra = []
    if "all" in options.specs:
        extra = [(p.name, s.label, s.run) for p in load_plot_specs() for s in p.series]
    data_root = resolve_data_root(options.data_dir)
    plan = expand(  # seeds checked above (check_options)
        specs,
        options.resolved_profile,
        seeds=options.seeds,
        overrides=options.overrides,
        data_root=data_root,
        extra=extra,
        require_corpus=not options.dry_run,
    )
    if options.claims_only:
        plan, left_out = claims_only(plan, specs)
        print(
            f"claims only: {len(plan.runs)} run(s) that the claims compare; {len(left_out)} run(s) that no "
            "claim reads are left out (their table cells show -- until a grid without --claims-only)"
        )
    missing = sorted({r.config.corpus for r in plan.runs if r.config.corpus_id.endswith(":missing")})
    for corpus in missing:
        print(
            f"warning: corpus {corpus} not found: run ids below are provisional (its content enters the id)"
        )
    return PlannedGrid(options, specs, plan, RunStore(options.runs_dir), data_root)


def dry_run(grid: PlannedGrid) -> int:
    """The runs, which are done, and what the rest would cost; nothing runs. What stands where the
    runs would write (:func:`check_runs_folder`) stops it as it would stop the grid."""
    plan, store = grid.plan, grid.store
    attach_status(plan, store)
    retry = grid.options.retry_failed
    todo = plan.pending(retry)
    check_runs_folder(grid, todo)  # what the grid would stop on (records/ a file, ...), said here too
    for line in distrust_scoreless(plan, store):
        print(line)
    print("\n".join(describe(plan, retry_failed=retry)))
    model, slots = cost_model(grid.options, store, [r.config for r in plan.runs])  # corpus sizes of all
    print("\n".join(estimate_lines([(r.config, r.used_by) for r in todo], model, local_slots=slots)))
    if plan.counts()["finished"]:
        print(scratch_line([r.config for r in plan.runs], model, slots))
    if model.footprints is not None:
        model.footprints.save()
    return 0


def run_grid(grid: PlannedGrid) -> int:
    """Holding the grid lock: the pending runs, checked and ordered, through Ray Tune; the exit status
    (0 all finished, 1 some failed or Ray Tune stopped, 130 interrupted)."""
    check_output_dir(grid.store.root, "runs folder")
    with GridLock.of(grid.store.root, log=print):
        pending = pending_runs(grid)
        if not pending:
            return 0
        ordered = longest_first_with_estimate(grid, pending)
        outcome = run_pending(grid, pending, ordered)
    if isinstance(outcome, int):
        return outcome
    print("\n".join(outcome.summary()))
    print(f"records: {grid.store.records_dir}; tables: harness tables --profile {grid.profile}")
    return 0 if not outcome.failed else 1


def pending_runs(grid: PlannedGrid) -> list[PlannedRun]:
    """Under the lock: the store's status of every planned run, warnings, and the runs to do."""
    for folder in remove_stale_temp_dirs():
        print(f"note: removed {folder} (Ray session files of a grid that was killed)")
    plan, store = grid.plan, grid.store
    attach_status(plan, store)
    for line in distrust_scoreless(plan, store):
        print(line)
    for cell in plan.cells:
        if cell.state == "unresolved":
            print(f"warning: {cell.spec}: {cell.key}: not run: {cell.reason}")
    pending = plan.pending(grid.options.retry_failed)
    counts = plan.counts()
    print(
        f"grid {', '.join(s.name for s in grid.specs)} under profile {grid.profile}: {len(plan.runs)} "
        f"distinct runs, {counts['finished']} already finished, {len(pending)} to run"
    )
    return pending


def longest_first_with_estimate(grid: PlannedGrid, pending: list[PlannedRun]) -> list[RunConfig]:
    """Check the pending runs' corpora and data files, then order them longest first and print the
    estimate."""
    configs = [r.config for r in pending]
    check_models(configs)
    arithmetic = trial_arithmetic_problems(configs, grid.options.cluster, grid.options.compile)
    if arithmetic:
        raise ConfigError(f"{arithmetic[0]}: nothing was run")
    check_corpora(configs)
    check_data_files(grid.data_root, configs)
    check_runs_folder(grid, pending)
    check_cluster(grid, configs)
    model, slots = cost_model(grid.options, grid.store, configs, grid.trial_gpus)
    todo = uncalibrated(configs, model)
    if todo and sum(model.run_seconds(c) for c in configs) / slots > MIN_GRID_S:
        calibrate(todo, grid.store.root, grid.data_root, slots)
        model, slots = cost_model(grid.options, grid.store, configs, grid.trial_gpus)
    ordered = longest_first(configs, model)
    if model.footprints is not None:
        model.footprints.save()
    seconds = [model.run_seconds(c) for c in ordered]
    print(
        f"estimated: {sum(seconds) / 3600:.2f} trial-hours, about {hours(makespan(seconds, slots))} on "
        f"{slots} slot(s); runs start longest first ({model.source(ordered[0])})"
    )
    return ordered


def run_pending(grid: PlannedGrid, pending: list[PlannedRun], ordered: list[RunConfig]) -> GridReport | int:
    """Run the ordered configs through Ray Tune (SIGTERM stops them as Ctrl-C does).

    Returns the grid report, or the exit status when the grid was interrupted (130) or Ray Tune
    stopped it (1).
    """
    from harness.grid.progress.report import GridInterrupted, GridStopped
    from harness.grid.tune.driver import run_trials  # Ray is imported here, not for a dry run

    options, store = grid.options, grid.store
    model, _ = cost_model(options, store, ordered, grid.trial_gpus)
    request = GridRequest(
        cluster=options.cluster,
        save_model=options.save_model,
        name=grid_name(grid.specs),
        estimates={c.run_id(): model.run_seconds(c) for c in ordered},
        steps_shares=steps_shares(model, ordered),
        tracking=Tracking(tuple(dict.fromkeys(options.track)), store.root, options.tracking_uri),
        compile=options.compile,
        trial_gpus=grid.trial_gpus,
        address_checked=grid.address_checked,
        checkpoint_every_s=options.checkpoint_every_s,
    )
    with sigterm_as_interrupt():
        try:
            return run_trials(ordered, grid.data_root, store, request)
        except GridInterrupted as exc:
            finished = sum(1 for r in pending if complete_for(store.load(r.run_id), r.config.final_tasks))
            print(
                f"grid interrupted: {finished} of {len(pending)} pending run(s) finished, "
                f"{len(exc.report.interrupted)} interrupted (marked so; the next grid runs them again)",
                file=sys.stderr,
            )
            return 130
        except GridStopped as exc:
            finished = sum(1 for r in pending if complete_for(store.load(r.run_id), r.config.final_tasks))
            print(f"harness grid: error: {exc}", file=sys.stderr)
            print(f"{finished} of {len(pending)} pending run(s) finished before it stopped", file=sys.stderr)
            return 1


def steps_shares(model: CostModel, configs: Sequence[RunConfig]) -> dict[str, float]:
    """The share of each run's estimate that its steps and dev evaluations take (the rest: final tasks)."""
    shares = {}
    for config in configs:
        training = model.run_seconds(dataclasses.replace(config, final_tasks="none", post_whiten="none"))
        shares[config.run_id()] = training / max(model.run_seconds(config), 1e-9)
    return shares


def grid_name(specs: Sequence[TableSpec]) -> str:
    """The grid's name in Ray Tune's folder: its specs' names (the first two, then how many more)."""
    names = [s.name for s in specs]
    return "+".join(names[:2]) + (f"+{len(names) - 2}more" if len(names) > 2 else "")


def gpus_here(cluster: ClusterOptions) -> int:
    """This machine's CUDA GPUs where the trials run on it (a local Ray, not the smoke one), else 0."""
    import torch

    return torch.cuda.device_count() if cluster.address is None and not cluster.smoke else 0


def cost_model(
    options: GridOptions, store: RunStore, configs: Sequence[RunConfig], trial_gpus: float | None = None
) -> tuple[CostModel, int]:
    """The grid's cost model (calibrated on the store's finished records) and its parallel slots.

    Trials run on GPUs when ``trial_gpus`` (as :func:`check_cluster` decided them) > 0; None (a dry
    run, which contacts no cluster): by the same rule on this machine's GPUs, so without
    ``--gpus-per-trial`` a dry run with ``--address`` plans CPU trials. The slots are GPUs / GPUs per
    trial, else CPUs / CPUs per trial.
    """
    import torch

    cluster = options.cluster
    local_gpus = gpus_here(cluster)
    gpus = decide_trial_gpus(cluster, local_gpus) if trial_gpus is None else trial_gpus
    on_gpu = gpus > 0
    if on_gpu:
        slots = max(1, int(max(local_gpus, 1) / gpus))
    else:
        slots = max(1, (os.cpu_count() or 1) // cluster.cpus)
    sizes: dict[str, int] = {}
    for config in configs:
        if config.max_steps is None and config.corpus not in sizes and is_regular_file(config.corpus):
            try:
                with open(config.corpus, "rb") as handle:
                    sizes[config.corpus] = sum(1 for _ in handle)
            except OSError:
                pass  # not here (planning only): the estimate assumes 1M sentences
    sharing = max(1, round(1.0 / gpus)) if on_gpu else 1
    device = "cuda" if on_gpu else "cpu"
    calibrations = load_calibrations(store.root)
    model = CostModel(
        store.records(),
        device,
        sizes,
        sharing,
        calibrations=calibrations,
        footprints=FootprintCache(store.root),
        device_name=torch.cuda.get_device_name(0) if on_gpu and local_gpus else None,
        calibration_dir=str(store.root / CALIBRATION_DIR),
    )
    return model, slots


def distrust_scoreless(plan: GridPlan, store: RunStore) -> list[str]:
    """Runs whose record says finished without the final scores it should hold are run again.

    Returns one warning line per such run (their planned state becomes ``running``, i.e. pending
    whatever ``retry_failed`` says).
    """
    lines = []
    for run in plan.runs:
        if run.state != "finished":
            continue
        record = store.load(run.run_id)
        problem = missing_scores(record) if record is not None else None
        if problem:
            run.state = "running"
            lines.append(f"warning: {run.run_id}: {problem}; it runs again")
    return lines


def check_corpora(configs: Sequence[RunConfig]) -> None:
    """Read every distinct corpus the runs use (before Ray starts), so a bad one fails at once, and
    what the runs ask of it (:func:`~harness.grid.preflight.machine.corpus_fit_problems`)."""
    need: dict[str, int] = {}
    for config in configs:
        need[str(config.corpus)] = max(need.get(str(config.corpus), 0), int(config.batch_size))
    sizes = {corpus: len(read_corpus(Path(corpus), min_sentences=batch)) for corpus, batch in need.items()}
    problems = corpus_fit_problems(configs, sizes)
    if problems:
        raise ConfigError(f"{problems[0]}: nothing was run")


def check_models(configs: Sequence[RunConfig]) -> None:
    """Each encoder the runs use: a local folder checked like data (config, tokenizer files against
    the vocabulary) and the longest ``max_length`` asked of it within its positions, before Ray starts.

    Raises:
        HarnessError: the first problem (:func:`~harness.config.models.check_model_inputs`).
    """
    for model, length in longest_lengths(configs).items():
        check_model_inputs(model, length)


def check_cluster(grid: PlannedGrid, configs: Sequence[RunConfig]) -> None:
    """Once per grid, before its first estimate: where the trials run and the GPUs each gets
    (:attr:`PlannedGrid.trial_gpus`, the one value the cost model and the driver use): on a cluster
    (``--address``) its nodes checked (:func:`check_nodes`, the one check of the address: the
    driver trusts it) and its GPUs; else this machine's.

    Raises:
        DataError: a problem on the cluster (see :func:`check_nodes`).
    """
    if grid.trial_gpus is not None:
        return
    cluster = grid.options.cluster
    if cluster.address is None:
        grid.trial_gpus = decide_trial_gpus(cluster, gpus_here(cluster))
        return
    resources = check_nodes(grid, configs)
    grid.address_checked = True
    grid.trial_gpus = decide_trial_gpus(cluster, float(resources.get("GPU", 0)))


def check_nodes(grid: PlannedGrid, configs: Sequence[RunConfig]) -> dict[str, float]:
    """On a cluster (``--address``): every alive node checked as ``harness check --address`` does
    (:func:`~harness.grid.preflight.cluster.check_ray`: the address, each trial's request against the
    nodes, the data files and encoders the runs read, read on that node), before any trial starts;
    each problem is printed with its node. Returns the cluster's resources.

    Raises:
        DataError: after printing the problems, so no run trains fully to fail at its end.
    """
    from harness.grid.preflight.cluster import NodeNeeds, check_ray

    report = Report()
    needs = NodeNeeds.of(grid.data_root, configs)
    resources = check_ray(grid.options.cluster, report, needs)
    if len(report.problems) == 1:
        raise DataError(f"{report.problems[0]}: nothing was run")
    if report.problems:
        for text in report.problems:
            print(f"harness grid: cluster problem: {text}", file=sys.stderr)
        raise DataError(
            f"{len(report.problems)} problem(s) on the cluster's nodes above: nothing was run "
            "(`harness check --address` lists them too)"
        )
    print("cluster: every alive node has the data files and encoders the runs read")
    return resources or {}


def check_runs_folder(grid: PlannedGrid, pending: Sequence[PlannedRun]) -> None:
    """What the runs will write under the runs folder and Tune's storage (:func:`runs_folder_problems`),
    before Ray starts: a file where a folder goes fails the grid now, not a finished run later.

    Raises:
        HarnessError: the first problem (and how many more; ``harness check`` lists them all).
    """
    cluster = grid.options.cluster
    storage = None if cluster.remote_storage() else cluster.storage_folder(grid.store.root)
    problems = runs_folder_problems(
        grid.store.root, [r.run_id for r in pending], storage=storage, save_model=grid.options.save_model
    )
    if problems:
        more = f" (and {len(problems) - 1} more: `harness check` lists them)" if len(problems) > 1 else ""
        raise HarnessError(f"{problems[0]}{more}; nothing was run")


def check_data_files(data_root: Path, configs: Sequence[RunConfig]) -> None:
    """Read every SentEval file the runs will read (before Ray starts), so a bad line fails the grid
    at once instead of every run at its final evaluation.

    Raises:
        DataError: after printing each problem (``file:line``) on stderr.
    """
    _, problems = data_problems(senteval_dir(data_root), {str(c.final_tasks) for c in configs})
    if problems:
        for text in problems:
            print(f"harness grid: data problem: {text}", file=sys.stderr)
        raise DataError(
            f"{len(problems)} data file problem(s) above: nothing was run (`harness check` lists them too)"
        )
