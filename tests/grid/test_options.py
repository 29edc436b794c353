"""The grid options that choose where trials run, where checkpoints go and how long a lost node is
waited for: checked when they are built, one error line, exit 2, before any plan."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.grid.options import (
    ClusterOptions,
    GridOptions,
    check_options,
    decide_trial_gpus,
    parse_trial_resources,
)
from tests.helpers import SMOKE_SPEC, make_data_root


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--trial-resources", "worker_node"], "--trial-resources expects NAME=N with N a number > 0"),
        (["--trial-resources", "worker_node=0"], "--trial-resources worker_node=0: N must be a number > 0"),
        (["--trial-resources", "worker_node=nan"], "--trial-resources worker_node=nan: N must be a number"),
        (["--trial-resources", "worker_node=1_0"], "--trial-resources expects NAME=N with N a number > 0"),
        (["--gpus-per-trial", "1"], "--smoke starts a small local Ray without GPUs and cannot give"),
        (["--cpus-per-trial", "100000"], "--cpus-per-trial 100000 is more than this machine's"),
        (["--trial-resources", "GPU=1"], "set CPUs and GPUs with --cpus-per-trial / --gpus-per-trial"),
        (["--max-failures", "-1"], "--max-failures must be between 0 and 100, got -1"),
        (["--storage", "nosuchscheme://bucket/path"], "--storage nosuchscheme://bucket/path: pyarrow cannot"),
    ],
)
def test_cluster_options_are_checked_before_any_plan(
    flags: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_data_root(tmp_path / "data")
    argv = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs")]
    assert main([*argv, *flags, "--dry-run"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and expected in lines[0], captured.err


def test_trial_resources_are_name_equals_a_positive_number() -> None:
    """The parser reads ``NAME=N`` as every number is read (ASCII digits); the range is the options'
    one rule, with one message."""
    assert parse_trial_resources(None) == {}
    assert parse_trial_resources([" worker_node = 1", "big_mem=0.5"]) == {"worker_node": 1.0, "big_mem": 0.5}
    for bad in ("worker_node", "=1", "worker_node=x", "worker_node=1_0", "worker_node=\u0661"):
        with pytest.raises(ConfigError, match=rf"expects NAME=N with N a number > 0 .*got {bad!r}"):
            parse_trial_resources([bad])
    for bad, shown in (("worker_node=0", "0"), ("worker_node=-1", "-1"), ("worker_node=inf", "inf")):
        with pytest.raises(
            ConfigError, match=rf"^--trial-resources worker_node={shown}: N must be a number > 0"
        ):
            ClusterOptions(trial_resources=parse_trial_resources([bad]))


def test_cluster_options_check_their_own_values() -> None:
    ClusterOptions(
        address="10.0.0.1:6379",
        gpus_per_trial=0.25,
        cpus_per_trial=64,  # a cluster's nodes: not bounded by this machine
        trial_resources={"worker_node": 1.0},
        max_failures=3,
    )
    ClusterOptions(gpus_per_trial=2.0)
    here = os.cpu_count() or 1
    assert ClusterOptions(cpus_per_trial=here).cpus == here and ClusterOptions().cpus == 1
    for kwargs, message in (
        ({"cpus_per_trial": 0}, "--cpus-per-trial must be >= 1, got 0"),
        (
            {"cpus_per_trial": here + 1},
            f"--cpus-per-trial {here + 1} is more than this machine's {here} CPU(s), all a local Ray has",
        ),
        (
            {"smoke": True, "cpus_per_trial": here + 1},
            f"--cpus-per-trial {here + 1} is more than this machine's {here} CPU(s)",
        ),
        ({"smoke": True, "gpus_per_trial": 0.5}, "--smoke starts a small local Ray without GPUs and cannot"),
        ({"gpus_per_trial": float("nan")}, "--gpus-per-trial must be finite and >= 0"),
        ({"gpus_per_trial": 1.5}, "a fraction <= 1 or a whole number of GPUs, got 1.5"),
        ({"trial_resources": {"CPU": 1.0}}, "set CPUs and GPUs with --cpus-per-trial"),
        ({"trial_resources": {"node": 0.0}}, "--trial-resources node=0: N must be a number > 0"),
        ({"max_failures": 101}, "--max-failures must be between 0 and 100, got 101"),
        (
            {"smoke": True, "address": "10.0.0.1:6379"},
            "--smoke starts a small local Ray and cannot use the cluster at --address 10.0.0.1:6379",
        ),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            ClusterOptions(**kwargs)


def test_smoke_with_an_address_is_refused_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--address", "127.0.0.1:1", "--dry-run"]
    assert main([*args, "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert (
        err == "harness grid: error: --smoke starts a small local Ray and cannot use the cluster at "
        "--address 127.0.0.1:1: give one or the other\n"
    )


def test_tunes_storage_is_a_folder_or_a_uri(tmp_path: Path) -> None:
    default = ClusterOptions()
    assert (
        not default.remote_storage()
        and default.storage_folder(tmp_path / "runs") == tmp_path / "runs" / "tune"
    )
    assert default.storage_uri(tmp_path / "runs") == str((tmp_path / "runs" / "tune").resolve())
    shared = ClusterOptions(storage=str(tmp_path / "shared"))
    assert shared.storage_folder(tmp_path / "runs") == tmp_path / "shared" and not shared.remote_storage()
    uri = f"file://{tmp_path / 'bucket'}"  # a URI pyarrow opens without a network
    remote = ClusterOptions(storage=uri)
    assert remote.remote_storage() and remote.storage_uri(tmp_path / "runs") == uri
    assert remote.storage_folder(tmp_path / "runs") == tmp_path / "runs" / "tune"  # tracebacks stay local


@pytest.mark.parametrize("value", ["-1", "nan", "1e9"])
def test_the_wait_is_checked(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--runs-dir", str(tmp_path / "runs")]
    args += ["--lost-node-wait", value]
    assert main(args) == 2
    assert "--lost-node-wait must be seconds from 0 to 604800 (a week)" in capsys.readouterr().err


def test_the_gpus_each_trial_gets_follow_one_rule() -> None:
    """As given; else one where the trials' machine (this one, or the cluster) has a GPU: the value
    the cost model and the driver share."""
    assert decide_trial_gpus(ClusterOptions(gpus_per_trial=0.5), 0) == 0.5
    assert decide_trial_gpus(ClusterOptions(), 2) == 1.0 and decide_trial_gpus(ClusterOptions(), 0) == 0.0
    assert decide_trial_gpus(ClusterOptions(address="10.0.0.1:6379"), 8) == 1.0
    assert decide_trial_gpus(ClusterOptions(smoke=True), 2) == 0.0
    assert ClusterOptions(smoke=True, gpus_per_trial=0).gpus_per_trial == 0  # none asked: not refused


def test_cpus_per_trial_given_must_match_the_threads_the_runs_train_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--cpus-per-trial`` is each trial's torch threads unless the runs fix their own (the CPU and
    smoke profiles: ``threads = 1``, part of the run id): a mismatch is one line naming both and the
    fix, for the grid and the check alike, instead of CPUs reserved and not trained on."""
    runs = str(tmp_path / "runs")
    common = [str(SMOKE_SPEC), "--profile", "smoke", "--runs-dir", runs, "--cpus-per-trial", "1"]
    expected = (
        "--cpus-per-trial 1 but the runs train on 2 thread(s) (their threads setting under profile smoke; "
        "it is part of the run id): give --override threads=1 as well, or --cpus-per-trial 2"
    )
    for argv in (["grid", *common, "--dry-run"], ["check", *common]):
        assert main([*argv, "--override", "threads=2"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.strip().endswith(expected), captured.err
    agreed = GridOptions(specs=(str(SMOKE_SPEC),), profile="smoke", cluster=ClusterOptions(cpus_per_trial=1))
    check_options(agreed)  # threads = 1 and one CPU: agreed
    check_options(
        GridOptions(specs=(str(SMOKE_SPEC),), profile="smoke", overrides={"threads": 2})
    )  # not given
    check_options(GridOptions(specs=("x",), profile="paper", cluster=ClusterOptions(cpus_per_trial=1)))
