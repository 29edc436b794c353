"""What a grid's trials hand back to the driver (no Ray here): records as report text, and the
driver's notes of resume checkpoints."""

from __future__ import annotations

from pathlib import Path

from harness.grid import relay
from harness.store.run_store import RunStore


def test_a_record_travels_as_strict_json_and_only_records_are_taken() -> None:
    record = {"run_id": "r1", "status": "finished", "final": {"sts": {"avg": float("nan")}}}
    text = relay.encode_record(record)
    assert relay.decode_record(text) == {
        "run_id": "r1",
        "status": "finished",
        "final": {"sts": {"avg": None}},
    }
    for other in (None, 3, "", "not json", '{"status": "finished"}', "[1, 2]"):
        assert relay.decode_record(other) is None


def test_a_record_that_arrives_twice_is_one_record(tmp_path: Path) -> None:
    """The driver saves each record a report carried; the same attempt twice is one record."""
    store = RunStore(tmp_path / "runs")
    running = {"run_id": "r1", "status": "running", "started_at": "t0", "host": "node-b"}
    finished = {**running, "status": "finished", "final": {"sts": {"avg": 1.0}}}
    for record in (running, running, finished, finished):
        store.save(relay.decode_record(relay.encode_record(record)) or {})
    assert store.records() == [finished] and store.attempts("r1") == []


def test_checkpoint_notes_are_kept_and_forgotten(tmp_path: Path) -> None:
    runs, storage = tmp_path / "runs", tmp_path / "storage"
    earlier = storage / "grid-1" / "r1_0001" / "checkpoint_000002"
    current = storage / "grid-2" / "r2_0001" / "checkpoint_000001"
    for folder in (earlier, current):
        folder.mkdir(parents=True)
        (folder / "run.pt").write_bytes(b"state")
    assert relay.earlier_checkpoint(runs, "r1") is None
    relay.remember_checkpoint(runs, "r1", str(earlier), str(storage), 2)
    relay.remember_checkpoint(runs, "r2", str(current), str(storage), 1)
    assert relay.earlier_checkpoint(runs, "r1") == {"path": str(earlier), "storage": str(storage), "step": 2}
    # r1 finished in a later grid: the earlier grid's checkpoint goes with the note
    relay.forget_checkpoint(runs, "r1", keep_under=str(storage / "grid-2"))
    assert not earlier.exists() and relay.earlier_checkpoint(runs, "r1") is None
    # r2's checkpoint is the running grid's own: Ray Tune prunes it, the note goes
    relay.forget_checkpoint(runs, "r2", keep_under=str(storage / "grid-2"))
    assert current.is_dir() and not (runs / relay.RESUME_DIR).exists()
    (runs / relay.RESUME_DIR).mkdir()
    relay.index_path(runs, "r3").write_text("{broken")
    assert relay.earlier_checkpoint(runs, "r3") is None
