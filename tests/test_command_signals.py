"""SIGTERM (``kill PID``) stops every command as Ctrl-C does: ``harness train`` marks its record
``interrupted``, keeps its resume checkpoint, says so in one line and exits 130 (it used to die at
once, its record left ``running``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from data_roots import make_data_root

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_sigterm_stops_train_cleanly(mini_data_root: Path, tmp_path: Path) -> None:
    data = make_data_root(tmp_path / "data", mini_data_root / "senteval")
    runs = tmp_path / "runs"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HARNESS_CHECKPOINT_EVERY_S="0")
    args = [sys.executable, "-m", "harness.cli", "train", "--profile", "smoke", "--data-dir", str(data)]
    args += ["--output-dir", str(runs), "--final-tasks", "none", "--eval-every", "2"]
    train = subprocess.Popen(
        [*args, "--max-steps", "100000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300
        record: dict = {}
        while time.monotonic() < deadline and len(record.get("trajectory") or []) < 3:
            time.sleep(0.5)
            for path in (runs / "records").glob("*.json"):
                try:
                    record = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
        assert len(record.get("trajectory") or []) >= 3, "the run made no evaluation point"
        train.send_signal(signal.SIGTERM)
        out, err = train.communicate(timeout=120)
    finally:
        if train.poll() is None:
            train.kill()
    assert train.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == "harness train: interrupted" and "Traceback" not in err
    run_id = record["run_id"]
    saved = json.loads((runs / "records" / f"{run_id}.json").read_text(encoding="utf-8"))
    assert saved["status"] == "interrupted" and saved["error"].startswith("KeyboardInterrupt")
    assert (runs / "resume" / f"{run_id}.pt").is_file()  # the same command resumes from it


def test_an_interrupt_waits_until_the_file_being_written_is_whole(tmp_path: Path) -> None:
    import pytest

    from harness.atomic import atomic_write
    from harness.grid.signals import sigterm_as_interrupt

    target = tmp_path / "checkpoint.bin"
    with pytest.raises(KeyboardInterrupt, match="signal 15"), sigterm_as_interrupt():
        with atomic_write(target, "wb") as handle:
            handle.write(b"first half ")
            os.kill(os.getpid(), signal.SIGTERM)  # handled here, in the main thread
            time.sleep(0.1)
            handle.write(b"second half")
        raise AssertionError("the interrupt came after the write, before this line")
    assert target.read_bytes() == b"first half second half"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.bin"]


def test_an_interrupted_export_leaves_its_folder_whole_or_absent(tmp_path: Path) -> None:
    import pytest

    from harness.atomic import atomic_folder
    from harness.grid.signals import sigterm_as_interrupt

    target = tmp_path / "exported"
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt(), atomic_folder(target) as building:
        (building / "config.json").write_text("{}")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        (building / "model.safetensors").write_bytes(b"weights")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["exported"]  # no temporary folder left
