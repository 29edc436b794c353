"""A trial's store is its own folder: its record and its saved encoder reach the driver through Ray."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.grid.options import ClusterOptions, GridRequest
from harness.grid.tune import driver
from harness.grid.tune.trial import HOLD_ENV, hold_while_told
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from tests.helpers import FIXTURES, make_corpus_root, make_record


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
    record = make_record(config, "running")
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
    data_root = make_corpus_root(tmp_path / "data")
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
        assert record["checkpoint"] == f"checkpoints/{config.run_id()}"  # relative: the folder can move
        saved = json.loads((store.checkpoint_dir(config.run_id()) / "config.json").read_text())
        assert saved == {"run": config.run_id()}
    assert sorted(p.name for p in store.root.iterdir()) == ["checkpoints", "records"]
    assert not list(storage.rglob("config.json"))  # Tune's copy of a local storage is not kept twice
    assert report.tune_dir is not None and report.tune_dir.parent == storage.resolve()


def test_a_trial_waits_after_its_checkpoint_while_the_tests_hold_file_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    monkeypatch.setenv(HOLD_ENV, str(hold))
    hold_while_told()  # no file: at once
    hold.touch()
    released = threading.Timer(0.5, hold.unlink)
    released.start()
    hold_while_told()  # returns only once the file is gone
    assert not hold.exists()
    released.join()
