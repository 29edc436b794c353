"""The run store: atomic writes, robust reads."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.grid.lock import GridLock
from harness.store.provenance import code_version
from harness.store.record import SCHEMA_VERSION, new_record
from harness.store.run_store import RunStore


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
    from harness.config.run_config import resolve_config

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"s {i}" for i in range(20)) + "\n")
    config = resolve_config("simcse", profile="smoke", overrides={"corpus": str(corpus)})
    rec = new_record(config)
    from harness.store.record import RunRecord

    # every key the typed record declares (the NotRequired ones are written only when they apply)
    written_later = {
        "checkpoint",
        "resumed_from_step",
        "attempt",
        "final_time_s",
        "final_seconds",
        "peak_rss_mb",
        "final_threads",
        "step0_probe_cached",
        "error_details",
    }
    assert set(rec) == set(RunRecord.__annotations__) - written_later
    assert rec["schema_version"] == SCHEMA_VERSION and rec["provenance"] is None and rec["method_notes"] == {}
    assert rec["run_id"] == config.run_id() and rec["status"] == "running"
    assert rec["config"] == config.to_dict()
    assert isinstance(code_version(), str) and code_version()


def test_the_code_version_comes_from_git_inside_a_checkout() -> None:
    # The package lives two folders below the checkout; a wrong root falls back to the version
    # number silently, and every record would then name a release instead of a commit.
    repo = Path(__file__).resolve().parents[1]
    if not (repo / ".git").exists():
        pytest.skip("not a git checkout")
    assert code_version().startswith("git:")
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True, text=True
    )
    assert head.stdout.strip() in code_version()


# -- no finished result is ever lost -----------------------------------------------------------------
def test_a_finished_record_is_not_replaced_by_a_later_failed_attempt(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    done = record("r-1", final={"sts": {"avg": 70.0}}, started_at="t0", host="h")
    store.save(done)
    attempt = record("r-1", status="running", started_at="t1", host="h")
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
    store.save(record("r-1", status="interrupted"))
    assert store.load("r-1")["status"] == "finished"  # type: ignore[index]
    assert [a["status"] for a in store.attempts("r-1")] == ["failed", "interrupted"]


def test_a_later_finished_attempt_becomes_the_record_and_keeps_the_old_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.save(record("r-2", final={"sts": {"avg": 70.0}}, started_at="t0", host="h"))
    again = record("r-2", status="running", started_at="t1", host="h")
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
    assert missing_scores(record("a", config=cfg, final={"sts": {"avg": 1.0}})) is None
    assert "no final sts scores" in str(missing_scores(record("a", config=cfg, final={})))
    assert "no final sts scores" in str(missing_scores(record("a", config=cfg, final={"sts": {}})))
    both = {"final_tasks": "all"}
    assert "transfer" in str(missing_scores(record("a", config=both, final={"sts": {"avg": 1.0}})))
    assert missing_scores(record("a", config={"final_tasks": "none"}, final={})) is None
    assert missing_scores(record("a", status="failed", config=cfg, final={})) is None


# -- one grid per runs folder ------------------------------------------------------------------------
def test_a_second_lock_is_refused_naming_the_holder(tmp_path: Path) -> None:
    import socket

    from harness.errors import GridLockedError

    store = RunStore(tmp_path / "runs")
    with GridLock.of(store.root):
        info = json.loads((store.root / "grid.lock").read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(GridLockedError, match=rf"in use by grid pid {os.getpid()} on host"):
            GridLock.of(store.root).acquire()
    assert not (store.root / "grid.lock").exists()
    with GridLock.of(store.root):  # free again
        pass


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    store = RunStore(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(dead.stdout)
    stale = {"pid": pid, "host": socket.gethostname(), "started_at": "2026-01-01T00:00:00+00:00"}
    (tmp_path / "grid.lock").write_text(json.dumps(stale))
    notes: list[str] = []
    with GridLock.of(store.root, log=notes.append):
        assert json.loads((tmp_path / "grid.lock").read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and f"stale grid lock of pid {pid}" in notes[0]


def test_a_lock_from_another_host_is_refused(tmp_path: Path) -> None:
    from harness.errors import GridLockedError

    other = {"pid": 1, "host": "elsewhere.example", "started_at": "2026-01-01T00:00:00+00:00"}
    (tmp_path / "grid.lock").write_text(json.dumps(other))
    with pytest.raises(GridLockedError, match=r"elsewhere\.example.*delete the lock file"):
        GridLock.of(tmp_path).acquire()
