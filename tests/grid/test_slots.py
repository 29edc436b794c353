"""harness.grid.slots: the threads a grid hands its last runs' final evaluations: none while runs wait
or without the driver, the cores shared among the live trials, a bad pending file handing out
nothing. (The driver's count: tests/grid/tune/test_callbacks.py; the loop's side,
``train_run(final_threads=...)``: tests/run/test_training.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.grid.slots import PENDING, SlotBoard


def test_no_threads_are_handed_out_while_runs_wait_or_without_the_driver(tmp_path: Path) -> None:
    board = SlotBoard(tmp_path / "harness-slots-g")
    with board.joined():
        assert board.threads(1, cores=2) == 1  # no pending file: another node, or no driver
        board.set_pending(1)
        assert board.threads(1, cores=2) == 1  # a run still waits: its trial takes the free slot
        board.set_pending(0)
        assert board.live() == 1
        assert board.threads(1, cores=2) == 2  # alone on the node: both cores
        assert board.threads(1, cores=4) == 4
        assert board.threads(3, cores=2) == 3  # never fewer than its own
    assert board.live() == 0 and not (board.path / str(os.getpid())).exists()


def test_the_cores_are_shared_among_the_live_trials_and_a_dead_ones_file_is_not_counted(
    tmp_path: Path,
) -> None:
    board = SlotBoard(tmp_path / "harness-slots-g")
    board.set_pending(0)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (board.path / str(other.pid)).touch()  # another trial, alive
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
        (board.path / dead.stdout.decode().strip()).touch()  # a killed trial's file, left behind
        with board.joined():
            assert board.live() == 2
            assert board.threads(1, cores=2) == 1
            assert board.threads(1, cores=5) == 2
            other.kill()
            other.wait()
            assert board.live() == 1 and board.threads(1, cores=2) == 2
    finally:
        other.kill()
    board.remove()
    assert not board.path.exists()


def test_a_bad_pending_file_hands_out_nothing(tmp_path: Path) -> None:
    board = SlotBoard(tmp_path / "harness-slots-g")
    board.path.mkdir()
    (board.path / PENDING).write_text("lots")
    assert board.pending() is None and board.threads(1, cores=8) == 1


def test_a_board_folder_holding_anything_else_is_left_with_a_warning(tmp_path: Path) -> None:
    board = SlotBoard(tmp_path / "harness-slots-g")
    board.set_pending(2)
    (board.path / "notes.txt").write_text("mine")
    with pytest.warns(RuntimeWarning, match=f"left {board.path} alone.*it holds notes.txt"):
        board.remove()
    assert (board.path / "notes.txt").read_text() == "mine"
    (board.path / "notes.txt").unlink()
    board.remove()
    assert not board.path.exists()
