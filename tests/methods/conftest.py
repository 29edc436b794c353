"""Method tests run single-threaded (the ``single_thread`` fixture of tests/conftest.py), and use its
``encoder``: the tiny random encoder in training mode, one per test module; ``float64`` for the
comparisons with the released code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from harness.encoder.model import SentenceEncoder
from tests.helpers import loss_and_grads, make_method


@pytest.fixture(autouse=True)
def _single_thread(single_thread: None) -> None:
    """Every test of tests/methods runs with one torch thread."""


@pytest.fixture
def float64() -> Iterator[None]:
    """torch's default dtype float64 for the test (the comparisons with the released code's loops)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


@pytest.fixture(scope="module")
def simcse_ref(
    encoder: SentenceEncoder, sents_batch: dict[str, torch.Tensor]
) -> tuple[Any, list[torch.Tensor]]:
    """SimCSE's loss and gradients on ``sents_batch`` (what the reductions to SimCSE compare with)."""
    return loss_and_grads(make_method("simcse", encoder.hidden_size), encoder, sents_batch)
