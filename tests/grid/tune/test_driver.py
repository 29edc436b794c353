"""The Ray Tune adapter through a real (small, local) Ray: failures, driver-written records, resume.

One Ray session serves tests/grid/tune (its conftest), so Ray's start-up is paid once. One test
drives the failure and resume paths with a fast fake trainable; another trains two real
smoke-profile runs through Tune and renders tables and plots from them (about two minutes; CI runs
both); a third reads each run's final scores back from every tracker."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from harness.config.paths import resolve_data_root
from harness.grid.options import ClusterOptions, GridRequest
from harness.grid.plan.status import attach_status
from harness.grid.progress.tracking import Tracking, final_keys
from harness.grid.tune import driver
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.record import new_record
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore
from tests.helpers import FIXTURES, SMOKE_CLUSTER, fake_train, make_corpus_root, make_record


def test_ray_grid_records_failures_and_resumes(ray_up: float, tmp_path: Path) -> None:
    data_root = make_corpus_root(tmp_path / "data")
    store = RunStore(tmp_path / "runs")
    specs = [load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")]
    plan = expand(specs, "smoke", seeds=2, data_root=data_root)
    ids = [r.run_id for r in plan.runs]
    assert len(ids) == 4
    # an interrupted earlier grid: one finished, one left "running" by a kill
    store.save(make_record(plan.runs[0].config))
    store.save(new_record(plan.runs[1].config))
    (data_root / "behaviour.json").write_text(json.dumps({ids[2]: "raise", ids[3]: "exit"}))

    pending = attach_status(plan, store).pending()
    assert [r.run_id for r in pending] == ids[1:]
    lines: list[str] = []
    report = driver.run_trials(
        [r.config for r in pending], data_root, store, GridRequest(SMOKE_CLUSTER, fake_train, lines.append)
    )
    assert report.total == 3 and report.finished == 1
    failed = dict(report.failed)
    assert set(failed) == {ids[2], ids[3]}
    assert failed[ids[2]] == "RuntimeError: planned failure"
    assert store.load(ids[2])["status"] == "failed"  # type: ignore[index]
    died = store.load(ids[3])
    assert died is not None and died["status"] == "failed"  # written by the driver, with Ray's reason
    assert "Ray worker (pid " in died["error"] and "died: SYSTEM_ERROR" in died["error"], died["error"]
    assert failed[ids[3]] == died["error"]
    assert any("FAILED" in ln for ln in lines) and any("finished" in ln for ln in lines)
    assert lines[-1].startswith("[3/3] done 1, running 0, failed 2, remaining 0")
    assert report.ray_start_s == 0.0  # the module's session was reused
    assert (store.root / "tune").is_dir()  # Tune's folder stays under the runs dir

    # resume: failed runs are retried by default; the finished ones are not touched
    (data_root / "behaviour.json").write_text("{}")
    pending = attach_status(expand(specs, "smoke", seeds=2, data_root=data_root), store).pending()
    assert [r.run_id for r in pending] == ids[2:]
    report = driver.run_trials(
        [r.config for r in pending], data_root, store, GridRequest(SMOKE_CLUSTER, fake_train, print)
    )
    assert report.finished == 2 and not report.failed
    # Tune's folders of both grids stay: every run's curves, and the failed trials' error files
    assert len(list((store.root / "tune").glob("grid-*"))) == 2
    assert report.tune_dir is not None and report.tune_dir.parent == (store.root / "tune").resolve()
    assert any(ln.startswith(f"curves: {report.tune_dir}") for ln in report.summary())

    # impossible resource requests fail at once instead of waiting for ever
    from harness.errors import ConfigError

    # (the CPUs and --smoke's GPUs are refused when the options are built: tests/grid/test_options.py)
    with pytest.raises(
        ConfigError, match=r"^--gpus-per-trial 1000 is more than the local Ray's 0 GPU\(s\); no"
    ):
        driver.run_trials([plan.runs[0].config], data_root, store, GridRequest(trial_gpus=1000))
    with pytest.raises(ConfigError, match=r"^--trial-resources big=2 is more than the local Ray's 0 big"):
        driver.run_trials(
            [plan.runs[0].config],
            data_root,
            store,
            GridRequest(ClusterOptions(smoke=True, trial_resources={"big": 2.0})),
        )
    records = store.records()
    assert sorted(r["run_id"] for r in records) == sorted(ids)
    assert all(r["status"] == "finished" for r in records)
    summary = "\n".join(report.summary())
    assert "Ray start-up" in summary and "trial work" in summary


def test_real_smoke_grid_tables_and_plots(
    ray_up: float, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`harness grid --smoke` trains two real smoke runs through Tune; tables and plots read them.

    The runs report every evaluation point to Tune: the progress lines show them, and TensorBoard's
    own reader and MLflow's client (``--track mlflow``) read one point per evaluation step back.
    """
    import harness.grid.progress.report as progress
    from harness.cli import main

    monkeypatch.setattr(progress, "POINT_GAP_S", 0.0)

    try:
        data_root = resolve_data_root(None)
    except Exception:
        pytest.skip("no data root (shared/data) for a real run")
    spec = str(FIXTURES / "specs" / "smoke_grid.toml")
    common = ["--runs-dir", str(tmp_path / "runs"), "--data-dir", str(data_root)]
    assert main(["grid", spec, "--smoke", *common, "--track", "mlflow"]) == 0
    out = capsys.readouterr().out
    assert "grid: 2 finished, 0 failed of 2 trials" in out and "Ray start-up" in out
    assert_live_curves(tmp_path / "runs", out)
    records = RunStore(tmp_path / "runs").records()
    assert len(records) == 2
    for record in records:
        assert record["status"] == "finished"
        assert record["trajectory"] and record["trajectory"][-1].get("align") is not None
        assert record["final"]["sts"]["avg"] is not None
        # the final pass is timed per task group (what the cost model calibrates), not in "final"
        assert set(record["final_seconds"]) == {"sts"} and "seconds" not in record["final"]
        assert 0 < record["final_seconds"]["sts"] <= record["final_time_s"]
    # a second grid finds nothing to do
    assert main(["grid", spec, "--smoke", *common]) == 0
    assert "2 already finished, 0 to run" in capsys.readouterr().out
    out_dir = tmp_path / "tables"
    assert main(["tables", spec, "--profile", "smoke", *common, "--out", str(out_dir)]) == 0
    tex = (out_dir / "smoke_grid.tex").read_text()
    lines = tex.splitlines()  # each paper line is followed by its measured line
    measured = [
        lines[i + 1] for i, ln in enumerate(lines) if ln.startswith(("SimCSE-BERT-base &", "{*}\\,SimCSE++"))
    ]
    assert len(measured) == 2 and all("--" not in ln for ln in measured)
    assert main(["plots", "--profile", "smoke", *common, "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "align_uniform_joint.png").stat().st_size > 1000


def test_tune_failing_marks_the_running_runs_interrupted_and_the_grid_says_how_to_resume(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What Ray Tune 2.5x did when its memory monitor killed a worker: fit() raised RuntimeError."""
    from harness.cli import main

    data_root = make_corpus_root(tmp_path / "data")
    (data_root / "senteval").symlink_to(resolve_data_root(None) / "senteval")  # read before Ray starts
    spec = FIXTURES / "specs" / "smoke_grid.toml"
    plan = expand([load_table_spec(spec)], "smoke", data_root=data_root)
    store = RunStore(tmp_path / "runs")
    oom = "Caught unexpected exception: 1 worker(s) were killed due to the node running low on memory."

    def broken_fit(configs: Any, data_root: Path, store: RunStore, *args: Any, **kwargs: Any) -> None:
        store.save(new_record(configs[0]))  # one trial had started ("running")
        raise RuntimeError(oom)

    monkeypatch.setattr(driver, "_fit", broken_fit)
    args = ["grid", str(spec), "--smoke", "--runs-dir", str(store.root), "--data-dir", str(data_root)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Ray Tune stopped the grid: RuntimeError: " + oom in err
    assert "1 run(s) it left running are marked interrupted; the same command resumes the grid" in err
    assert "0 of 2 pending run(s) finished before it stopped" in err
    traces = list((store.root / "tune").glob("grid-stopped-*.txt"))
    assert len(traces) == 1 and "RuntimeError" in traces[0].read_text()
    records = store.records()
    assert len(records) == 1 and records[0]["status"] == "interrupted"
    assert records[0]["error"] == "the grid stopped: RuntimeError: " + oom
    assert [r.run_id for r in attach_status(plan, store).pending()] == [r.run_id for r in plan.runs]


def assert_live_curves(runs: Path, out: str) -> None:
    """Every evaluation point of the two smoke runs (steps 0, 2, 4) in the progress lines, in Tune's
    TensorBoard files (read by TensorBoard's reader) and in MLflow (read by MlflowClient)."""
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    records = {r["run_id"]: r for r in RunStore(runs).records()}
    steps = {run_id: [p["step"] for p in r["trajectory"]] for run_id, r in records.items()}
    assert all(s == [0, 2, 4] for s in steps.values()), steps
    for run_id in records:
        assert f"| {run_id} step 4/4, STS-B dev " in out
    (tune_dir,) = (runs / "tune").glob("smoke_grid-*")
    assert f"curves: {tune_dir.resolve()} (Ray Tune's TensorBoard" in out
    for run_id, record in records.items():
        (trial_dir,) = tune_dir.glob(f"{run_id}_*")
        events = EventAccumulator(str(trial_dir))
        events.Reload()
        dev = [e.value for e in events.Scalars("ray/tune/stsb_dev")]
        assert [int(e.value) for e in events.Scalars("ray/tune/step")] == [0, 2, 4]
        # the x axis is the training step, not Tune's count of reports; the last report says done
        assert [e.step for e in events.Scalars("ray/tune/stsb_dev")] == [0, 2, 4]
        assert (
            events.Scalars("ray/tune/done")[-1].value == 1 and events.Scalars("ray/tune/done")[-1].step == 4
        )
        assert dev == pytest.approx([p["stsb_dev"] for p in record["trajectory"]], abs=1e-4)
        assert "progress.csv" in {p.name for p in trial_dir.iterdir()}
    client = MlflowClient(f"sqlite:///{(runs / 'mlflow.db').resolve()}")
    experiment = client.get_experiment_by_name("harness-smoke_grid")
    assert experiment is not None
    mlflow_runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in mlflow_runs) == sorted(records)
    for run in mlflow_runs:
        record = records[run.info.run_name]
        history = client.get_metric_history(run.info.run_id, "stsb_dev")
        assert [m.value for m in history] == pytest.approx([p["stsb_dev"] for p in record["trajectory"]])
        assert [m.step for m in history] == [p["step"] for p in record["trajectory"]]
        assert run.data.params["method"] == record["config"]["method"]


# -- the final scores in every tracker -----------------------------------------------------------------
# Every tracker gets each run's final scores (``final/sts/avg``, ``final/transfer/avg``, one key per
# task), read back through the real libraries: TensorBoard's event reader over Ray Tune's files,
# MLflow's client over ``--track mlflow``'s store, Tune's own CSV and JSON; Weights & Biases offline
# where it is installed. The run record, which rides to the driver in the same reports, reaches none
# of them as a column.
#
# A real (small, local) Ray runs two trials whose training is faked with known final scores, so the
# test checks the reporting path, not a model.

STS = {"STS12": 61.0, "STS13": 62.0, "STSBenchmark": 70.5, "avg": 64.5}

TRANSFER = {"MR": 75.25, "avg": 75.25}


def finals_train(
    config: Any, data_root: Path, store: RunStore, *, device: str, num_threads: int, **_: Any
) -> dict[str, Any]:
    """A finished run with known final scores (a seed offset tells the two runs apart)."""
    record = dict(new_record(config))
    store.save(record)
    bump = float(config.seed - 42)
    record.update(
        status="finished",
        best_stsb_dev=80.0 + bump,
        trajectory=[{"step": 0, "stsb_dev": 79.0, "align": 0.2, "uniform": -2.0}],
        final={
            "sts": {k: v + bump for k, v in STS.items()},
            "transfer": {k: v + bump for k, v in TRANSFER.items()},
            "sts_tasks": [k for k in STS if k != "avg"],
            "transfer_tasks": ["MR"],
        },
    )
    store.save(record)
    return record


def test_final_scores_reach_every_tracker_and_the_record_none(ray_up: float, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data_root = make_corpus_root(tmp_path / "data")
    store = RunStore(tmp_path / "runs")
    plan = expand(
        [load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", seeds=2, data_root=data_root
    )
    configs = [r.config for r in plan.runs][:2]
    trackers = ("mlflow", "wandb") if importlib.util.find_spec("wandb") else ("mlflow",)
    tracking = Tracking(trackers, store.root)
    request = GridRequest(ClusterOptions(smoke=True), finals_train, lambda _line: None, tracking=tracking)
    report = driver.run_trials(configs, data_root, store, request)
    assert report.finished == 2
    records = {r["run_id"]: r for r in store.records()}
    assert report.tune_dir is not None

    client = MlflowClient(tracking.mlflow_uri())
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.info.run_name for r in runs) == sorted(records)
    for run in runs:
        record = records[run.info.run_name]
        assert run.data.metrics["final/sts/avg"] == pytest.approx(record["final"]["sts"]["avg"])
        assert run.data.metrics["final/transfer/avg"] == pytest.approx(record["final"]["transfer"]["avg"])
        assert run.data.metrics["final/sts/STSBenchmark"] == pytest.approx(
            record["final"]["sts"]["STSBenchmark"]
        )
        assert run.data.metrics["final/transfer/MR"] == pytest.approx(record["final"]["transfer"]["MR"])
        assert "record" not in run.data.metrics and "record" not in run.data.params

    for run_id, record in records.items():
        (trial_dir,) = report.tune_dir.glob(f"{run_id}_*")
        events = EventAccumulator(str(trial_dir))
        events.Reload()
        tags = set(events.Tags()["scalars"])
        for key, value in (
            ("final/sts/avg", record["final"]["sts"]["avg"]),
            ("final/transfer/MR", 75.25 + record["config"]["seed"] - 42),
        ):
            (last,) = events.Scalars(f"ray/tune/{key}")[-1:]
            assert last.value == pytest.approx(value), key
        assert not any("record" in tag for tag in tags)
        with (trial_dir / "progress.csv").open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        assert "record" not in rows[0] and set(final_keys()) <= set(rows[0])
        assert float(rows[-1]["final/sts/avg"]) == pytest.approx(record["final"]["sts"]["avg"])
        results = [
            json.loads(line) for line in (trial_dir / "result.json").read_text(encoding="utf-8").splitlines()
        ]
        assert all("record" not in r for r in results)
        assert results[-1]["final/transfer/avg"] == pytest.approx(record["final"]["transfer"]["avg"])
    if "wandb" in trackers:  # offline files under the runs folder: the history holds the finals
        assert list((store.root / "wandb").rglob("*.wandb"))


def test_a_resume_note_naming_a_folder_of_the_user_never_costs_the_folder(
    ray_up: float, tmp_path: Path
) -> None:
    """A runs folder copied from elsewhere or edited by hand: the run's record is gone and its resume
    note names a folder of the user's in another storage. The grid runs the run, forgets the note
    and leaves the folder, with one warning naming it."""
    data_root = make_corpus_root(tmp_path / "data")
    store = RunStore(tmp_path / "runs")
    config = (
        expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", data_root=data_root)
        .runs[0]
        .config
    )
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "chapter1.tex").write_text("mine")
    (store.root / "resume").mkdir(parents=True)
    (store.root / "resume" / f"{config.run_id()}.json").write_text(
        json.dumps({"path": str(user), "storage": str(tmp_path / "elsewhere"), "step": 2})
    )
    with pytest.warns(RuntimeWarning, match=f"left {user} alone"):
        report = driver.run_trials([config], data_root, store, GridRequest(SMOKE_CLUSTER, fake_train))
    assert report.finished == 1, report.failed
    assert (user / "chapter1.tex").read_text() == "mine"
    assert not (store.root / "resume").exists()


def interval_train(config: RunConfig, data_root: Path, store: RunStore, **kwargs: Any) -> Any:
    """:func:`fake_train` that notes the resume checkpoints' interval its run would use."""
    from harness.run.checkpoint import CheckpointClock

    (Path(data_root) / f"every-{config.run_id()}.json").write_text(json.dumps(CheckpointClock().every_s))
    return fake_train(config, data_root, store, **kwargs)


def test_the_driver_trusts_the_grids_checks_and_hands_its_interval_to_the_trials(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grid checked its address once (the driver does not ask the head again) and read
    ``$HARNESS_CHECKPOINT_EVERY_S`` once: each trial's run uses that value, not its worker's
    environment (here unset: the default)."""

    def asked_again(address: str | None) -> None:
        raise AssertionError(f"the address was checked again: {address}")

    monkeypatch.setattr(driver, "check_address", asked_again)
    data_root = make_corpus_root(tmp_path / "data")
    store = RunStore(tmp_path / "runs")
    plan = expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", data_root=data_root)
    config = plan.runs[0].config
    request = GridRequest(
        SMOKE_CLUSTER, interval_train, lambda _line: None, address_checked=True, checkpoint_every_s=7.0
    )
    assert driver.run_trials([config], data_root, store, request).finished == 1
    assert json.loads((data_root / f"every-{config.run_id()}.json").read_text()) == 7.0
    with pytest.raises(AssertionError, match="checked again"):  # a request no grid checked
        driver.run_trials([config], data_root, store, GridRequest(SMOKE_CLUSTER, interval_train))
