"""Benchmark and ablation harness for contrastive sentence embeddings.

``harness.results`` (run records as a pandas DataFrame, MTEB's result format) is imported on first
use, so that importing :mod:`harness` or :mod:`harness.errors` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = ("results",)
"""Submodules reachable as attributes of :mod:`harness` without an import of their own."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"harness.{name}")
    raise AttributeError(f"module 'harness' has no attribute {name!r}")


__all__ = ["__version__", "results"]
