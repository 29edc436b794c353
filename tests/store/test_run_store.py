"""The run store: atomic writes, robust reads, attempts beside a finished record, missing scores."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import atomic
from harness.atomic import WriteError
from harness.errors import ConfigError
from harness.store.run_store import RunStore
from tests.helpers import NIGHT_RECORDS, make_record


def test_save_load_round_trip(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    path = store.save(make_record("simcse-000000000001", trajectory=[{"step": 0, "stsb_dev": 50.0}]))
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
    store.save(make_record("a-1", status="running"))
    store.save(make_record("b-1", status="failed"))
    store.save(make_record("a-1", status="finished"))
    store.save(make_record("c-1", status="finished"))
    assert [r["run_id"] for r in store.records()] == ["a-1", "b-1", "c-1"]
    assert store.finished_ids() == {"a-1", "c-1"}


def test_corrupt_and_foreign_files_are_skipped_with_a_warning(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.save(make_record("good-1"))
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
    store.save(make_record("x-1", status="running"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.save(make_record("x-1", status="finished"))
    monkeypatch.undo()
    loaded = store.load("x-1")
    assert loaded is not None and loaded["status"] == "running"
    assert [p.name for p in store.records_dir.iterdir()] == ["x-1.json"]


def test_non_finite_numbers_become_null(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    path = store.save(make_record("n-1", trajectory=[{"step": 1, "loss": math.nan, "x": math.inf}]))
    data = json.loads(path.read_text())  # strict JSON
    assert data["trajectory"] == [{"step": 1, "loss": None, "x": None}]


def test_invalid_run_ids_are_rejected(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for bad in ("../escape", "", "a/b", ".hidden"):
        with pytest.raises(ConfigError):
            store.path(bad)
    with pytest.raises(ConfigError):
        store.save({"status": "finished"})


# -- no finished result is ever lost -----------------------------------------------------------------
def test_a_finished_record_is_not_replaced_by_a_later_failed_attempt(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    done = make_record("r-1", final={"sts": {"avg": 70.0}}, started_at="t0", host="h")
    store.save(done)
    attempt = make_record("r-1", status="running", started_at="t1", host="h")
    written = store.save(attempt)  # a re-run starts: its record goes beside the finished one
    assert written == store.attempts_dir("r-1") / "1.json" and "attempt" not in attempt  # not modified
    assert json.loads(written.read_text())["attempt"] == 1
    attempt.update(status="failed", error="RuntimeError: boom")
    store.save(attempt)  # the same attempt fails: same attempt file
    loaded = store.load("r-1")
    assert loaded is not None and loaded["status"] == "finished" and loaded["final"]["sts"]["avg"] == 70.0
    assert [a["status"] for a in store.attempts("r-1")] == ["failed"]
    assert store.finished_ids() == {"r-1"}
    assert [r["run_id"] for r in store.records()] == ["r-1"]  # attempts are not records
    # a grid marking it interrupted (or a driver writing "failed") never un-finishes it either
    store.save(make_record("r-1", status="interrupted"))
    assert store.load("r-1")["status"] == "finished"  # type: ignore[index]
    assert [a["status"] for a in store.attempts("r-1")] == ["failed", "interrupted"]


def test_a_later_finished_attempt_becomes_the_record_and_keeps_the_old_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.save(make_record("r-2", final={"sts": {"avg": 70.0}}, started_at="t0", host="h"))
    again = make_record("r-2", status="running", started_at="t1", host="h")
    store.save(again)
    store.save(dict(again, status="finished", final={"sts": {"avg": 71.0}}))  # same attempt
    loaded = store.load("r-2")
    assert loaded is not None and loaded["final"]["sts"]["avg"] == 71.0
    kept = store.attempts("r-2")
    assert [(a["status"], a["final"]["sts"]["avg"]) for a in kept] == [("finished", 70.0)]
    assert sorted(p.name for p in store.attempts_dir("r-2").iterdir()) == ["2.json"]
    # the same attempt saving its finished record again does not archive itself
    store.save(loaded)
    assert len(store.attempts("r-2")) == 1


def test_missing_scores() -> None:
    from harness.store.run_store import missing_scores

    cfg = {"final_tasks": "sts"}
    assert missing_scores(make_record("a", config=cfg, final={"sts": {"avg": 1.0}})) is None
    assert "no final sts scores" in str(missing_scores(make_record("a", config=cfg, final={})))
    assert "no final sts scores" in str(missing_scores(make_record("a", config=cfg, final={"sts": {}})))
    both = {"final_tasks": "all"}
    assert "transfer" in str(missing_scores(make_record("a", config=both, final={"sts": {"avg": 1.0}})))
    assert missing_scores(make_record("a", config={"final_tasks": "none"}, final={})) is None
    assert missing_scores(make_record("a", status="failed", config=cfg, final={})) is None


def test_the_store_warns_once_per_file_naming_the_field(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    store.records_dir.mkdir(parents=True)
    for path in sorted(NIGHT_RECORDS.glob("*.json"))[:3]:
        shutil.copy(path, store.records_dir / path.name)
    bad = sorted(store.records_dir.glob("*.json"))[1]
    data = json.loads(bad.read_text(encoding="utf-8"))
    data["final"] = {"sts": "oops"}
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.warns(RuntimeWarning) as caught:
        records = store.records()
    assert len(records) == 3 and len(caught) == 1
    assert str(caught[0].message) == (
        f"run record {bad}: skipping field(s) of the wrong type: final.sts (a str, not an object)"
    )


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d["final"]["sts"].update(avg=math.nan), "final.sts.avg (nan, not a finite number)"),
        (lambda d: d.pop("config"), "config (missing: the record says nothing of the run it scores)"),
    ],
)
def test_a_record_with_a_nan_score_or_without_a_config_is_not_counted(
    tmp_path: Path, edit: Any, problem: str
) -> None:
    # one warning line naming the file; a grid does not count such a run as finished
    store = RunStore(tmp_path / "runs")
    store.records_dir.mkdir(parents=True)
    source = sorted(NIGHT_RECORDS.glob("*.json"))[0]
    data = json.loads(source.read_text(encoding="utf-8"))
    edit(data)
    bad = store.records_dir / source.name
    bad.write_text(json.dumps(data), encoding="utf-8")  # json writes NaN as Python reads it back
    with pytest.warns(RuntimeWarning) as caught:
        assert store.records() == [] and store.finished_ids() == set()
    assert {str(w.message) for w in caught} == {f"skipping run record {bad}: {problem}"}


def test_a_failed_attempt_write_leaves_no_empty_attempt_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs")
    finished = {"run_id": "r1", "status": "finished", "config": {}, "started_at": "t0", "host": "h"}
    store.save(finished)

    @contextlib.contextmanager
    def full_disk(target: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        raise atomic.failed_write(target, OSError(errno.ENOSPC, "No space left on device"))
        yield  # pragma: no cover

    monkeypatch.setattr("harness.store.run_store.atomic_write", full_disk)
    with pytest.raises(WriteError, match="no space left on the device"):
        store.save({"run_id": "r1", "status": "running", "started_at": "t1", "host": "h"})
    assert list(store.attempts_dir("r1").glob("*.json")) == []
    assert json.loads(store.path("r1").read_text()) == finished


def test_an_attempt_that_became_the_record_goes_only_as_the_store_s_own_file(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    store.save(make_record("r-2", final={"sts": {"avg": 70.0}}, started_at="t0", host="h"))
    again = make_record("r-2", status="running", started_at="t1", host="h")
    user = tmp_path / "my-copy.json"  # the user's copy of the attempt, linked into the store
    user.write_text(json.dumps({**again, "attempt": 1}))
    store.attempts_dir("r-2").mkdir()
    (store.attempts_dir("r-2") / "1.json").symlink_to(user)
    with pytest.warns(RuntimeWarning, match=r"1\.json alone.*it is a link"):
        store.save(dict(again, status="finished", final={"sts": {"avg": 71.0}}))
    assert (store.attempts_dir("r-2") / "1.json").is_symlink() and user.is_file()
    assert store.load("r-2")["final"]["sts"]["avg"] == 71.0  # type: ignore[index]
