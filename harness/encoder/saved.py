"""A saved encoder folder (``--save-model``): what is saved beside the weights, and what can read it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from harness.atomic import atomic_write
from harness.errors import ConfigError

SENTENCE_HEAD_FILE = "harness_sentence_head.pt"
"""Saved beside a run's encoder (``--save-model``) when its method has a sentence head
(:meth:`methods.base.Method.sentence_head`): the head's weights and the method's name. The encoder
folder alone does not give the run's sentence embedding, so ``harness export`` and ``harness eval``
refuse a folder that holds this file (:func:`harness.encoder.saved.check_encoder_only`)."""


POST_WHITENING_FILE = "harness_post_whitening.npz"
"""Saved beside a run's encoder (``--save-model``) when the run post-whitened its evaluation
embeddings (``post_whiten`` zca or pca): ``kind``, the mean ``mu [1, d]`` and the matrix ``W [d, k]``
it fitted (float64), so that ``harness export`` carries the same transform as a layer."""


def save_post_whitening(folder: Path, kind: str, mu: np.ndarray, w: np.ndarray) -> None:
    """Write a run's fitted post-whitening to ``folder / POST_WHITENING_FILE`` atomically."""
    with atomic_write(Path(folder) / POST_WHITENING_FILE, "wb") as handle:
        np.savez(handle, kind=np.array(kind), mu=np.asarray(mu, np.float64), w=np.asarray(w, np.float64))


def load_post_whitening(folder: Path) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``(kind, mu, W)`` saved by :func:`save_post_whitening`, or None when the folder has none."""
    path = Path(folder) / POST_WHITENING_FILE
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        return str(data["kind"]), np.asarray(data["mu"]), np.asarray(data["w"])


def save_sentence_head(folder: Path, method: str, head: nn.Module) -> None:
    """Write ``head``'s weights (CPU copies) and ``method`` to ``folder / SENTENCE_HEAD_FILE`` atomically."""
    state = {k: v.detach().to("cpu", copy=True) for k, v in head.state_dict().items()}
    with atomic_write(Path(folder) / SENTENCE_HEAD_FILE, "wb") as handle:
        torch.save({"method": method, "state": state}, handle)


def check_encoder_only(folder: str | Path, what: str) -> None:
    """Raise :class:`ConfigError` when ``folder`` is a saved encoder whose run embedded sentences with
    its method's own head (:data:`harness.encoder.saved.SENTENCE_HEAD_FILE`): ``what`` (the command)
    would evaluate or export the encoder's pooler, which is not that run's sentence embedding."""
    marker = Path(folder).expanduser() / SENTENCE_HEAD_FILE
    if not marker.is_file():
        return
    try:
        method = str(torch.load(marker, map_location="cpu", weights_only=True).get("method", "?"))
    except Exception:  # an unreadable marker still marks the folder
        method = "?"
    raise ConfigError(
        f"{what}: {folder} was saved by a {method} run, whose sentence embedding is its method's own head "
        f"over token features ({SENTENCE_HEAD_FILE}), not an encoder pooler; its run record holds its scores"
    )
