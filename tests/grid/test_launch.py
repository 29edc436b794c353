"""Launching a grid: its runs longest first, each run's share of steps in its estimate, and a bad
data file stops it before Ray starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from harness.cli import main
from harness.config.paths import resolve_data_root
from harness.grid.launch import PlannedGrid, check_cluster, cost_model
from harness.grid.options import ClusterOptions, GridOptions, GridRequest
from harness.grid.progress.report import GridReport
from harness.run.checkpoint import EVERY_ENV
from harness.run.footprint import footprint
from harness.specs.cells import GridPlan
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore
from tests.helpers import SMOKE_SPEC, STSB_DEV, replace_line


def test_grid_starts_its_runs_longest_first(
    corpus_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import harness.grid.tune.driver as tune_mod

    started: list[RunConfig] = []

    def fake_run_trials(configs: list[RunConfig], *args: Any, **kwargs: Any) -> Any:
        started.extend(configs)
        raise SystemExit(0)

    monkeypatch.setattr(tune_mod, "run_trials", fake_run_trials)
    (corpus_root / "senteval").symlink_to(resolve_data_root(None) / "senteval")  # read before Ray starts
    args = ["grid", "simcsepp_table1", "--profile", "cpu", "--runs-dir", str(tmp_path / "runs")]
    with pytest.raises(SystemExit):
        main([*args, "--data-dir", str(corpus_root)])
    rows = [footprint(c.method, c.params, c.hidden_size).rows for c in started]
    assert len(started) > 3 and rows == sorted(rows, reverse=True)  # the K=10 noise probes first
    assert rows[0] > 2 * rows[-1]
    assert "trial-hours" in capsys.readouterr().out


def test_the_grid_gives_each_run_the_share_its_steps_take() -> None:
    from harness.grid.launch import steps_shares
    from harness.grid.plan.cost import CostModel
    from harness.store.run_config import resolve_config

    model = CostModel([], "cpu", {}, 1)
    with_sts = resolve_config("simcse", None, "smoke", {})
    no_final = resolve_config("simcse", None, "smoke", {"final_tasks": "none"})
    shares = steps_shares(model, [with_sts])
    assert 0.0 < shares[with_sts.run_id()] < 1.0
    assert steps_shares(model, [no_final])[no_final.run_id()] == pytest.approx(1.0)


def test_a_grid_stops_before_ray_when_a_data_file_is_bad(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replace_line(copied_root / "senteval" / STSB_DEV, 3, "x\ty")
    runs = tmp_path / "runs"
    assert (
        main(["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(copied_root), "--runs-dir", str(runs)])
        == 2
    )
    err = capsys.readouterr().err
    assert f"harness grid: data problem: {copied_root / 'senteval' / STSB_DEV}:3: expected at least 7" in err
    assert "1 data file problem(s) above: nothing was run" in err and "Traceback" not in err
    assert not (runs / "records").exists() and not (runs / "ray").exists()
    assert not (runs / "grid.lock").exists()


def test_a_gpu_dry_run_prices_with_the_visible_gpus_calibration_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A calibration file written as gpu_check writes it for the GPU this box shows is the one the
    dry run's estimate uses and names; for another GPU the estimate says first that it has none."""
    import torch

    from tests.grid.plan.test_cost import H100, _gpu_calibration

    runs = tmp_path / "runs"
    path = _gpu_calibration(runs, precision="tf32")  # the paper profile trains in tf32
    args = ["grid", "cpu_demo", "--profile", "paper", "--gpus-per-trial", "0.5", "--dry-run"]
    args += ["--runs-dir", str(runs), "--data-dir", str(resolve_data_root(None))]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for device, calibrated in ((H100, True), ("NVIDIA H200", False)):
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_, name=device: name)
        assert main(args) == 0
        out = capsys.readouterr().out
        estimate = out[out.index("estimate") :].splitlines()
        if calibrated:
            assert estimate[0].startswith("estimate (GPU-hours, 2 trials sharing each GPU")
            assert (
                f"  unit costs: calibrated on {H100} (2026-11-27, benchmarks/gpu_check.py; {path})"
                in estimate
            )
        else:
            assert estimate[0].startswith(
                f"estimate: no calibration for NVIDIA H200 in {runs / 'calibration'}"
            )
            assert H100 not in out
    # every footprint came from the table shipped with the code: nothing measured, nothing to keep
    assert not (runs / "footprint_cache").exists()


def test_the_cluster_is_checked_once_and_decides_the_gpus_of_the_estimate_and_the_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``--address``: the nodes (and the address) are checked once per grid; the cluster's GPUs
    decide ``--gpus-per-trial``'s default once, for the cost model and the driver alike; the driver
    is told the address was checked, and gets the checkpoint interval read on the driver."""
    import harness.grid.launch as launch
    import harness.grid.tune.driver as tune_mod

    visits: list[int] = []

    def fake_check_nodes(grid: Any, configs: Any) -> dict[str, float]:
        visits.append(len(configs))
        return {"CPU": 64.0, "GPU": 8.0}

    requests: list[GridRequest] = []

    def fake_run_trials(configs: Any, data_root: Any, store: Any, request: GridRequest) -> Any:
        requests.append(request)
        return GridReport(total=0)

    monkeypatch.setattr(launch, "check_nodes", fake_check_nodes)
    monkeypatch.setattr(tune_mod, "run_trials", fake_run_trials)
    monkeypatch.setenv(EVERY_ENV, "7")
    options = GridOptions(specs=("x",), cluster=ClusterOptions(address="10.0.0.1:6379"))
    store = RunStore(tmp_path / "runs")
    no_plan = cast(GridPlan, None)  # neither the check nor the hand-over reads the plan
    grid = PlannedGrid(options, [], no_plan, store, tmp_path)
    assert cost_model(options, store, [])[0].device == "cpu"  # a dry run: no cluster contacted
    check_cluster(grid, [])
    check_cluster(grid, [])  # a later round: not again
    assert visits == [0] and grid.trial_gpus == 1.0 and grid.address_checked
    assert cost_model(options, store, [], grid.trial_gpus)[0].device == "cuda"
    launch.run_pending(grid, [], [])
    (request,) = requests
    assert (request.trial_gpus, request.address_checked, request.checkpoint_every_s) == (1.0, True, 7.0)
    local = PlannedGrid(
        GridOptions(specs=("x",), cluster=ClusterOptions(smoke=True)), [], no_plan, store, tmp_path
    )
    check_cluster(local, [])
    assert local.trial_gpus == 0.0 and not local.address_checked and visits == [0]
