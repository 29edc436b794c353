"""The run store: atomic writes, robust reads."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.store import SCHEMA_VERSION, RunStore, code_version, new_record


def record(run_id: str, status: str = "finished", **extra: object) -> dict[str, object]:
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "status": status, **extra}


def test_save_load_round_trip(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    path = store.save(record("simcse-000000000001", trajectory=[{"step": 0, "stsb_dev": 50.0}]))
    assert (
        path
        == store.path("simcse-000000000001")
        == tmp_path / "runs" / "records" / "simcse-000000000001.json"
    )
    loaded = store.load("simcse-000000000001")
    assert loaded is not None and loaded["trajectory"] == [{"step": 0, "stsb_dev": 50.0}]
    assert store.load("simcse-000000000002") is None
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_save_replaces_and_lists(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    assert store.records() == [] and store.finished_ids() == set()
    store.save(record("a-1", status="running"))
    store.save(record("b-1", status="failed"))
    store.save(record("a-1", status="finished"))
    store.save(record("c-1", status="finished"))
    assert [r["run_id"] for r in store.records()] == ["a-1", "b-1", "c-1"]
    assert store.finished_ids() == {"a-1", "c-1"}


def test_corrupt_and_foreign_files_are_skipped_with_a_warning(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.save(record("good-1"))
    (store.records_dir / "half.json").write_text('{"run_id": "half-1", "sta')
    (store.records_dir / "list.json").write_text("[1, 2]")
    (store.records_dir / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.warns(RuntimeWarning, match="skipping"):
        records = store.records()
    assert [r["run_id"] for r in records] == ["good-1"]
    with pytest.warns(RuntimeWarning):
        assert store.finished_ids() == {"good-1"}
    (store.records_dir / "bad-1.json").write_text("not json")
    with pytest.warns(RuntimeWarning):
        assert store.load("bad-1") is None


def test_a_failed_write_keeps_the_old_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path)
    store.save(record("x-1", status="running"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.save(record("x-1", status="finished"))
    monkeypatch.undo()
    loaded = store.load("x-1")
    assert loaded is not None and loaded["status"] == "running"
    assert [p.name for p in store.records_dir.iterdir()] == ["x-1.json"]


def test_non_finite_numbers_become_null(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    path = store.save(record("n-1", trajectory=[{"step": 1, "loss": math.nan, "x": math.inf}]))
    data = json.loads(path.read_text())  # strict JSON
    assert data["trajectory"] == [{"step": 1, "loss": None, "x": None}]


def test_invalid_run_ids_are_rejected(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for bad in ("../escape", "", "a/b", ".hidden"):
        with pytest.raises(ConfigError):
            store.path(bad)
    with pytest.raises(ConfigError):
        store.save({"status": "finished"})


def test_new_record_has_every_schema_key(tmp_path: Path) -> None:
    from harness.config import resolve_config

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"s {i}" for i in range(20)) + "\n")
    config = resolve_config("simcse", profile="smoke", overrides={"corpus": str(corpus)})
    rec = new_record(config)
    from harness.record import RunRecord

    # every key the typed record declares (checkpoint is optional: only when a model is saved)
    assert set(rec) == set(RunRecord.__annotations__) - {"checkpoint"}
    assert rec["schema_version"] == 2 and rec["provenance"] is None and rec["method_notes"] == {}
    assert rec["run_id"] == config.run_id() and rec["status"] == "running"
    assert rec["config"] == config.to_dict()
    assert isinstance(code_version(), str) and code_version()
