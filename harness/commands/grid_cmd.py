"""``harness grid``: expand table specs under a profile and run the missing runs through Ray Tune.

Before Ray starts, the pending runs' corpora and every SentEval file they will read are read with the
runs' own readers: a bad line stops the grid at once, naming its file and line.

Runs are deduplicated across specs and skipped when a finished record exists, so the command can be
killed and started again: it finishes the remaining runs without redoing finished ones. Runs left
``running`` by a kill or ``interrupted`` by Ctrl-C are run again; ``failed`` ones are retried too
unless ``--skip-failed``. A record that says finished but has no final scores is reported and run
again.

One grid at a time per runs folder: the grid holds ``<runs>/grid.lock`` (pid, host, start time)
while it trains; a second grid is refused with a message naming the holder, and a lock left by a
killed grid on this host is taken over with a note. Ctrl-C stops the trials, marks the runs they
left as ``interrupted``, prints what was done and exits with status 130; SIGTERM (``kill PID``) does the
same.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands.common import (
    add_data_dir,
    add_override_arguments,
    check_finite_overrides,
    check_spec_paths,
    overrides_from_args,
    profile_help,
)
from harness.tracking import TRACKERS, Tracking, check_trackers

if TYPE_CHECKING:
    from harness.grid import GridPlan, PlannedRun
    from harness.progress import GridReport
    from harness.specs import TableSpec
    from harness.store import RunStore

HELP = "run the grid of runs that table specs need (Ray Tune; skips finished runs)"


def add_common_report_arguments(parser: argparse.ArgumentParser) -> None:
    """--profile, --runs-dir, --data-dir (grid, tables and plots)."""
    parser.add_argument("--profile", default=None, help=profile_help())
    parser.add_argument("--runs-dir", default="runs", help="run store folder (default ./runs)")
    add_data_dir(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "specs",
        nargs="+",
        metavar="SPEC",
        help="table spec: a path, a name in tables/ (e.g. whitenedcse_table3), or 'all' (plots' runs too)",
    )
    add_common_report_arguments(parser)
    parser.add_argument(
        "--seeds", type=int, default=1, help="seeds per run, from the profile's seed (default 1)"
    )
    add_cluster_arguments(parser)
    parser.add_argument(
        "--save-model",
        action="store_true",
        help="keep each run's best checkpoint under RUNS/checkpoints/ (for `harness export`)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list the runs and which are done; run nothing"
    )
    parser.add_argument(
        "--skip-failed", action="store_true", help="do not retry runs whose record says failed"
    )
    parser.add_argument(
        "--claims-only",
        action="store_true",
        help="run only what the specs' claims compare (the replication grid); rows no claim reads "
        "are left out and show as -- in the tables",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="small local Ray without GPUs; profile smoke unless --profile is given",
    )
    parser.add_argument(
        "--track",
        action="append",
        choices=sorted(TRACKERS),
        default=[],
        help="also track every run's curves in MLflow (local store RUNS/mlflow.db unless --tracking-uri) "
        "or Weights & Biases (offline unless WANDB_API_KEY is set); repeatable. Ray Tune's TensorBoard "
        "files are always kept under RUNS/tune/",
    )
    parser.add_argument("--tracking-uri", default=None, help="MLflow tracking URI for --track mlflow")
    add_override_arguments(parser)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the trials run: the Ray cluster, each trial's resources, Tune's storage and retries."""
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start Ray locally)")
    parser.add_argument(
        "--gpus-per-trial",
        type=float,
        default=None,
        help="GPUs per trial, fractions allowed (default 1 if any)",
    )
    parser.add_argument("--cpus-per-trial", type=int, default=1, help="CPUs (and torch threads) per trial")
    parser.add_argument(
        "--trial-resources",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a custom Ray resource every trial asks for (repeatable), e.g. worker_node=1 to run trials "
        "only on the nodes started with --resources '{\"worker_node\": 1}'",
    )
    parser.add_argument(
        "--storage",
        default=None,
        help="Ray Tune's storage for curves, resume checkpoints and --save-model weights: a folder every "
        "node reaches, or a URI (s3://bucket/path, gs://...); default RUNS/tune (this machine only)",
    )
    parser.add_argument(
        "--max-failures",
        type=int,
        default=0,
        help="retries of a failed trial (a lost node): it resumes from its last checkpoint (default 0)",
    )


@dataclass
class PlannedGrid:
    """What ``harness grid`` planned: the specs, the profile, the expanded runs, store and data."""

    specs: list[TableSpec]
    profile: str
    plan: GridPlan
    store: RunStore
    data_root: Path
    retry: bool  # failed runs are run again (no --skip-failed)


def run(args: argparse.Namespace) -> int:
    """Plan, then either describe the plan (``--dry-run``) or, holding the grid lock, run it."""
    from harness.commands.common import check_writable_dir

    check_trackers(args.track)
    grid = plan_grid(args)
    if args.dry_run:
        return dry_run(args, grid)
    check_writable_dir(grid.store.root, "runs folder")
    with grid.store.lock(log=print):
        pending = pending_runs(grid)
        if not pending:
            return 0
        ordered = longest_first_with_estimate(args, grid, pending)
        outcome = run_pending(args, grid, pending, ordered)
    if isinstance(outcome, int):
        return outcome
    print("\n".join(outcome.summary()))
    print(f"records: {grid.store.records_dir}; tables: harness tables --profile {grid.profile}")
    return 0 if not outcome.failed else 1


def plan_grid(args: argparse.Namespace) -> PlannedGrid:
    """Load the specs and expand them under the profile (with ``--claims-only``, what claims read)."""
    from harness.grid import claims_only, expand
    from harness.paths import resolve_data_root
    from harness.specs import load_plot_specs, load_table_specs
    from harness.store import RunStore

    profile = args.profile or ("smoke" if args.smoke else "cpu")
    overrides = overrides_from_args(args)
    check_options(args, overrides)
    check_spec_paths(args.specs)
    specs = load_table_specs(args.specs)
    extra = []
    if "all" in args.specs:
        extra = [(p.name, s.label, s.run) for p in load_plot_specs() for s in p.series]
    data_root = resolve_data_root(args.data_dir)
    store = RunStore(args.runs_dir)
    plan = expand(
        specs,
        profile,
        seeds=args.seeds,
        overrides=overrides,
        data_root=data_root,
        extra=extra,
        require_corpus=not args.dry_run,
    )
    if args.claims_only:
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
    return PlannedGrid(specs, profile, plan, store, data_root, retry=not args.skip_failed)


def check_options(args: argparse.Namespace, overrides: dict[str, Any]) -> None:
    """Every numeric option and ``HARNESS_*`` setting, before anything is planned or printed (grid,
    ``--dry-run`` and check alike): one error line, exit 2."""
    from harness.commands.common import check_environment, check_threads
    from harness.grid import check_seed_count
    from harness.resources import (
        check_max_failures,
        check_resource_request,
        check_storage,
        parse_trial_resources,
    )

    check_finite_overrides(overrides, "override")
    check_seed_count(args.seeds)
    check_resource_request(args.cpus_per_trial, args.gpus_per_trial)
    parse_trial_resources(getattr(args, "trial_resources", None))
    check_max_failures(getattr(args, "max_failures", 0))
    check_storage(getattr(args, "storage", None))
    check_threads(overrides.get("threads"))
    check_environment()


def dry_run(args: argparse.Namespace, grid: PlannedGrid) -> int:
    """``--dry-run``: the runs, which are done, and what the rest would cost; nothing runs."""
    from harness.cost import estimate_lines, scratch_line
    from harness.grid import attach_status, describe

    plan, store = grid.plan, grid.store
    attach_status(plan, store)
    for line in distrust_scoreless(plan, store):
        print(line)
    print("\n".join(describe(plan, retry_failed=grid.retry)))
    todo = plan.pending(grid.retry)
    model, slots = cost_model(args, store, [r.config for r in plan.runs])  # corpus sizes of all
    print("\n".join(estimate_lines([(r.config, r.used_by) for r in todo], model, local_slots=slots)))
    if plan.counts()["finished"]:
        print(scratch_line([r.config for r in plan.runs], model, slots))
    return 0


def pending_runs(grid: PlannedGrid) -> list[PlannedRun]:
    """Under the lock: the store's status of every planned run, warnings, and the runs to do."""
    from harness.cleanup import remove_stale_temp_dirs
    from harness.grid import attach_status

    for folder in remove_stale_temp_dirs():
        print(f"note: removed {folder} (Ray session files of a grid that was killed)")
    plan, store = grid.plan, grid.store
    attach_status(plan, store)
    for line in distrust_scoreless(plan, store):
        print(line)
    for cell in plan.cells:
        if cell.state == "unresolved":
            print(f"warning: {cell.spec}: {cell.key}: not run: {cell.reason}")
    pending = plan.pending(grid.retry)
    counts = plan.counts()
    print(
        f"grid {', '.join(s.name for s in grid.specs)} under profile {grid.profile}: {len(plan.runs)} "
        f"distinct runs, {counts['finished']} already finished, {len(pending)} to run"
    )
    return pending


def longest_first_with_estimate(
    args: argparse.Namespace, grid: PlannedGrid, pending: list[PlannedRun]
) -> list[Any]:
    """Check the pending runs' corpora, then order them longest first and print the estimate."""
    from harness.cost import hours, longest_first, makespan

    check_corpora([r.config for r in pending])
    check_data_files(grid.data_root, [r.config for r in pending])
    model, slots = cost_model(args, grid.store, [r.config for r in pending])
    ordered: list[Any] = longest_first([r.config for r in pending], model)
    seconds = [model.run_seconds(c) for c in ordered]
    print(
        f"estimated: {sum(seconds) / 3600:.2f} trial-hours, about {hours(makespan(seconds, slots))} on "
        f"{slots} slot(s); runs start longest first ({model.source(ordered[0])})"
    )
    return ordered


def run_pending(
    args: argparse.Namespace, grid: PlannedGrid, pending: list[PlannedRun], ordered: list[Any]
) -> GridReport | int:
    """Run the ordered configs through Ray Tune (SIGTERM stops them as Ctrl-C does).

    Returns the grid report, or the exit status when the grid was interrupted (130) or Ray Tune
    stopped it (1).
    """
    from harness.grid import complete_for
    from harness.progress import GridInterrupted, GridStopped
    from harness.resources import parse_trial_resources
    from harness.signals import sigterm_as_interrupt
    from harness.tune import run_trials

    store = grid.store
    model, _ = cost_model(args, store, ordered)
    tracking = Tracking(tuple(dict.fromkeys(args.track)), store.root, args.tracking_uri)
    with sigterm_as_interrupt():
        try:
            return run_trials(
                ordered,
                grid.data_root,
                store,
                address=args.address,
                gpus_per_trial=args.gpus_per_trial,
                cpus_per_trial=args.cpus_per_trial,
                smoke=args.smoke,
                save_model=args.save_model,
                storage_dir=args.storage,
                max_failures=args.max_failures,
                trial_resources=parse_trial_resources(args.trial_resources),
                name=grid_name(grid.specs),
                estimates={c.run_id(): model.run_seconds(c) for c in ordered},
                steps_shares=steps_shares(model, ordered),
                tracking=tracking,
            )
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


def steps_shares(model: Any, configs: list[Any]) -> dict[str, float]:
    """The share of each run's estimate that its steps and dev probes take (the rest: final tasks)."""
    import dataclasses

    shares = {}
    for config in configs:
        training = model.run_seconds(dataclasses.replace(config, final_tasks="none", post_whiten="none"))
        shares[config.run_id()] = training / max(model.run_seconds(config), 1e-9)
    return shares


def grid_name(specs: list[TableSpec]) -> str:
    """The grid's name in Ray Tune's folder: its specs' names (the first two, then how many more)."""
    names = [s.name for s in specs]
    return "+".join(names[:2]) + (f"+{len(names) - 2}more" if len(names) > 2 else "")


def cost_model(args: argparse.Namespace, store: Any, configs: list[Any]) -> tuple[Any, int]:
    """The grid's cost model (calibrated on the store's finished records) and its parallel slots.

    Trials run on GPUs when ``--gpus-per-trial`` > 0 or, with a local Ray, when this machine has a
    CUDA GPU; the slots are GPUs / GPUs per trial, else CPUs / CPUs per trial.
    """
    import os

    import torch

    from harness.cost import CostModel

    gpus_per_trial = args.gpus_per_trial
    local_gpus = torch.cuda.device_count() if args.address is None and not args.smoke else 0
    on_gpu = (gpus_per_trial or 0) > 0 or (gpus_per_trial is None and local_gpus > 0)
    if on_gpu:
        slots = max(1, int(max(local_gpus, 1) / (gpus_per_trial or 1.0)))
    else:
        slots = max(1, (os.cpu_count() or 1) // max(1, args.cpus_per_trial))
    sizes: dict[str, int] = {}
    for config in configs:
        if config.max_steps is None and config.corpus not in sizes:
            try:
                with open(config.corpus, "rb") as handle:
                    sizes[config.corpus] = sum(1 for _ in handle)
            except OSError:
                pass  # not here (planning only): the estimate assumes 1M sentences
    sharing = max(1, round(1.0 / gpus_per_trial)) if on_gpu and gpus_per_trial else 1
    return CostModel(store.records(), "cuda" if on_gpu else "cpu", sizes, sharing), slots


def distrust_scoreless(plan: Any, store: Any) -> list[str]:
    """Runs whose record says finished without the final scores it should hold are run again.

    Returns one warning line per such run (their planned state becomes ``running``, i.e. pending
    whatever ``--skip-failed`` says).
    """
    from harness.store import missing_scores

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


def check_corpora(configs: list[Any]) -> None:
    """Read every distinct corpus the runs use (before Ray starts), so a bad one fails at once."""
    from harness.train import read_corpus

    need: dict[str, int] = {}
    for config in configs:
        need[str(config.corpus)] = max(need.get(str(config.corpus), 0), int(config.batch_size))
    for corpus, batch in need.items():
        read_corpus(Path(corpus), min_sentences=batch)


def check_data_files(data_root: Path, configs: list[Any]) -> None:
    """Read every SentEval file the runs will read (before Ray starts), so a bad line fails the grid
    at once instead of every run at its final evaluation.

    Raises:
        DataError: after printing each problem (``file:line``) on stderr.
    """
    from harness.errors import DataError
    from harness.evaluation.tasks import data_problems
    from harness.paths import senteval_dir

    _, problems = data_problems(senteval_dir(data_root), {str(c.final_tasks) for c in configs})
    if problems:
        for text in problems:
            print(f"harness grid: data problem: {text}", file=sys.stderr)
        raise DataError(
            f"{len(problems)} data file problem(s) above: nothing was run (`harness check` lists them too)"
        )
