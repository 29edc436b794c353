"""The encoder's forward in parts: the last layer at [CLS] only, and edits inside the embedding
layer (``EmbeddingEdit``) that leave the plain call unchanged bit for bit."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
import torch

from harness.config.choices import POOLERS
from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_off
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from tests.helpers import EMBED_SENTS


@pytest.mark.parametrize("pooler", ["cls_before_pooler", "cls"])
def test_cls_poolers_compute_the_last_layer_at_cls_only_with_the_same_result(pooler):
    encoder = load_encoder("random:tiny", seed=1)
    batch = encoder.tokenize(EMBED_SENTS * 3)  # padded rows of very different lengths
    last: Any = getattr(encoder.model, "encoder").layer[-1]  # noqa: B009
    calls: list[tuple[int, ...]] = []
    hook = last.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))
    try:
        encoder.eval()
        encoder.cls_shortcut = False
        full = encoder.features(batch, pooler)
        encoder.cls_shortcut = True
        fast = encoder.features(batch, pooler)
    finally:
        hook.remove()
    # the full layer returns every position; the shortcut only [CLS] (hooks see the class forward only)
    assert calls and calls[0][1] == batch["input_ids"].shape[1]
    assert torch.allclose(full, fast, atol=1e-5)
    assert "forward" not in vars(last)  # the class's forward is back


def test_cls_shortcut_gives_the_same_gradients_with_dropout_off():
    encoder = load_encoder("random:tiny", seed=2)
    batch = encoder.tokenize(EMBED_SENTS * 2)
    grads = []
    for shortcut in (False, True):
        encoder.zero_grad()
        encoder.cls_shortcut = shortcut
        encoder.train()
        with dropout_off(encoder):
            encoder.features(batch, "cls_before_pooler").pow(2).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in encoder.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-5, rtol=1e-4)
    # with dropout on, the shortcut draws its own masks: different values, same shape, finite
    encoder.train()
    a = encoder.features(batch, "cls_before_pooler")
    b = encoder.features(batch, "cls_before_pooler")
    assert a.shape == b.shape and not torch.equal(a, b) and torch.isfinite(a).all()


def test_cls_shortcut_leaves_models_without_a_bert_layer_alone():
    from harness.encoder.forward import cls_only_last_layer

    plain = torch.nn.Linear(3, 3)
    with cls_only_last_layer(plain, torch.ones(2, 4)):
        assert "forward" not in vars(plain)


def _identity(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return x


@pytest.mark.parametrize("pooler", POOLERS)
@pytest.mark.parametrize("buckets", [1, 3])
def test_identity_embedding_edit_is_the_plain_call_bit_for_bit(pooler, buckets):
    """The forward in parts (embedding module, edit, layers, pooler) computes exactly the model's own
    call: the same values and gradients bit for bit, with dropout on (same random draws) and off."""
    from harness.encoder.calls import EmbeddingEdit

    encoder = load_encoder("random:tiny", seed=0)
    encoder.train()
    encoder.packed_training = False  # the model's own call (the packed one is equal up to rounding)
    batch = encoder.tokenize(["a b c d e f", "g h", "i j k l m n o p q", "r s t", "u"], max_length=16)
    encode = TrainingEncode(encoder, pooler, buckets)
    edit = EmbeddingEdit(words=_identity, output=_identity)
    for dropout in (True, False):
        results = []
        for embeddings in (None, edit, EmbeddingEdit()):
            torch.manual_seed(0)
            out = encode(batch, dropout=dropout, embeddings=embeddings)
            grads = torch.autograd.grad(out.square().sum(), list(encoder.parameters()), allow_unused=True)
            results.append((out, grads))
        (plain, plain_grads), *edited = results
        for out, grads in edited:
            assert torch.equal(out, plain)
            for a, b in zip(grads, plain_grads, strict=True):
                assert (a is None and b is None) or torch.equal(a, b)


def test_embedding_edits_act_where_they_say_with_their_rows():
    """``output`` edits what the first layer reads, ``words`` the lookup before LayerNorm; each bucket's
    edit sees its own rows (indices into the call) trimmed to its width; position_ids in the batch
    reach the position embeddings."""
    from harness.encoder.calls import EmbeddingEdit

    encoder = load_encoder("random:tiny", seed=0)
    encoder.eval()
    batch = encoder.tokenize(["a b c d e f", "g h", "i j k l m n o p q", "r"], max_length=16)
    seen: list[tuple[list[int], int]] = []

    def zero_row_two(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        seen.append((rows.tolist(), int(x.shape[1])))
        keep = (rows != 2).to(x.dtype)[:, None, None]
        return x * keep

    plain = TrainingEncode(encoder, "avg", 1)(batch)
    for buckets in (1, 2):
        seen.clear()
        out = TrainingEncode(encoder, "avg", buckets)(batch, embeddings=EmbeddingEdit(output=zero_row_two))
        assert sorted(r for rows, _ in seen for r in rows) == [0, 1, 2, 3]
        lengths = batch["attention_mask"].sum(1)
        assert all(width == int(lengths[rows].max()) for rows, width in seen)
        changed = [not torch.allclose(out[i], plain[i], atol=1e-6) for i in range(4)]
        assert changed == [False, False, True, False]
    # a constant added to every channel of the word lookup is removed by the embedding LayerNorm
    # (the words edit acts before it); added to the embedding output, it changes every row
    shift = EmbeddingEdit(words=lambda x, m, r: x + 0.5)
    torch.testing.assert_close(TrainingEncode(encoder, "avg")(batch, embeddings=shift), plain)
    shifted = TrainingEncode(encoder, "avg")(batch, embeddings=EmbeddingEdit(output=lambda x, m, r: x + 0.5))
    assert not torch.allclose(shifted, plain, atol=1e-3)
    scaled = EmbeddingEdit(words=lambda x, m, r: x * torch.linspace(0.0, 2.0, x.shape[-1]))
    assert not torch.allclose(TrainingEncode(encoder, "avg")(batch, embeddings=scaled), plain, atol=1e-3)
    # position ids carried by the batch: the identity permutation is the plain call, another is not
    n, length = batch["input_ids"].shape
    same = TrainingEncode(encoder, "avg")({**batch, "position_ids": torch.arange(length).expand(n, -1)})
    assert torch.equal(same, plain)
    flipped = torch.arange(length).flip(0).expand(n, -1)
    assert not torch.allclose(TrainingEncode(encoder, "avg")({**batch, "position_ids": flipped}), plain)


def test_embedding_edits_need_a_bert_encoder(tiny):
    from harness.encoder.calls import EmbeddingEdit

    batch = tiny.tokenize(["a b"], max_length=8)
    with (
        mock.patch("harness.encoder.forward.bert_word_embeddings", return_value=None),
        pytest.raises(ConfigError, match="need a BERT encoder"),
    ):
        TrainingEncode(tiny)(batch, embeddings=EmbeddingEdit(output=_identity))


def test_length_buckets_sort_rows_stably_and_trim_each_part_to_its_longest_row() -> None:
    from harness.encoder.forward import length_buckets

    lengths = [3, 1, 2, 3, 1]
    mask = torch.tensor([[1] * k + [0] * (4 - k) for k in lengths])
    cut = length_buckets(mask, 2)
    assert [(rows.tolist(), width) for rows, width in cut] == [([1, 4, 2], 2), ([0, 3], 3)]
    assert [(rows.tolist(), width) for rows, width in length_buckets(mask, 1)] == [([0, 1, 2, 3, 4], 4)]
    assert len(length_buckets(mask, 9)) == 5  # no more parts than rows
    assert [w for _, w in length_buckets(mask[:1], 4)] == [4]  # one row: the call's width
