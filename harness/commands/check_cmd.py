"""``harness check``: the pre-flight check of a grid, every problem in one list.

What it checks: :mod:`harness.grid.preflight.command`.
"""

from __future__ import annotations

import argparse

from harness.commands.flags import number
from harness.commands.grid_flags import add_trial_resources_argument, grid_options
from harness.commands.report_flags import add_common_report_arguments
from harness.commands.setting_flags import add_override_arguments

HELP = "pre-flight check of a grid: data, corpora, models, runs folder, disk, GPUs, Ray (seconds)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="table spec(s), as for harness grid")
    add_common_report_arguments(parser)
    parser.add_argument("--seeds", type=number(int), default=1, help="seeds per run (default 1)")
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster address to check (HOST:PORT); every node's data, models and versions too",
    )
    parser.add_argument("--gpus-per-trial", type=number(float), default=None, help="GPUs per trial to check")
    parser.add_argument(
        "--cpus-per-trial", type=number(int), default=None, help="CPUs per trial to check (default 1)"
    )
    add_trial_resources_argument(parser)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Plan the grid as ``harness grid`` would, check what its runs need, print one list."""
    from harness.grid.preflight.command import run_preflight

    return run_preflight(grid_options(args))
