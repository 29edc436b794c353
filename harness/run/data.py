"""The training data: the corpus file, its seeded batches, the step budget, the seeds."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from harness.config.inputs import CORPUS_MAX_BYTES, read_input_text
from harness.config.settings import steps_per_epoch
from harness.errors import DataError
from harness.store.run_config import RunConfig


# -- data -----------------------------------------------------------------------------------------
def read_corpus(path: Path, min_sentences: int = 1) -> list[str]:
    """Read a one-sentence-per-line corpus.

    Args:
        path: the corpus file (UTF-8).
        min_sentences: at least this many sentences are required (one batch).

    Returns:
        The sentences in file order, line ends (LF, CRLF, or a lone CR as old Mac editors write)
        stripped.

    Raises:
        DataError: not an input file (:func:`~harness.config.inputs.read_input_text`: missing, a
            folder, a FIFO or device, larger than :data:`~harness.config.inputs.CORPUS_MAX_BYTES`,
            unreadable), invalid UTF-8, an empty line (naming the first one), or fewer sentences
            than ``min_sentences``.
    """
    text = read_input_text(path, "corpus", CORPUS_MAX_BYTES)
    sentences = _LINE_END.split(text)
    if sentences and sentences[-1] == "":
        sentences.pop()  # the final line end
    empty = [i + 1 for i, s in enumerate(sentences) if not s.strip()]
    if empty:
        raise DataError(
            f"corpus {path}: line {empty[0]} is empty ({len(empty)} empty line(s) in all); the corpus "
            "must hold one sentence per line: remove empty lines, e.g. sed -i '/^[[:space:]]*$/d' FILE"
        )
    if len(sentences) < min_sentences:
        raise DataError(
            f"corpus {path} has {len(sentences)} sentence(s), fewer than one batch of {min_sentences}"
        )
    return sentences


_LINE_END = re.compile(r"\r\n|\r|\n")
"""What ends a corpus line: not ``str.splitlines``' other breaks (form feeds, U+2028), which a
sentence may hold."""


def total_steps(config: RunConfig, num_sentences: int) -> int:
    """The run's number of optimiser steps (``max_steps``, or one epoch when it is None)."""
    if config.max_steps is None:
        return steps_per_epoch(num_sentences, config.batch_size)
    return config.max_steps


def batches(sentences: Sequence[str], batch_size: int, seed: int) -> Iterator[list[str]]:
    """Endless batches of ``batch_size`` sentences: a seeded shuffle per epoch, partial batch dropped."""
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield [sentences[i] for i in order[start : start + batch_size]]


# -- seeding and schedule -------------------------------------------------------------------------
def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (every device's) generators with ``seed``, in NumPy's range
    ``0 .. 2**32 - 1`` (the run settings' bound, :data:`~harness.config.settings.SEED_MAX`)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
