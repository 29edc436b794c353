"""``harness grid --track``: a missing tracker package is one line before anything runs; where the
trackers write. (The real MLflow and TensorBoard round trip is in tests/grid/tune/test_driver.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import harness.grid.progress.tracking as tracking
from harness.grid.progress.tracking import Tracking
from tests.helpers import SMOKE_SPEC


@pytest.mark.parametrize(("tracker", "extra"), [("wandb", "wandb"), ("mlflow", "track")])
def test_a_missing_tracker_package_is_one_line_naming_the_extra_before_anything_runs(
    tracker: str,
    extra: str,
    mini_data_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.cli import main

    monkeypatch.setattr(tracking, "_installed", lambda module: module not in ("wandb", "mlflow"))
    runs = tmp_path / "runs"
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--runs-dir", str(runs), "--data-dir", str(mini_data_root)]
    assert main([*args, "--track", tracker]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1, err
    assert f"--track {tracker} needs {tracker}, which is not installed" in err[0]
    assert f"pip install -e '.[{extra}]'" in err[0]
    assert captured.out == "" and not runs.exists()  # nothing planned, locked or run


def test_an_unknown_tracker_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["grid", str(SMOKE_SPEC), "--track", "neptune"]) == 2
    err = capsys.readouterr().err.replace("'", "")
    assert "argument --track: invalid choice: neptune (choose from mlflow, wandb)" in err
    assert len(err.strip().splitlines()) == 1


def test_where_the_trackers_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MLFLOW_TRACKING_URI", "WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    local = Tracking(("mlflow", "wandb"), tmp_path / "runs")
    assert local.mlflow_uri() == f"sqlite:///{(tmp_path / 'runs' / 'mlflow.db').resolve()}"
    assert local.wandb_mode() == "offline" and local.wandb_dir() == (tmp_path / "runs" / "wandb").resolve()
    assert local.lines() == [
        f"MLflow: {local.mlflow_uri()} (mlflow ui --backend-store-uri {local.mlflow_uri()})",
        f"wandb: offline run files under {local.wandb_dir()} (wandb sync uploads it)",
    ]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    monkeypatch.setenv("WANDB_API_KEY", "x")
    assert local.mlflow_uri() == "http://tracking.example:5000" and local.wandb_mode() == "online"
    given = Tracking(("mlflow",), tmp_path, tracking_uri="http://given.example")
    assert given.mlflow_uri() == "http://given.example"  # --tracking-uri wins over the environment


def test_a_grid_leaves_mlflows_environment_as_it_found_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """MLflow's set_tracking_uri (Ray's callback calls it) writes MLFLOW_TRACKING_URI into the process;
    a second grid of the same process would take that for the user's choice and log into the first's
    store."""
    from harness.grid.progress.tracking import environment_kept

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "mine")
    first, second = Tracking(("mlflow",), tmp_path / "a"), Tracking(("mlflow",), tmp_path / "b")
    with environment_kept():
        os.environ["MLFLOW_TRACKING_URI"] = first.mlflow_uri()  # as mlflow.set_tracking_uri does
        os.environ["MLFLOW_EXPERIMENT_NAME"] = "harness-a"
    assert "MLFLOW_TRACKING_URI" not in os.environ and os.environ["MLFLOW_EXPERIMENT_NAME"] == "mine"
    assert second.mlflow_uri() != first.mlflow_uri() and str(tmp_path / "b") in second.mlflow_uri()
