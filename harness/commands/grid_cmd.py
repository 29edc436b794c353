"""``harness grid``: expand table specs under a profile and run the missing runs through Ray Tune.

One grid at a time per runs folder: the grid holds ``<runs>/grid.lock`` (pid, host, start time)
while it trains; a second grid is refused with a message naming the holder, and a lock left by a
killed grid on this host is taken over with a note. Ctrl-C stops the trials, marks the runs they
left as ``interrupted``, prints what was done and exits with status 130; SIGTERM (``kill PID``) does
the same. What a grid does, step by step: :mod:`harness.grid.launch`; with ``--until-decided``, seeds
in rounds until its claims are decided: :mod:`harness.grid.rounds` (the grid's side) and
:mod:`harness.stats.decisions` (the claims' side), joined here.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness.commands.flags import add_compile_argument, number
from harness.commands.grid_flags import add_cluster_arguments, grid_options
from harness.commands.report_flags import (
    add_analysis_arguments,
    add_common_report_arguments,
    add_effect_argument,
)
from harness.commands.setting_flags import add_override_arguments, overrides_from_args
from harness.errors import ConfigError, HarnessError
from harness.grid.launch import PlannedGrid, dry_run, plan_grid, run_grid
from harness.grid.progress.tracking import TRACKERS

HELP = "run the grid of runs that table specs need (Ray Tune; skips finished runs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "specs",
        nargs="+",
        metavar="SPEC",
        help="table spec: a path, a name in tables/ (e.g. whitenedcse_table3), or 'all' (plots' runs too)",
    )
    add_common_report_arguments(parser)
    parser.add_argument(
        "--seeds",
        type=number(int),
        default=None,
        help="seeds per run, from the profile's seed (default 1; with --until-decided the first round's, "
        "default 5)",
    )
    parser.add_argument(
        "--until-decided",
        action="store_true",
        help="run seeds in rounds until every claim is decided (anytime-valid: the seeds may depend on "
        "the data), ruled out at --effect, or short of seeds (--max-seeds or --budget cannot reach a "
        "verdict); only undecided claims' cells get more seeds",
    )
    parser.add_argument(
        "--max-seeds",
        type=number(int),
        default=None,
        metavar="N",
        help="with --until-decided: the most seeds a claim gets",
    )
    parser.add_argument(
        "--budget",
        type=number(float),
        default=None,
        metavar="HOURS",
        help="with --until-decided: the most trial-hours (CPU-trial-h, or GPU-h) to plan, measured runs "
        "and the cost model's estimates together; a round that does not fit is cut or not started",
    )
    add_effect_argument(parser)
    add_analysis_arguments(parser)
    add_cluster_arguments(parser)
    add_compile_argument(parser)
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


def run(args: argparse.Namespace) -> int:
    """Plan, then either describe the plan (``--dry-run``) or, holding the grid lock, run it (in rounds
    until decided with ``--until-decided``)."""
    from harness.stats.outcomes import parse_effect

    effect = parse_effect(args.effect)
    options = grid_options(args)
    if args.until_decided:
        return _until_decided(args, options, effect)
    if args.max_seeds is not None or args.budget is not None:
        raise ConfigError("--max-seeds and --budget go with --until-decided")
    grid = plan_grid(options)
    if not args.dry_run:
        return run_grid(grid)
    status = dry_run(grid)
    for line in _power_lines(args, grid, effect):
        print(line)
    return status


def _power_lines(args: argparse.Namespace, grid: PlannedGrid, effect: Any) -> list[str]:
    """The seeds each undecided claim needs for 80 % power (the paired t-test; the store's records)."""
    from harness.reporting.claims import build_claims
    from harness.stats.correction import Analysis
    from harness.stats.decisions import power_lines

    specs = [s for s in grid.specs if s.claims]
    if not specs or not grid.store.root.is_dir():
        return []
    try:
        results = build_claims(
            specs,
            grid.store,
            grid.profile,
            overrides=overrides_from_args(args),
            data_root=grid.data_root,
            analysis=Analysis(args.correction, args.family),
        )
    except HarnessError as exc:  # e.g. a corpus not here: the plan above is provisional anyway
        return [f"power: not computed ({exc})"]
    return power_lines(results, effect, Analysis(args.correction, args.family))


def _until_decided(args: argparse.Namespace, options: Any, effect: Any) -> int:
    """``--until-decided``: the claims' decider (anytime-valid test, corrected) joined to the rounds."""
    from harness.grid.rounds import (
        SEQUENTIAL_FILE,
        Sequential,
        check_sequential,
        dry_run_until_decided,
        read_sequential,
        run_until_decided,
    )
    from harness.reporting.claims import build_claims
    from harness.stats.correction import Analysis
    from harness.stats.decisions import decider
    from harness.stats.sequential import ALPHA, MIXTURE_C, read_design

    check_sequential(args.max_seeds, args.budget, options.seeds)
    grid = plan_grid(options)
    earlier = (read_sequential(grid.store.root) or {}).get("design") or {}
    mixture_c = MIXTURE_C  # the c an earlier grid of this profile chose stays: the sequence goes on
    if earlier.get("profile") == grid.profile:
        mixture_c = read_design(earlier, f"{grid.store.root / SEQUENTIAL_FILE}: design").mixture_c
    analysis = Analysis(
        args.correction,
        args.family,
        sequential=True,
        mixture_c=mixture_c,
        effect=effect,
        max_seeds=args.max_seeds,
    )
    specs = [s for s in grid.specs if s.claims]

    def build(analysis: Analysis) -> list[Any]:
        return build_claims(
            specs,
            grid.store,
            grid.profile,
            overrides=options.overrides,
            data_root=grid.data_root,
            analysis=analysis,
        )

    design = {
        "test": "sequential",
        "reference": "Wang and Ramdas, arXiv:2310.03722 (Gaussian-mixture t test martingale)",
        "mixture_c": analysis.mixture_c,
        "alpha": ALPHA,
        "correction": analysis.correction,
        "family": analysis.family,
        "effect": effect.text,
        "max_seeds": args.max_seeds,
        "budget_hours": args.budget,
        "profile": grid.profile,
        "specs": [s.name for s in specs],
    }
    sequential = Sequential(args.max_seeds, args.budget, design)
    decide = decider(build, analysis)
    if args.dry_run:
        return dry_run_until_decided(grid, decide, sequential)
    return run_until_decided(grid, decide, sequential)
