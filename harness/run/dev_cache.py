"""The step-0 dev evaluation, computed once per encoder and shared by every run of a store.

Every run evaluates on STS-B dev before its first step (the trajectory's first point: alignment,
uniformity and the dev score of the starting encoder). Before any step, the encoder is the same for
every run that starts from the same weights, whatever the method or the seed, so a grid of 264 runs
would compute that dev evaluation 264 times (7 s each at bf16 on one thread here). The first run
computes it and writes it under ``<runs>/dev_cache/``; the others read it.

A cached value is reused only where recomputing it would give the same numbers. The key hashes:

* the encoder's weights (every tensor of its state, after the training head is copied into the
  pooler for the ``cls`` pooler, so a seed-dependent head is part of the key);
* the dev evaluation's inputs (the dev pairs, the positive threshold, the batch size and embedding
  order: :meth:`~harness.evaluation.geometry.StsbDevEval.cache_token`); a dev evaluation without
  ``cache_token`` (a test's stand-in) is never cached;
* the evaluation pooler and precision, the thread count, the device and processor
  (:func:`~harness.config.hardware.cpu_id`; bf16 arithmetic differs between processors), the torch and
  transformers versions;
* the source of the code that computes it (this module's :data:`CODE_FILES`).

So a changed dev evaluation, dataset, encoder or machine misses the cache and computes afresh. Writes
are atomic (a temporary file renamed into place); an unreadable entry is ignored and recomputed.
Evaluation embeds with the encoder alone (methods hold it by reference and add no hooks to it,
see :mod:`methods.base`), which is what makes the value independent of the method; a method that
embeds with its own sentence head (:meth:`methods.base.Method.sentence_head`) is not cached
(:class:`harness.run.training.TrainingRun`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from harness.atomic import atomic_write
from harness.config.hardware import cpu_id

CACHE_DIR = "dev_cache"
"""Folder of the cache inside a run store."""
CODE_FILES = (
    "encoder/model.py",
    "encoder/forward.py",
    "encoder/cpu_kernels.py",
    "evaluation/geometry.py",
    "evaluation/sts.py",
    "run/dev_cache.py",
)
"""Files under ``harness/`` whose source enters the key: the encoder's forward and pooling, the
dev evaluation and its STS-B reader."""


@functools.cache
def code_digest() -> str:
    """sha256 of the sources in :data:`CODE_FILES` (read once per process)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for name in CODE_FILES:
        h.update(name.encode())
        h.update((root / name).read_bytes())
    return h.hexdigest()


def weights_digest(module: nn.Module) -> str:
    """sha256 of every tensor in ``module``'s state (names, dtypes, shapes and bytes)."""
    h = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def dev_cache_key(
    model: nn.Module, dev_eval: Any, *, pooler: str, precision: str, device: torch.device
) -> str | None:
    """The cache key of the step-0 dev evaluation of ``model`` (None: this one is never cached)."""
    token = getattr(dev_eval, "cache_token", None)
    if not callable(token):
        return None
    import transformers

    machine = device.type
    if device.type == "cuda":
        machine += ":" + torch.cuda.get_device_name(device)
    else:
        machine += ":" + (cpu_id() or "unknown cpu")
    parts = {
        "weights": weights_digest(model),
        "dev_eval": str(token()),
        "pooler": pooler,
        "precision": precision,
        "threads": torch.get_num_threads(),
        "machine": machine,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "code": code_digest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


class DevCache:
    """Step-0 dev evaluation results of one run store, one JSON file per key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> dict[str, float] | None:
        """The cached scores for ``key``, or None (absent, unreadable or not finite numbers)."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        scores = data.get("scores") if isinstance(data, Mapping) else None
        if not isinstance(scores, Mapping) or not scores:
            return None
        out: dict[str, float] = {}
        for name, value in scores.items():
            if not isinstance(value, int | float) or not math.isfinite(value):
                return None
            out[str(name)] = float(value)
        return out

    def put(self, key: str, scores: Mapping[str, float], **about: Any) -> None:
        """Store ``scores`` under ``key`` (atomically; a failure to write only loses the cache)."""
        payload = {"scores": {k: float(v) for k, v in scores.items()}, **about}
        try:
            with atomic_write(self._path(key), prefix=".dev-cache-") as handle:
                json.dump(payload, handle, indent=1, sort_keys=True)
        except (OSError, TypeError, ValueError):
            return


__all__ = ["CACHE_DIR", "CODE_FILES", "DevCache", "code_digest", "dev_cache_key", "weights_digest"]
