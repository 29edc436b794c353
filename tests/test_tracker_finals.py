"""Every tracker gets each run's final scores (``final/sts/avg``, ``final/transfer/avg``, one key per
task), read back through the real libraries: TensorBoard's event reader over Ray Tune's files,
MLflow's client over ``--track mlflow``'s store, Tune's own CSV and JSON; Weights & Biases offline
where it is installed. The run record, which rides to the driver in the same reports, reaches none
of them as a column.

A real (small, local) Ray runs two trials whose training is faked with known final scores, so the
test checks the reporting path, not a model.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from harness.grid.options import ClusterOptions, GridRequest
from harness.grid.plan import expand
from harness.grid.tracking import Tracking, final_keys
from harness.grid.tune import cluster, driver
from harness.specs.parse import load_table_spec
from harness.store.record import new_record
from harness.store.run_store import RunStore

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = "".join(f"fixture sentence number {i} for the corpus.\n" for i in range(64))
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


def test_final_scores_reach_every_tracker_and_the_record_none(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data_root = tmp_path / "data"
    (data_root / "corpus").mkdir(parents=True)
    (data_root / "corpus" / "nli-sentences.txt").write_text(CORPUS, encoding="utf-8")
    store = RunStore(tmp_path / "runs")
    plan = expand(
        [load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", seeds=2, data_root=data_root
    )
    configs = [r.config for r in plan.runs][:2]
    trackers = ("mlflow", "wandb") if importlib.util.find_spec("wandb") else ("mlflow",)
    tracking = Tracking(trackers, store.root)
    request = GridRequest(ClusterOptions(smoke=True), finals_train, lambda _line: None, tracking=tracking)
    with cluster.ray_session(smoke=True):
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
