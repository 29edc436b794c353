"""What a grid's trials hand back to the driver (no Ray here): records as report text, the driver's
notes of resume checkpoints, and the grid options that choose where checkpoints go and which nodes
take trials (one error line, exit 2, before any plan)."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_roots import make_data_root

from harness.cli import main
from harness.grid import relay
from harness.store.run_store import RunStore

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "tests" / "fixtures" / "specs" / "smoke_grid.toml"


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


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--trial-resources", "worker_node"], "--trial-resources expects NAME=N with N > 0"),
        (["--trial-resources", "worker_node=0"], "--trial-resources expects NAME=N with N > 0"),
        (["--trial-resources", "worker_node=nan"], "--trial-resources expects NAME=N with N > 0"),
        (["--trial-resources", "GPU=1"], "set CPUs and GPUs with --cpus-per-trial / --gpus-per-trial"),
        (["--max-failures", "-1"], "--max-failures must be between 0 and 100, got -1"),
        (["--storage", "nosuchscheme://bucket/path"], "--storage nosuchscheme://bucket/path: pyarrow cannot"),
    ],
)
def test_cluster_options_are_checked_before_any_plan(
    flags: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_data_root(tmp_path / "data")
    argv = ["grid", str(SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs")]
    assert main([*argv, *flags, "--dry-run"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and expected in lines[0], captured.err
