"""Unsupervised SimCSE: two dropout views of each sentence from one encoder call, InfoNCE over the
batch, the MLP head only where it is asked for."""

from __future__ import annotations

import torch
from torch import nn

from harness.encoder.calls import EmbeddingEdit, TokenFeatures
from methods.losses import info_nce
from methods.simcse import SimCSE, SimCSEParams
from tests.helpers import fake_batch


class FixedEncode:
    """An EncodeFn that returns the rows it was given (the batches it saw are kept)."""

    def __init__(self, rows: torch.Tensor) -> None:
        self.rows = rows
        self.hidden_size = int(rows.shape[1])
        self.batches: list[dict[str, torch.Tensor]] = []

    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> torch.Tensor:
        self.batches.append(batch)
        return self.rows

    def tokens(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> TokenFeatures:
        raise NotImplementedError("SimCSE makes no token-level call")


def test_the_loss_is_infonce_between_the_two_views_of_each_sentence() -> None:
    torch.manual_seed(0)
    rows = torch.randn(8, 6, requires_grad=True)  # 4 sentences, each twice in a row
    encode = FixedEncode(rows)
    method = SimCSE(SimCSEParams(temperature=0.1, mlp=False), 6)
    out = method.compute_loss(encode, fake_batch(4), step=0)
    torch.testing.assert_close(out.loss, info_nce(rows[0::2], rows[1::2], 0.1))
    assert set(out.metrics) == {"loss_infonce"} and float(out.metrics["loss_infonce"]) == out.loss.item()
    out.loss.backward()
    assert rows.grad is not None and rows.grad.abs().sum() > 0


def test_one_encoder_call_repeats_each_sentence_twice_sentence_major() -> None:
    batch = {
        "input_ids": torch.tensor([[1, 2, 0], [3, 4, 5], [6, 0, 0]]),
        "attention_mask": torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]]),
    }
    encode = FixedEncode(torch.zeros(6, 4))
    SimCSE(SimCSEParams(mlp=False), 4).compute_loss(encode, batch, step=0)
    (seen,) = encode.batches
    assert seen["input_ids"].tolist() == [[1, 2, 0], [1, 2, 0], [3, 4, 5], [3, 4, 5], [6, 0, 0], [6, 0, 0]]
    assert torch.equal(seen["attention_mask"], batch["attention_mask"].repeat_interleave(2, dim=0))


def test_the_mlp_head_is_trained_but_not_the_sentence_embedding() -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 8)
    plain = SimCSE(SimCSEParams(mlp=False), 8)
    assert plain.head(x) is x and plain.export_head() is None and not list(plain.parameters())
    with_head = SimCSE(SimCSEParams(), 8)  # mlp is on by default
    mlp = with_head.mlp
    assert mlp is not None and with_head.export_head() is mlp.dense
    torch.testing.assert_close(with_head.head(x), torch.tanh(mlp.dense(x)))
    rows = torch.randn(10, 8)
    out = with_head.compute_loss(FixedEncode(rows), fake_batch(5), step=0)
    expected = info_nce(with_head.head(rows[0::2]), with_head.head(rows[1::2]), 0.05)
    torch.testing.assert_close(out.loss, expected)
