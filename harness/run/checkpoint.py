"""Resumable runs: a checkpoint at every evaluation point, so a killed run continues where it was.

A checkpoint is one ``torch.save`` file, ``<runs>/resume/<run_id>.pt``, written atomically (temporary
file + :func:`os.replace`) right after each STS-B dev evaluation. It holds everything the rest of the
run depends on:

* ``step``: the last optimiser step done (the batch stream is a pure function of the seed, so the
  stream resumes by skipping ``step`` batches);
* the encoder's and the method's ``state_dict`` (buffers included: running whitening statistics,
  ...), the optimiser's and the scheduler's;
* the random states of Python, NumPy and torch (CPU and every CUDA device);
* the best state so far (its step, score and CPU copies of both state dicts);
* the record's trajectory, best step and score, and the train/eval seconds so far;
* the run's config (``RunConfig.to_dict()``): a checkpoint of another config is never loaded.

A resumed run therefore produces the same trajectory and final numbers as an uninterrupted one
(timings aside). The checkpoint is deleted when the run finishes: that file alone, a regular file
in ``<runs>/resume`` (:mod:`harness.removal`; anything else there is left with a warning).

Writing a bert-base checkpoint (encoder, optimiser moments and best state: about 1.7 GB) costs
seconds, so not every evaluation point writes one: the first one does, then one at most every
:data:`DEFAULT_EVERY_S` seconds (``$HARNESS_CHECKPOINT_EVERY_S``; 0 = every evaluation point), and
the last step always does (the final evaluation that follows can be long). A killed run loses at most
that much training.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import re
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.atomic import atomic_write
from harness.coerce import read_number
from harness.errors import ConfigError
from harness.removal import Shape, remove_owned

FORMAT_VERSION = 1
DEFAULT_EVERY_S = 300.0
EVERY_ENV = "HARNESS_CHECKPOINT_EVERY_S"


def every_from_env() -> float:
    """``$HARNESS_CHECKPOINT_EVERY_S`` (unset or empty: :data:`DEFAULT_EVERY_S`), read where a command
    starts (``harness train``, the grid's options) and handed to the runs (:func:`checkpoint_every`).

    Raises:
        ConfigError: not a number of seconds >= 0, naming the variable.
    """

    text = os.environ.get(EVERY_ENV, "").strip()
    if not text:
        return DEFAULT_EVERY_S
    try:
        every = float(read_number(text, float))
    except ValueError:
        every = math.nan
    if not 0 <= every < math.inf:
        raise ConfigError(
            f"{EVERY_ENV} must be a number of seconds >= 0 (0 = at every evaluation), got {text!r}"
        )
    return every


_EVERY_S: ContextVar[float | None] = ContextVar("checkpoint_every_s", default=None)
"""The interval the command that started the runs read (:func:`checkpoint_every`), if any."""


@contextlib.contextmanager
def checkpoint_every(every_s: float) -> Iterator[None]:
    """Runs started inside write their resume checkpoints at most every ``every_s`` seconds (the
    value the command read once: a grid's trials get the driver's, not their node's environment)."""
    token = _EVERY_S.set(every_s)
    try:
        yield
    finally:
        _EVERY_S.reset(token)


class CheckpointClock:
    """Decides at which evaluation points a checkpoint is written (see the module docstring).

    ``every_s``: seconds between two checkpoints; None = the command's (:func:`checkpoint_every`), or
    for a run started without one (the Python API) ``$HARNESS_CHECKPOINT_EVERY_S`` read here.
    """

    def __init__(self, every_s: float | None = None) -> None:
        if every_s is None:
            every_s = _EVERY_S.get()
        self.every_s = every_from_env() if every_s is None else every_s
        self.last: float | None = None

    def due(self, step: int, total: int) -> bool:
        """Whether the evaluation point at ``step`` (of ``total``) writes a checkpoint."""

        if step <= 0:
            return False
        now = time.monotonic()
        if self.last is None or step >= total or now - self.last >= self.every_s:
            self.last = now
            return True
        return False


def checkpoint_path(store_root: Path | str, run_id: str) -> Path:
    """Where the resume checkpoint of ``run_id`` lives under a run store folder."""
    return Path(store_root) / "resume" / f"{run_id}.pt"


def rng_state() -> dict[str, Any]:
    """The random states of Python, NumPy and torch (CPU and every CUDA device)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus the format version and RNG states) atomically to ``path``."""
    payload = {"format": FORMAT_VERSION, "rng": rng_state(), **state}
    with atomic_write(path, "wb") as handle:
        torch.save(payload, handle)
    return path


def load_checkpoint(path: Path, config: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The checkpoint at ``path`` if it belongs to ``config``; else ``(None, why not)``.

    A missing file gives ``(None, None)``; an unreadable one or one of another config or format gives
    ``(None, reason)`` so the caller can say why it starts from step 0.
    """
    if not path.is_file():
        return None, None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file: start again, say why
        return None, f"unreadable checkpoint {path} ({type(exc).__name__}: {exc})"
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        return None, f"checkpoint {path} has another format"
    if state.get("config") != config:
        return None, f"checkpoint {path} belongs to another configuration"
    return state, None


def training_state(
    *,
    config: dict[str, Any],
    step: int,
    encoder: torch.nn.Module,
    method: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    best: dict[str, Any],
    record: Mapping[str, Any],
    train_time: float,
    eval_time: float,
    scaler: torch.amp.GradScaler | None = None,
) -> dict[str, Any]:
    """What :func:`save_checkpoint` stores at an evaluation point (RNG states are added there);
    ``scaler``: an fp16 run's loss scale and its count of clean steps."""
    return {
        **({"scaler": scaler.state_dict()} if scaler is not None else {}),
        "config": config,
        "step": step,
        "encoder": encoder.state_dict(),
        "method": method.state_dict(),  # everything: buffers and frozen copies too
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "best": dict(best),
        "record": {k: record.get(k) for k in ("trajectory", "best_step", "best_stsb_dev")},
        "train_time": train_time,
        "eval_time": eval_time,
    }


def restore_training_state(
    state: dict[str, Any],
    *,
    encoder: torch.nn.Module,
    method: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    best: dict[str, Any],
    record: Any,
    scaler: torch.amp.GradScaler | None = None,
) -> int:
    """Load a checkpoint's state into a freshly built run; return its step.

    The random states are NOT restored here: call :func:`set_rng_state` with ``state["rng"]`` last,
    after everything that draws random numbers while it is built.
    """
    encoder.load_state_dict(state["encoder"])
    method.load_state_dict(state["method"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and "scaler" in state:
        scaler.load_state_dict(state["scaler"])
    best.clear()
    best.update(state["best"])
    record.update(state["record"])
    return int(state["step"])


def remove_checkpoint(store_root: Path | str, run_id: str) -> None:
    """Delete ``run_id``'s checkpoint (the run finished), and ``<runs>/resume`` once it is empty."""
    path = checkpoint_path(store_root, run_id)
    remove_owned(path, [path.parent], Shape(f"resume checkpoint of {run_id}", re.escape(path.name)))
    remove_owned(path.parent, [store_root], RESUME_FOLDER)


RESUME_FOLDER = Shape("resume folder", "resume", folder=True, empty=True)
"""``<runs>/resume``: removed once it is empty (other runs' checkpoints and notes keep it)."""


__all__ = [
    "DEFAULT_EVERY_S",
    "FORMAT_VERSION",
    "CheckpointClock",
    "checkpoint_every",
    "checkpoint_path",
    "every_from_env",
    "load_checkpoint",
    "remove_checkpoint",
    "restore_training_state",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "training_state",
]
