"""The grid's options: one constructor for ``harness grid`` and ``harness check``, every field from the
flag of its name or the record's own default."""

from __future__ import annotations

from harness.cli import build_parser
from harness.commands.grid_flags import grid_options
from harness.grid.options import ClusterOptions, GridOptions


def test_grid_flags_reach_every_field() -> None:
    flags = "--seeds 2 --cpus-per-trial 2 --skip-failed --dry-run --save-model --trial-resources"
    flags += " worker_node=1 --max-failures 3 --compile off --track mlflow"
    args = build_parser().parse_args(["grid", "all", *flags.split()])
    options = grid_options(args)
    assert (options.specs, options.seeds, options.dry_run, options.save_model) == (("all",), 2, True, True)
    assert (options.retry_failed, options.compile, options.track) == (False, False, ("mlflow",))
    assert options.cluster.cpus_per_trial == 2 and options.cluster.max_failures == 3
    assert dict(options.cluster.trial_resources) == {"worker_node": 1.0}


def test_check_has_fewer_flags_and_gets_the_records_defaults() -> None:
    options = grid_options(build_parser().parse_args(["check", "all"]))
    defaults = GridOptions(specs=("all",))
    assert (options.claims_only, options.dry_run, options.save_model) == (
        defaults.claims_only,
        defaults.dry_run,
        defaults.save_model,
    )
    assert (options.retry_failed, options.track, options.compile) == (True, (), None)
    assert options.cluster.max_failures == ClusterOptions().max_failures
    assert options.cluster.lost_node_wait == ClusterOptions().lost_node_wait


def test_check_takes_the_trial_request_it_judges_against_the_nodes() -> None:
    """``harness check --address`` judges each trial's request against every node, custom
    resources included (the judging: tests/grid/preflight/test_cluster.py)."""
    argv = ["check", "all", "--address", "10.0.0.1:6379", "--cpus-per-trial", "12"]
    options = grid_options(build_parser().parse_args([*argv, "--trial-resources", "worker_node=1"]))
    assert options.cluster.cpus == 12 and dict(options.cluster.trial_resources) == {"worker_node": 1.0}
    assert grid_options(build_parser().parse_args(["check", "all"])).cluster.cpus_per_trial is None
