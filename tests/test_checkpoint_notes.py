"""A run resumed from an earlier grid's checkpoint leaves it behind nowhere: the driver drops it as
soon as the run's next checkpoint is noted (it used to stay when that came before the run's finished
record, e.g. a driver killed after both runs had checkpointed, then the grid run again)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.grid.relay import earlier_checkpoint, remember_checkpoint
from harness.grid.tune.callbacks import TuneProgress
from harness.store.run_store import RunStore


def test_the_earlier_grids_checkpoint_goes_once_the_run_checkpoints_again(tmp_path: Path) -> None:
    runs, storage = tmp_path / "runs", tmp_path / "tune"
    old = storage / "grid-1" / "r-1_00000" / "checkpoint_000000"
    new = storage / "grid-2" / "r-1_00000" / "checkpoint_000001"
    for folder in (old, new):
        folder.mkdir(parents=True)
        (folder / "r-1.pt").write_bytes(b"state")
    remember_checkpoint(runs, "r-1", str(old), str(storage), 2)
    progress = TuneProgress(1, RunStore(runs), lambda _line: None)
    progress.storage = str(storage)
    progress.unwritable = {}
    trial = SimpleNamespace(
        config={"run_entry": {"run_id": "r-1"}},
        last_result={"resume_step": 4},
        storage=SimpleNamespace(experiment_fs_path=str(storage / "grid-2")),
    )
    progress.on_checkpoint(1, [], trial, SimpleNamespace(path=str(new)))
    note = earlier_checkpoint(runs, "r-1")
    assert note is not None and note["path"] == str(new) and note["step"] == 4
    assert not old.exists() and (new / "r-1.pt").is_file()
    # a checkpoint of this grid's own folder stays for Ray Tune to prune
    newer = storage / "grid-2" / "r-1_00000" / "checkpoint_000002"
    newer.mkdir()
    progress.on_checkpoint(2, [], trial, SimpleNamespace(path=str(newer)))
    assert new.is_dir() and earlier_checkpoint(runs, "r-1")["path"] == str(newer)  # type: ignore[index]
