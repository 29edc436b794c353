"""The closed sets of run-setting values: each a ``Literal`` type and the tuple of its choices.

A leaf module (it imports nothing of the harness), so that :mod:`harness.config` (the settings'
field types) and :mod:`harness.encoder` (which poolers it implements) share one definition
without importing each other.
"""

from __future__ import annotations

import typing
from typing import Literal

Pooler = Literal["cls_before_pooler", "cls", "avg", "avg_first_last", "avg_top2"]
FinalTasks = Literal["sts", "transfer", "all", "none"]
TransferMode = Literal["fasttest", "test"]
PostWhiten = Literal["none", "zca", "pca", "flow", "flow_glow"]
Precision = Literal["fp32", "tf32", "bf16", "fp16"]

POOLERS: tuple[str, ...] = typing.get_args(Pooler)
"""Poolers, as SimCSE names them. ``cls`` uses the model's pooler layer (after training, the trained
MLP head is copied into it, as SimCSE's checkpoint converter does)."""
FINAL_TASKS: tuple[str, ...] = typing.get_args(FinalTasks)
TRANSFER_MODES: tuple[str, ...] = typing.get_args(TransferMode)
POST_WHITEN: tuple[str, ...] = typing.get_args(PostWhiten)
"""Post-processing of the evaluation embeddings, fitted on corpus sentences: BERT-whitening (``zca``,
``pca``: :mod:`methods.whitening`) or BERT-flow (``flow``: the released code's flow, ``flow_glow``:
Glow's reading of it; :mod:`harness.postprocess.flow`)."""
PRECISIONS: tuple[str, ...] = typing.get_args(Precision)
"""The arithmetic of training and evaluation (:mod:`harness.encoder.precision` says what each computes)."""

__all__ = [
    "FINAL_TASKS",
    "POOLERS",
    "POST_WHITEN",
    "PRECISIONS",
    "TRANSFER_MODES",
    "FinalTasks",
    "Pooler",
    "PostWhiten",
    "Precision",
    "TransferMode",
]
