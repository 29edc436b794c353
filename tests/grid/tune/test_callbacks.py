"""The Ray Tune callbacks: the progress callback survives Tune's pickling and beats between reports,
and drops an earlier grid's checkpoint once the run checkpoints again; with a node lost, it prints
while nothing runs and stops the grid after the wait; it counts the runs not started for the slot
board; wandb's callback is built offline under the runs folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.atomic import WriteError
from harness.grid.capacity import CapacityWatch
from harness.grid.options import GridRequest
from harness.grid.progress.tracking import Tracking
from harness.grid.relay import earlier_checkpoint, remember_checkpoint
from harness.grid.slots import SlotBoard
from harness.grid.tune import callbacks, driver
from harness.grid.tune.callbacks import TuneProgress
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from tests.helpers import FIXTURES, HEAD, NEED, SMOKE_CLUSTER, WORKER, Clock, make_corpus_root, timed_train


def test_track_wandb_builds_rays_callback_offline_under_the_runs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray's WandbLoggerCallback refuses to be built without wandb: a stand-in records its arguments."""
    import ray.air.integrations.wandb as ray_wandb

    import harness.grid.tune.callbacks as tune

    built: list[dict[str, object]] = []

    def stand_in(**kwargs: object) -> dict[str, object]:
        built.append(kwargs)
        return kwargs

    monkeypatch.setattr(ray_wandb, "WandbLoggerCallback", stand_in)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert tune.tracker_callbacks(None, "g") == []
    (callback,) = tune.tracker_callbacks(Tracking(("wandb",), tmp_path / "runs"), "cpu_demo")
    assert callback is built[0]
    assert built == [
        {
            "project": "cse-harness",
            "group": "cpu_demo",
            "dir": str((tmp_path / "runs" / "wandb").resolve()),
            "mode": "offline",
            "excludes": ["record"],
        }
    ]
    assert (tmp_path / "runs" / "wandb").is_dir()


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


def test_a_heartbeat_line_comes_while_a_trial_trains_between_its_reports(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tune calls the progress callback between results too: a silent trial still gets lines."""
    import harness.grid.progress.report as progress

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
    data_root = make_corpus_root(tmp_path / "data")
    plan = expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", data_root=data_root)
    config = plan.runs[0].config
    lines: list[str] = []
    report = driver.run_trials(
        [config],
        data_root,
        RunStore(tmp_path / "runs"),
        GridRequest(SMOKE_CLUSTER, timed_train, lines.append),
    )
    assert report.finished == 1
    beats = [ln for ln in lines if "| running: " in ln]
    assert beats and all(f"| running: {config.run_id()} starting" in ln for ln in beats), lines


# -- an earlier grid's checkpoint, dropped once the run checkpoints again ------------------------------
# A run resumed from an earlier grid's checkpoint leaves it behind nowhere: the driver drops it as
# soon as the run's next checkpoint is noted (it used to stay when that came before the run's finished
# record, e.g. a driver killed after both runs had checkpointed, then the grid run again).


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


def checkpointing_trial(storage: Path) -> SimpleNamespace:
    return SimpleNamespace(
        config={"run_entry": {"run_id": "r-1"}},
        last_result={"resume_step": 4},
        storage=SimpleNamespace(experiment_fs_path=str(storage / "grid-2")),
    )


def test_a_note_naming_a_folder_of_the_user_is_replaced_and_the_folder_stays(tmp_path: Path) -> None:
    runs, storage = tmp_path / "runs", tmp_path / "tune"
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "r-1.pt").write_text("mine")
    remember_checkpoint(runs, "r-1", str(user), str(tmp_path / "elsewhere"), 2)
    progress = TuneProgress(1, RunStore(runs), lambda _line: None)
    progress.storage, progress.unwritable = str(storage), {}
    new = storage / "grid-2" / "r-1_00000" / "checkpoint_000001"
    with pytest.warns(RuntimeWarning, match=f"left {user} alone"):
        progress.on_checkpoint(1, [], checkpointing_trial(storage), SimpleNamespace(path=str(new)))
    assert (user / "r-1.pt").read_text() == "mine"
    assert earlier_checkpoint(runs, "r-1")["path"] == str(new)  # type: ignore[index]


def test_tunes_copy_of_a_saved_encoder_goes_and_nothing_else(tmp_path: Path) -> None:
    import pyarrow.fs

    runs, storage = tmp_path / "runs", tmp_path / "tune"
    progress = TuneProgress(1, RunStore(runs), lambda _line: None)
    progress.storage = str(storage)
    tunes = storage / "grid-2" / "r-1_00000" / "checkpoint_000002"
    user = tmp_path / "my-model"
    for folder in (tunes, user):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")

    def checkpoint(path: Path) -> SimpleNamespace:
        copy = lambda into: (Path(into) / "config.json").write_text("{}")  # noqa: E731
        return SimpleNamespace(path=str(path), filesystem=pyarrow.fs.LocalFileSystem(), to_directory=copy)

    progress._fetch_model("r-1", checkpoint(tunes))
    assert not tunes.exists() and (runs / "checkpoints" / "r-1" / "config.json").is_file()
    with pytest.warns(RuntimeWarning, match=f"left {user} alone.*not inside {storage}"):
        progress._fetch_model("r-1", checkpoint(user))
    assert (user / "config.json").is_file()
    # the driver's copy replaces only an earlier saved encoder, not a folder of the user's there
    (runs / "checkpoints" / "r-1" / "config.json").rename(runs / "checkpoints" / "r-1" / "mine.json")
    with pytest.raises(WriteError, match="is not a saved encoder the harness wrote"):
        progress._fetch_model("r-1", checkpoint(user))
    assert [p.name for p in (runs / "checkpoints" / "r-1").iterdir()] == ["mine.json"]


# -- a lost node: the waiting lines and the grid's stop ------------------------------------------------
def trial(run_id: str, status: str) -> Any:
    factory = SimpleNamespace(required_resources=dict(NEED))
    return SimpleNamespace(
        status=status, placement_group_factory=factory, config={"run_entry": {"run_id": run_id}}
    )


def test_the_callback_prints_while_nothing_runs_and_stops_the_grid_after_the_wait(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = Clock()
    lines: list[str] = []
    progress = callbacks.TuneProgress(2, RunStore(tmp_path / "runs"), lines.append, clock=clock)
    progress.capacity = CapacityWatch(120.0, clock)
    stopper = callbacks.GridStopper(progress)
    nodes = [HEAD, WORKER]
    monkeypatch.setattr(callbacks, "alive_nodes", lambda: list(nodes))
    progress.capacity.observe(nodes, {})
    trials = [trial("a-1", "RUNNING"), trial("b-2", "PENDING")]
    progress.on_step_end(1, trials)
    assert lines == [] and not stopper.stop_all()
    nodes.remove(WORKER)
    trials[0].status = "PENDING"  # Tune retries it: it waits like the other
    clock.now += 5
    progress.on_step_end(2, trials)
    assert "Ray node 127.0.0.1 (wwwwwwww) lost" in lines[0] and "waiting up to 120 s" in lines[1]
    for _ in range(7):  # a line every 15 s, with nothing running
        clock.now += 15
        progress.on_step_end(3, trials)
    waiting = [ln for ln in lines if "| waiting for a node with worker_node=1: 0 of 1 node(s) left" in ln]
    assert len(waiting) == 7 and waiting[-1].endswith("105 s of 120 s"), lines
    assert not stopper.stop_all()
    clock.now += 15
    progress.on_step_end(4, trials)
    assert stopper.stop_all()
    assert progress.capacity_stop is not None and "no Ray node with worker_node=1" in progress.capacity_stop


def test_the_grid_waits_for_runs_still_running_before_it_stops(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = Clock()
    progress = callbacks.TuneProgress(2, RunStore(tmp_path / "runs"), lambda _line: None, clock=clock)
    progress.capacity = CapacityWatch(10.0, clock)
    monkeypatch.setattr(callbacks, "alive_nodes", lambda: [HEAD])
    progress.capacity.observe([HEAD, WORKER], {})
    trials = [trial("a-1", "RUNNING"), trial("b-2", "PENDING")]
    progress.on_step_end(1, trials)
    clock.now += 60
    progress.on_step_end(2, trials)
    assert progress.capacity.expired() and progress.capacity_stop is None  # a-1 still works on a node left
    trials[0].status = "TERMINATED"
    clock.now += 3
    progress.on_step_end(3, trials)
    assert progress.capacity_stop is not None


# -- the slot board: the runs not started, counted once each -------------------------------------------
class _Trial:
    def __init__(self, run_id: str) -> None:
        self.config = {"run_entry": {"run_id": run_id}}


def test_the_driver_counts_the_runs_not_started_once_each(tmp_path: Path) -> None:
    board = SlotBoard(tmp_path / "harness-slots-g")
    progress = TuneProgress(3, RunStore(tmp_path / "runs"), lambda _line: None)
    progress.board = board
    board.set_pending(3)
    for run_id, left in (("a", 2), ("b", 1), ("a", 1), ("c", 0)):  # "a" again: a retried trial
        progress.on_trial_start(0, [], _Trial(run_id))
        assert board.pending() == left
