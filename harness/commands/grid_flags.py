"""The grid's flags (``harness grid``, ``harness check``): where the trials run, and the one typed
record of what the grid was asked (:class:`~harness.grid.options.GridOptions`)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from harness.commands.flags import compile_choice, number
from harness.commands.setting_flags import overrides_from_args
from harness.grid.capacity import DEFAULT_LOST_NODE_WAIT_S
from harness.grid.options import ClusterOptions, GridOptions, parse_trial_resources


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the trials run: the Ray cluster, each trial's resources, Tune's storage and retries."""
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start Ray locally)")
    parser.add_argument(
        "--gpus-per-trial",
        type=number(float),
        default=None,
        help="GPUs per trial, fractions allowed (default 1 if any)",
    )
    parser.add_argument(
        "--cpus-per-trial",
        type=number(int),
        default=None,
        help="CPUs (and torch threads) per trial (default 1); where the runs fix their threads (the CPU "
        "profiles: 1) the two must agree",
    )
    add_trial_resources_argument(parser)
    parser.add_argument(
        "--storage",
        default=None,
        help="Ray Tune's storage for curves, resume checkpoints and --save-model weights: a folder every "
        "node reaches, or a URI (s3://bucket/path, gs://...); default RUNS/tune (this machine only)",
    )
    parser.add_argument(
        "--max-failures",
        type=number(int),
        default=0,
        help="retries of a failed trial (a lost node): it resumes from its last checkpoint (default 0)",
    )
    parser.add_argument(
        "--lost-node-wait",
        type=number(float),
        default=DEFAULT_LOST_NODE_WAIT_S,
        metavar="SECONDS",
        help="when no alive node can take the waiting runs (their nodes were lost), wait this long for "
        "one to join, then stop: the waiting runs are marked interrupted (the same command resumes "
        f"them) and the grid exits 1 (default {DEFAULT_LOST_NODE_WAIT_S:.0f})",
    )


def add_trial_resources_argument(parser: argparse.ArgumentParser) -> None:
    """``--trial-resources NAME=N`` (``harness grid``, and ``harness check``, which judges it against
    every node)."""
    parser.add_argument(
        "--trial-resources",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a custom Ray resource every trial asks for (repeatable), e.g. worker_node=1 to run trials "
        "only on the nodes started with --resources '{\"worker_node\": 1}'",
    )


def grid_options(args: argparse.Namespace) -> GridOptions:
    """What ``harness grid`` (or ``harness check``) was asked, as one typed record: each field from
    the flag of its name where the command has that flag, else the record's own default."""
    given = vars(args)

    def fields_of(cls: type) -> dict[str, Any]:
        return {f.name: given[f.name] for f in dataclasses.fields(cls) if f.name in given}

    cluster = fields_of(ClusterOptions)
    cluster["trial_resources"] = parse_trial_resources(cluster.get("trial_resources"))
    grid = fields_of(GridOptions)
    grid["specs"] = tuple(args.specs)
    grid["seeds"] = args.seeds if args.seeds is not None else first_seeds(args)
    grid["overrides"] = overrides_from_args(args)
    grid["retry_failed"] = not given.get("skip_failed", False)
    grid["track"] = tuple(given.get("track") or ())
    grid["compile"] = compile_choice(given.get("compile", "auto"))
    return GridOptions(**grid, cluster=ClusterOptions(**cluster))


def first_seeds(args: argparse.Namespace) -> int:
    """``--seeds`` when not given: 1, or the first round of ``--until-decided``."""
    from harness.grid.rounds import FIRST_SEEDS

    return FIRST_SEEDS if getattr(args, "until_decided", False) else 1
