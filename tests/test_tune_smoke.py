"""The Ray Tune adapter through a real (small, local) Ray: failures, driver-written records, resume.

One Ray session serves the whole module, so Ray's start-up is paid once. One test drives the
failure and resume paths with a fast fake trainable; the other trains two real smoke-profile runs
through Tune and renders tables and plots from them (about two minutes; CI runs both).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config.paths import resolve_data_root
from harness.grid.options import ClusterOptions, GridRequest
from harness.grid.plan import attach_status, expand
from harness.grid.tune import callbacks, cluster, driver
from harness.specs.parse import load_table_spec
from harness.store.record import new_record
from harness.store.run_store import RunStore

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS_TEXT = "".join(f"fixture sentence number {i} for the corpus.\n" for i in range(64))


SMOKE = ClusterOptions(smoke=True)


@pytest.fixture(scope="module")
def ray_up() -> Iterator[float]:
    with cluster.ray_session(smoke=True) as start_s:
        yield start_s


def fake_train(
    config: Any, data_root: Path, store: RunStore, *, device: str, num_threads: int, **_: Any
) -> dict[str, Any]:
    """Behaves as <data root>/behaviour.json says for this run: ok, raise, or exit (the worker dies).

    (The data root, not the store: a trial's store is its own folder, its records go to the driver.)"""
    behaviour = json.loads((Path(data_root) / "behaviour.json").read_text()).get(config.run_id(), "ok")
    record = dict(new_record(config))
    store.save(record)  # "running", as train_run does first
    if behaviour == "raise":
        raise RuntimeError("planned failure")
    if behaviour == "exit":
        os._exit(3)  # no Python cleanup: the trial body cannot record anything
    record.update(status="finished", final={"sts": {"avg": 42.0}}, best_stsb_dev=40.0)
    store.save(record)
    return record


def test_ray_grid_records_failures_and_resumes(ray_up: float, tmp_path: Path) -> None:
    data_root = tmp_path / "data"
    (data_root / "corpus").mkdir(parents=True)
    (data_root / "corpus" / "nli-sentences.txt").write_text(CORPUS_TEXT)
    store = RunStore(tmp_path / "runs")
    specs = [load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")]
    plan = expand(specs, "smoke", seeds=2, data_root=data_root)
    ids = [r.run_id for r in plan.runs]
    assert len(ids) == 4
    # an interrupted earlier grid: one finished, one left "running" by a kill
    done = dict(new_record(plan.runs[0].config))
    done["status"] = "finished"
    store.save(done)
    store.save(new_record(plan.runs[1].config))
    (data_root / "behaviour.json").write_text(json.dumps({ids[2]: "raise", ids[3]: "exit"}))

    pending = attach_status(plan, store).pending()
    assert [r.run_id for r in pending] == ids[1:]
    lines: list[str] = []
    report = driver.run_trials(
        [r.config for r in pending], data_root, store, GridRequest(SMOKE, fake_train, lines.append)
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
        [r.config for r in pending], data_root, store, GridRequest(SMOKE, fake_train, print)
    )
    assert report.finished == 2 and not report.failed
    # Tune's folders of both grids stay: every run's curves, and the failed trials' error files
    assert len(list((store.root / "tune").glob("grid-*"))) == 2
    assert report.tune_dir is not None and report.tune_dir.parent == (store.root / "tune").resolve()
    assert any(ln.startswith(f"curves: {report.tune_dir}") for ln in report.summary())

    # impossible resource requests fail at once instead of waiting for ever
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match="more than the 0 GPU"):
        driver.run_trials(
            [plan.runs[0].config],
            data_root,
            store,
            GridRequest(ClusterOptions(smoke=True, gpus_per_trial=1000)),
        )
    with pytest.raises(ConfigError, match="--cpus-per-trial 100000 is more than"):
        driver.run_trials(
            [plan.runs[0].config],
            data_root,
            store,
            GridRequest(ClusterOptions(smoke=True, cpus_per_trial=100000)),
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
    import harness.grid.progress as progress
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


def test_progress_callback_pickles_even_after_print_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tune pickles callbacks; a captured ``print`` that is no longer ``builtins.print`` must not break it."""
    import builtins

    import ray.cloudpickle as cloudpickle

    from harness.store.run_store import RunStore

    captured = builtins.print
    monkeypatch.setattr(builtins, "print", lambda *a, **k: None)
    progress = callbacks.TuneProgress(2, RunStore(tmp_path), captured)
    restored = cloudpickle.loads(cloudpickle.dumps(progress))
    assert restored.log is callbacks.print_line
    assert progress.log is captured  # the live callback still logs where it was told to


def test_a_local_grid_ignores_ray_address(tmp_path: Path) -> None:
    # A grid without --address starts its own Ray even when RAY_ADDRESS points elsewhere (or a head
    # runs on this machine): ray.init() would otherwise try to join it and refuse num_cpus. In a
    # subprocess, so that no Ray session of this test process is reused.
    import subprocess
    import sys

    code = (
        "import ray, harness.grid.tune.cluster as t\n"
        "with t.ray_session(address=None, smoke=True):\n"
        "    assert ray.is_initialized() and ray.cluster_resources().get('CPU', 0) >= 1\n"
        "print('ok')\n"
    )
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def _smoke_data(tmp_path: Path) -> Path:
    data_root = tmp_path / "data"
    (data_root / "corpus").mkdir(parents=True, exist_ok=True)
    (data_root / "corpus" / "nli-sentences.txt").write_text(CORPUS_TEXT)
    return data_root


def timed_train(
    config: Any, data_root: Path, store: RunStore, *, device: str, num_threads: int, **_: Any
) -> dict[str, Any]:
    """Finishes after 3 s and notes when it ran (``span-<run id>.json`` in the data root)."""
    import time

    start = time.time()
    time.sleep(3.0)
    (Path(data_root) / f"span-{config.run_id()}.json").write_text(json.dumps([start, time.time()]))
    record = dict(new_record(config))
    record.update(status="finished", final={"sts": {"avg": 42.0}}, best_stsb_dev=40.0)
    store.save(record)
    return record


def test_ray_starts_no_more_cpu_trials_than_their_memory_allows(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    resources = ray.cluster_resources()
    if resources.get("CPU", 0) < 2 or not resources.get("memory"):
        pytest.skip("needs two CPUs in Ray and its memory resource")
    budget = float(resources["memory"])
    data_root = _smoke_data(tmp_path)
    plan = expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", data_root=data_root)
    configs = [r.config for r in plan.runs]
    assert len(configs) == 2

    def run(fraction: float) -> tuple[bool, list[str]]:
        monkeypatch.setattr(cluster, "estimate_bytes", lambda config, device="cpu": int(fraction * budget))
        store = RunStore(tmp_path / f"runs-{fraction}")
        lines: list[str] = []
        report = driver.run_trials(configs, data_root, store, GridRequest(SMOKE, timed_train, lines.append))
        assert report.finished == 2, report.failed
        spans = [json.loads(p.read_text()) for p in data_root.glob("span-*.json")]
        overlap = min(end for _, end in spans) > max(start for start, _ in spans)
        return overlap, lines

    together, lines = run(0.3)
    assert together and not any(ln.startswith("memory:") for ln in lines)
    alone, lines = run(0.6)  # two of them would need 1.2 x what Ray has
    assert not alone
    assert any(ln.startswith("memory: the largest run needs") and "at most 1 such run" in ln for ln in lines)
    # a run that needs more than the whole budget asks for all of it, and still runs (alone)
    monkeypatch.setattr(cluster, "estimate_bytes", lambda config, device="cpu": int(3 * budget))
    assert cluster.trial_memory(configs, 0.0, budget) == {c.run_id(): int(budget) for c in configs}
    assert cluster.trial_memory(configs, 0.5, budget) == {}  # GPU trials: activations are not host memory


def test_tune_failing_marks_the_running_runs_interrupted_and_the_grid_says_how_to_resume(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What Ray Tune 2.5x did when its memory monitor killed a worker: fit() raised RuntimeError."""
    from harness.cli import main

    data_root = _smoke_data(tmp_path)
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
        assert run.data.params["method"] == record["config"]["method"]


def test_a_heartbeat_line_comes_while_a_trial_trains_between_its_reports(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tune calls the progress callback between results too: a silent trial still gets lines."""
    import harness.grid.progress as progress

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
    data_root = _smoke_data(tmp_path)
    plan = expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", data_root=data_root)
    config = plan.runs[0].config
    lines: list[str] = []
    report = driver.run_trials(
        [config], data_root, RunStore(tmp_path / "runs"), GridRequest(SMOKE, timed_train, lines.append)
    )
    assert report.finished == 1
    beats = [ln for ln in lines if "| running: " in ln]
    assert beats and all(f"| running: {config.run_id()} starting" in ln for ln in beats), lines


def model_train(
    config: Any,
    data_root: Path,
    store: RunStore,
    *,
    device: str,
    num_threads: int,
    save_checkpoint: bool = False,
    **_: Any,
) -> dict[str, Any]:
    """Finishes at once; with ``save_checkpoint`` it leaves a (fake) encoder where train_run would."""
    record = dict(new_record(config))
    if save_checkpoint:
        folder = store.checkpoint_dir(config.run_id())
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"run": config.run_id()}))
        record["checkpoint"] = str(folder)
    record.update(status="finished", final={"sts": {"avg": 42.0}}, best_stsb_dev=40.0)
    store.save(record)
    store.save(record)  # saved twice, as a retried report would bring it: one record
    return record


def test_saved_encoders_come_back_through_tunes_storage(ray_up: float, tmp_path: Path) -> None:
    """A trial's store is its own folder: its record and its saved encoder reach the driver's runs
    folder through Ray (the report, the storage), and nothing else of the trial's is left there."""
    data_root = _smoke_data(tmp_path)
    configs = [r.config for r in expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke",
                                         data_root=data_root).runs]  # fmt: skip
    store = RunStore(tmp_path / "runs")
    storage = tmp_path / "elsewhere"
    report = driver.run_trials(
        configs,
        data_root,
        store,
        GridRequest(ClusterOptions(smoke=True, storage=str(storage)), model_train, save_model=True),
    )
    assert report.finished == 2, report.failed
    for config in configs:
        record = store.load(config.run_id())
        assert record is not None and record["status"] == "finished"
        assert store.attempts(config.run_id()) == []
        assert record["checkpoint"] == str(store.checkpoint_dir(config.run_id()))
        saved = json.loads((store.checkpoint_dir(config.run_id()) / "config.json").read_text())
        assert saved == {"run": config.run_id()}
    assert sorted(p.name for p in store.root.iterdir()) == ["checkpoints", "records"]
    assert not list(storage.rglob("config.json"))  # Tune's copy of a local storage is not kept twice
    assert report.tune_dir is not None and report.tune_dir.parent == storage.resolve()
