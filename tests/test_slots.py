"""harness.grid.slots: the threads a grid hands its last runs' final evaluations, and the loop's side
(``train_run(final_threads=...)``): more threads only in the final evaluation, said in the record."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness.run.training as train_mod
from harness.config.run_config import resolve_config
from harness.grid.slots import PENDING, SlotBoard
from harness.grid.tune.callbacks import TuneProgress
from harness.run.training import train_run
from harness.store.run_store import RunStore

SENTENCES = ["a man plays a guitar .", "a man is playing music .", "a cat sleeps .", "rain falls ."]


def test_no_threads_are_handed_out_while_runs_wait_or_without_the_driver(tmp_path: Path) -> None:
    board = SlotBoard(tmp_path / "board")
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
    board = SlotBoard(tmp_path / "board")
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
    board = SlotBoard(tmp_path / "board")
    board.path.mkdir()
    (board.path / PENDING).write_text("lots")
    assert board.pending() is None and board.threads(1, cores=8) == 1


class _Trial:
    def __init__(self, run_id: str) -> None:
        self.config = {"run_entry": {"run_id": run_id}}


def test_the_driver_counts_the_runs_not_started_once_each(tmp_path: Path) -> None:
    board = SlotBoard(tmp_path / "board")
    progress = TuneProgress(3, RunStore(tmp_path / "runs"), lambda _line: None)
    progress.board = board
    board.set_pending(3)
    for run_id, left in (("a", 2), ("b", 1), ("a", 1), ("c", 0)):  # "a" again: a retried trial
        progress.on_trial_start(0, [], _Trial(run_id))
        assert board.pending() == left


def _probe(data_root: Path, token_lengths: Any = None) -> Callable[..., dict[str, float]]:
    def probe(embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        x = embed(list(SENTENCES)).astype(np.float64)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return {"stsb_dev": float(100 * x[0] @ x[1]), "align": 0.0, "uniform": 0.0}

    return probe


def test_the_final_evaluation_alone_runs_on_the_threads_handed_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, int] = {}

    def final(
        embed: Callable[[list[str]], np.ndarray], data_root: Path, tasks: str, mode: str
    ) -> dict[str, Any]:
        seen["final"] = torch.get_num_threads()
        x = embed(list(SENTENCES)).astype(np.float64)
        return {"sts": {"STSB": float(x[0] @ x[1]), "avg": float(x[0] @ x[1])}}

    monkeypatch.setattr(train_mod, "make_probe", _probe)
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final)
    data_root = tmp_path / "data"
    (data_root / "corpus").mkdir(parents=True)
    (data_root / "corpus" / "nli-sentences.txt").write_text("\n".join(SENTENCES * 10) + "\n")
    config = resolve_config("simcse", None, "smoke", {"max_steps": 2, "eval_every": 2}, data_root=data_root)
    assert config.threads == 1
    before = torch.get_num_threads()
    plain = train_run(config, data_root, None, device="cpu", log=None)
    asked: list[int] = []

    def two() -> int:
        asked.append(torch.get_num_threads())  # asked once, as the final evaluation starts
        return 2

    handed = train_run(config, data_root, None, device="cpu", log=None, final_threads=two)
    assert asked == [1] and seen["final"] == 2 and handed["final_threads"] == 2
    assert "final_threads" not in plain
    assert handed["final"]["sts"]["avg"] == pytest.approx(plain["final"]["sts"]["avg"], abs=1e-5)
    assert handed["best_stsb_dev"] == plain["best_stsb_dev"]  # training kept its one thread
    assert torch.get_num_threads() == before
    one = train_run(config, data_root, None, device="cpu", log=None, final_threads=lambda: 1)
    assert "final_threads" not in one  # no more than its own: nothing to say
