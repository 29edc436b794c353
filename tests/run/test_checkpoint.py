"""Checkpoint/resume: a run killed after an evaluation point continues with the SAME numbers.

Smoke profile (tiny random BERT) on the mini STS data, with the real STS-B dev evaluation and the real
final STS evaluation. The in-process tests "kill" the run right after its first checkpoint (an
exception no ``except Exception`` catches, as a signal would), resume it, and compare the record
with an uninterrupted run's: trajectory (timings aside), best step and score, final numbers. The
subprocess test SIGKILLs ``harness train`` once its first checkpoint exists.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import harness.run.checkpoint as ckpt
from harness.errors import ConfigError
from harness.run.training import train_run
from harness.store.run_config import resolve_config
from harness.store.run_store import RunStore
from methods import REGISTRY
from tests.helpers import REPO_ROOT, make_data_root

CORPUS_TEXT = "".join(f"fixture sentence number {i} for the corpus, with words {i % 7}.\n" for i in range(96))
TIMING_KEYS = ("elapsed_s", "probe_s")


class Killed(BaseException):
    """Stands for a signal: not an Exception, so nothing in the run swallows it."""


@pytest.fixture
def root(mini_data_root: Path, tmp_path: Path) -> Path:
    return make_data_root(tmp_path / "data", mini_data_root / "senteval", link=True, corpus=CORPUS_TEXT)


@pytest.fixture
def momentum_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-only stateful method (frozen momentum copy + queue buffers) of tests/methods."""
    path = REPO_ROOT / "tests" / "methods" / "momentum_method.py"
    spec = importlib.util.spec_from_file_location("momentum_method_for_resume", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    monkeypatch.setitem(REGISTRY, "momentum_queue", module.MomentumQueue)


def comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    trajectory = [{k: v for k, v in p.items() if k not in TIMING_KEYS} for p in record["trajectory"]]
    return {
        "trajectory": trajectory,
        "best_step": record["best_step"],
        "best_stsb_dev": record["best_stsb_dev"],
        "final": record["final"],
    }


@pytest.mark.parametrize("method", ["simcse", "whitenedcse", "noise_probe", "momentum_queue"])
def test_a_resumed_run_gives_the_same_numbers(
    method: str,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    momentum_registered: None,
) -> None:
    params = {"noise_probe": {"variant": "pos_plus_noise"}}.get(method)
    config = resolve_config(method, params, "smoke", {"max_steps": 6, "eval_every": 2}, data_root=root)
    straight = train_run(config, root, RunStore(tmp_path / "a"), device="cpu", num_threads=1, log=None)
    assert straight["status"] == "finished"
    assert not ckpt.checkpoint_path(tmp_path / "a", config.run_id()).exists()  # deleted at the end

    store = RunStore(tmp_path / "b")
    path = ckpt.checkpoint_path(store.root, config.run_id())
    real_save = ckpt.save_checkpoint

    def save_then_die(target: Path, state: dict[str, Any]) -> Path:
        real_save(target, state)
        raise Killed(f"killed after step {state['step']}")

    monkeypatch.setattr(ckpt, "save_checkpoint", save_then_die)
    with pytest.raises(Killed, match="after step 2"):
        train_run(config, root, store, device="cpu", num_threads=1, log=None)
    monkeypatch.setattr(ckpt, "save_checkpoint", real_save)
    assert path.is_file()
    assert [p["step"] for p in store.load(config.run_id())["trajectory"]] == [0, 2]  # type: ignore[index]

    lines: list[str] = []
    points: list[Mapping[str, Any]] = []
    resumed = train_run(
        config, root, store, device="cpu", num_threads=1, log=lines.append, on_point=points.append
    )
    assert any("resumed from the checkpoint at step 2/6" in ln for ln in lines)
    # the hook (a grid's progress line) hears the point it resumed from first, then the new ones
    assert [(p["step"], p["total_steps"]) for p in points] == [(2, 6), (4, 6), (6, 6)]
    assert [p.get("resumed_from_step") for p in points] == [2, None, None]
    assert resumed["status"] == "finished" and resumed["resumed_from_step"] == 2
    assert comparable(resumed) == comparable(straight)
    assert not path.exists()


def test_a_checkpoint_of_another_config_is_not_loaded(root: Path, tmp_path: Path) -> None:
    config = resolve_config("simcse", None, "smoke", {"max_steps": 2, "eval_every": 2}, data_root=root)
    path = ckpt.checkpoint_path(tmp_path / "runs", config.run_id())
    ckpt.save_checkpoint(path, {"config": {"other": True}, "step": 2})
    lines: list[str] = []
    record = train_run(config, root, RunStore(tmp_path / "runs"), device="cpu", log=lines.append)
    assert any("starting from step 0" in ln and "another configuration" in ln for ln in lines)
    assert [p["step"] for p in record["trajectory"]] == [0, 2] and "resumed_from_step" not in record
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"truncated")
    state, why = ckpt.load_checkpoint(path, config.to_dict())
    assert state is None and why is not None and "unreadable checkpoint" in why


def test_rng_states_round_trip() -> None:
    import random

    import numpy as np
    import torch

    state = ckpt.rng_state()
    first = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    ckpt.set_rng_state(state)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == first


def test_sigkill_of_harness_train_then_resume(root: Path, tmp_path: Path) -> None:
    """A real SIGKILL once the first checkpoint exists; the re-run resumes and matches a straight run."""
    common = ["--profile", "smoke", "--max-steps", "8", "--eval-every", "2", "--data-dir", str(root)]
    common += ["--threads", "1", "--device", "cpu"]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    cmd = [sys.executable, "-m", "harness.cli", "train"]
    config = resolve_config("simcse", None, "smoke", {"max_steps": 8, "eval_every": 2}, data_root=root)
    runs = tmp_path / "runs"
    path = ckpt.checkpoint_path(runs, config.run_id())
    victim = subprocess.Popen([*cmd, *common, "--runs-dir", str(runs)], env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not path.exists() and victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert victim.poll() is None, "the run ended before it could be killed"
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        victim.kill()
    killed = RunStore(runs).load(config.run_id())
    assert killed is not None and killed["status"] == "running"  # a SIGKILL leaves it so
    done = subprocess.run([*cmd, *common, "--runs-dir", str(runs)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    straight = train_run(config, root, RunStore(tmp_path / "straight"), device="cpu", num_threads=1, log=None)
    resumed = RunStore(runs).load(config.run_id())
    assert resumed is not None and resumed["resumed_from_step"] >= 2
    assert comparable(resumed) == comparable(straight)
    assert not path.exists()


@pytest.mark.parametrize(("stop", "status"), [(Killed, "failed"), (KeyboardInterrupt, "interrupted")])
def test_rerunning_a_finished_run_never_replaces_its_record(
    stop: type[BaseException],
    status: str,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`harness train` on a finished run id that fails or is interrupted: the finished record stays."""
    config = resolve_config("simcse", None, "smoke", {"max_steps": 4, "eval_every": 2}, data_root=root)
    store = RunStore(tmp_path / "runs")
    done = train_run(config, root, store, device="cpu", num_threads=1, log=None)
    real_save = ckpt.save_checkpoint

    def save_then_stop(target: Path, state: dict[str, Any]) -> Path:
        real_save(target, state)
        raise stop("stopped")

    monkeypatch.setattr(ckpt, "save_checkpoint", save_then_stop)
    with pytest.raises(stop):
        train_run(config, root, store, device="cpu", num_threads=1, log=None)
    kept = store.load(config.run_id())
    assert kept == done  # byte for byte the finished record
    attempts = store.attempts(config.run_id())
    assert [(a["status"], a["attempt"]) for a in attempts] == [(status, 1)]
    assert [p["step"] for p in attempts[0]["trajectory"]] == [0, 2]


def test_checkpoint_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    clock = ckpt.CheckpointClock(every_s=60)
    assert not clock.due(0, 10)  # step 0: nothing trained yet
    assert clock.due(2, 10)  # the first evaluation point always
    now[0] += 30
    assert not clock.due(4, 10)
    now[0] += 31
    assert clock.due(6, 10)
    now[0] += 1
    assert clock.due(10, 10)  # the last step always
    monkeypatch.setenv(ckpt.EVERY_ENV, "0")
    every = ckpt.CheckpointClock()
    assert every.every_s == 0 and every.due(2, 10) and every.due(4, 10)


def test_a_run_takes_the_interval_its_command_read_not_its_own_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A grid's trial runs where the driver's environment is not (another node): the driver's value
    is the one its runs use; the run's own environment is not read again, and never leniently."""
    monkeypatch.setenv(ckpt.EVERY_ENV, "-5")  # the node's own: would be refused if it were read
    with ckpt.checkpoint_every(12.0):
        assert ckpt.CheckpointClock().every_s == 12.0
    for bad in ("oops", "-5", "1_0"):  # a run started without a command (the Python API): one rule
        monkeypatch.setenv(ckpt.EVERY_ENV, bad)
        with pytest.raises(ConfigError, match=f"HARNESS_CHECKPOINT_EVERY_S must be .*got {bad!r}"):
            ckpt.CheckpointClock()


def test_a_good_checkpoint_interval_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ckpt.EVERY_ENV, " 0 ")
    assert ckpt.every_from_env() == 0.0
    monkeypatch.setenv(ckpt.EVERY_ENV, "")
    assert ckpt.every_from_env() == ckpt.DEFAULT_EVERY_S


def test_a_finished_run_removes_its_checkpoint_file_and_nothing_else(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    path = ckpt.save_checkpoint(ckpt.checkpoint_path(runs, "r1"), {"step": 1})
    (runs / "resume" / "r2.json").write_text("{}")  # another run's note keeps the folder
    ckpt.remove_checkpoint(runs, "r1")
    assert not path.exists() and (runs / "resume" / "r2.json").is_file()
    (runs / "resume" / "r2.json").unlink()
    # a folder, or a link to a file of the user's, where the checkpoint file would be: left alone
    user = tmp_path / "user.pt"
    user.write_bytes(b"mine")
    ckpt.checkpoint_path(runs, "r2").mkdir()
    ckpt.checkpoint_path(runs, "r3").symlink_to(user)
    with pytest.warns(RuntimeWarning, match=r"r2\.pt alone.*it is a folder"):
        ckpt.remove_checkpoint(runs, "r2")
    with pytest.warns(RuntimeWarning, match=r"r3\.pt alone.*it is a link"):
        ckpt.remove_checkpoint(runs, "r3")
    assert ckpt.checkpoint_path(runs, "r2").is_dir() and ckpt.checkpoint_path(runs, "r3").is_symlink()
    ckpt.checkpoint_path(runs, "r2").rmdir()
    ckpt.checkpoint_path(runs, "r3").unlink()
    ckpt.remove_checkpoint(runs, "r4")  # nothing of r4's: the empty resume folder goes
    assert user.read_bytes() == b"mine" and not (runs / "resume").exists()
