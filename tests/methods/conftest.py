"""Method tests run single-threaded: the tiny encoder is faster that way, and on a shared CPU
intra-op threads fighting other processes make each step ~100x slower."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
