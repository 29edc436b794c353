"""A run's embeddings (harness.run.embedding): the dev evaluations' and the final tasks' agree in
fp32, the dev evaluations' tokens are cached, the method's sentence input is applied, a missing head
is no error, a head the pooler cannot hold is found when the run is built."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder
from harness.errors import ConfigError
from harness.run.embedding import RunEmbedding
from tests.helpers import SENTS


class _FirstToken(nn.Module):
    """A sentence head: the first token's state."""

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return states[:, 0]


class _Method:
    """A method without an export head, with an optional sentence head and input."""

    def __init__(self, head: nn.Module | None = None, text: Any = None) -> None:
        self.head, self.text = head, text

    def sentence_head(self) -> nn.Module | None:
        return self.head

    def sentence_input(self) -> Any:
        return self.text

    def export_head(self) -> None:
        return None


def _embedding(tiny: SentenceEncoder, method: _Method) -> RunEmbedding:
    """The embeddings of a fp32 run with the average pooler."""
    config = SimpleNamespace(precision="fp32", eval_precision="fp32", eval_pooler="avg")
    return RunEmbedding(tiny, method, config)  # type: ignore[arg-type]


def test_dev_and_final_embed_alike_and_the_dev_evaluation_tokenises_once(tiny: SentenceEncoder) -> None:
    tiny.eval()
    embedding = _embedding(tiny, _Method())
    dev, final = embedding.dev(SENTS[:4]), embedding.final(SENTS[:4])
    assert isinstance(dev, np.ndarray) and dev.shape == final.shape == (4, tiny.hidden_size)
    np.testing.assert_allclose(dev, final, rtol=1e-5, atol=1e-6)
    again = embedding.dev(SENTS[:4])  # from the cached tokens
    np.testing.assert_allclose(again, dev, rtol=1e-6, atol=1e-7)
    embedding.head_into_pooler()  # no head to copy: nothing to do, no error


def test_the_sentence_input_wraps_each_sentence_before_the_head(tiny: SentenceEncoder) -> None:
    tiny.eval()
    seen: list[str] = []

    def template(sentence: str) -> str:
        seen.append(sentence)
        return f"this sentence : {sentence}"

    embedding = _embedding(tiny, _Method(head=_FirstToken(), text=template))
    out = embedding.final(SENTS[:3])
    assert seen == SENTS[:3] and out.shape[0] == 3 and np.isfinite(out).all()


class _WithHead(_Method):
    """A method whose trained head the ``cls`` pooler reads."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(64, 64)

    def export_head(self) -> nn.Linear:  # type: ignore[override]
        return self.dense


def test_the_head_goes_into_the_pooler_and_a_pooler_that_cannot_hold_it_is_found_once() -> None:
    encoder, method = load_encoder("random:tiny", seed=0), _WithHead()
    config = SimpleNamespace(method="m", precision="fp32", eval_precision="fp32", eval_pooler="cls")
    embedding = RunEmbedding(encoder, method, config)  # type: ignore[arg-type]
    embedding.head_into_pooler()
    model: Any = encoder.model
    assert torch.equal(model.pooler.dense.weight, method.dense.weight)
    model.pooler = None
    with pytest.raises(ConfigError, match=r"^eval_pooler 'cls' scores m's trained head in the model's "):
        RunEmbedding(encoder, method, config)  # type: ignore[arg-type]
    avg = SimpleNamespace(**{**vars(config), "eval_pooler": "avg"})
    other = RunEmbedding(encoder, method, avg)  # type: ignore[arg-type]
    other.head_into_pooler()  # no pooler to copy the head into, and none needed: nothing done
