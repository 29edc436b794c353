"""``harness grid``: expand table specs under a profile and run the missing runs through Ray Tune.

One grid at a time per runs folder: the grid holds ``<runs>/grid.lock`` (pid, host, start time)
while it trains; a second grid is refused with a message naming the holder, and a lock left by a
killed grid on this host is taken over with a note. Ctrl-C stops the trials, marks the runs they
left as ``interrupted``, prints what was done and exits with status 130; SIGTERM (``kill PID``) does
the same. What a grid does, step by step: :mod:`harness.grid.launch`.
"""

from __future__ import annotations

import argparse

from harness.commands.arguments import (
    add_cluster_arguments,
    add_common_report_arguments,
    add_compile_argument,
    add_override_arguments,
    grid_options,
)
from harness.grid.launch import dry_run, plan_grid, run_grid
from harness.grid.tracking import TRACKERS

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
        "--seeds", type=int, default=1, help="seeds per run, from the profile's seed (default 1)"
    )
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
    """Plan, then either describe the plan (``--dry-run``) or, holding the grid lock, run it."""
    grid = plan_grid(grid_options(args))
    return dry_run(grid) if args.dry_run else run_grid(grid)
