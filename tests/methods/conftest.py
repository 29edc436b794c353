"""Method tests run single-threaded: the tiny encoder is faster that way, and on a shared CPU
intra-op threads fighting other processes make each step ~100x slower. ``encoder`` is the tiny
random encoder in training mode, one per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder


@pytest.fixture(autouse=True)
def _single_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    enc = load_encoder("random:tiny", seed=0)
    enc.train()
    return enc
