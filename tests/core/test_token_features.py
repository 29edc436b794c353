"""The encode contract's token-level form, ``encode.tokens(batch)``, and ``embed(head=...)``:
the token features are the encoder's last hidden state (padding zeroed) under every option of the
pooled call, and the pooled call is unchanged bit for bit."""

from __future__ import annotations

import copy

import pytest
import torch

from harness.config.choices import POOLERS
from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from methods.base import EmbeddingEdit, TokenFeatures

SENTS = [
    "a man is playing a guitar .",
    "the cat sleeps .",
    "two dogs run on the beach and bark loudly at the waves .",
    "children play football in the park .",
]


@pytest.fixture(scope="module")
def tiny():
    return load_encoder("random:tiny", seed=0)


def reference_states(encoder, batch):
    """The model's own forward, eval mode: its last hidden state, padding zeroed."""
    was = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            hidden = encoder.model(**batch).last_hidden_state
    finally:
        encoder.train(was)
    return hidden * batch["attention_mask"].unsqueeze(-1)


@pytest.mark.parametrize("buckets", [1, 3])
def test_token_features_are_the_last_hidden_state(tiny, buckets):
    batch = tiny.tokenize(SENTS, 32)
    expected = reference_states(tiny, batch)
    tiny.eval()
    try:
        with torch.no_grad():
            out = TrainingEncode(tiny, "cls_before_pooler", buckets).tokens(batch)
    finally:
        tiny.train()
    assert isinstance(out, TokenFeatures)
    assert out.attention_mask is batch["attention_mask"]
    assert out.hidden.shape == (*batch["input_ids"].shape, tiny.hidden_size)
    torch.testing.assert_close(out.hidden, expected, rtol=1e-5, atol=1e-5)
    assert torch.all(out.hidden[batch["attention_mask"] == 0] == 0)


def test_token_features_follow_dropout_encoder_and_edits(tiny):
    batch = tiny.tokenize(SENTS, 32)
    tiny.train()
    expected = reference_states(tiny, batch)
    encode = TrainingEncode(tiny, "avg", 2)
    off = encode.tokens(batch, dropout=False)  # training mode, dropout off for this call
    assert off.hidden.requires_grad
    torch.testing.assert_close(off.hidden.detach(), expected, rtol=1e-5, atol=1e-5)
    torch.manual_seed(0)
    on = encode.tokens(batch)
    assert not torch.allclose(on.hidden.detach(), expected, atol=1e-3)  # dropout on by default
    other = copy.deepcopy(tiny)
    with torch.no_grad():
        other.model.embeddings.word_embeddings.weight.mul_(2.0)
    moved = encode.tokens(batch, dropout=False, encoder=other)
    torch.testing.assert_close(moved.hidden.detach(), reference_states(other, batch), rtol=1e-5, atol=1e-5)
    edited = encode.tokens(batch, dropout=False, embeddings=EmbeddingEdit(words=lambda x, m, r: 2.0 * x))
    torch.testing.assert_close(edited.hidden.detach(), moved.hidden.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pooler", POOLERS)
@pytest.mark.parametrize("buckets", [1, 3])
def test_the_pooled_call_is_unchanged_bit_for_bit(tiny, pooler, buckets):
    """The pooled call is unchanged by the token-level one beside it: the same tensor as
    ``features``, dropout draws included, and the same again after a token call."""
    batch = tiny.tokenize(SENTS, 32)
    tiny.train()
    encode = TrainingEncode(tiny, pooler, buckets)
    torch.manual_seed(3)
    default = encode(batch)
    encode.tokens(batch)
    torch.manual_seed(3)
    again = encode(batch)
    assert torch.equal(default, again)
    if buckets == 1:
        torch.manual_seed(3)
        assert torch.equal(default, tiny.features(batch, pooler))


def test_embed_with_a_head_reads_token_states_and_without_is_unchanged(tiny):
    calls = []

    class Head(torch.nn.Module):
        def forward(self, hidden, mask):
            calls.append((hidden.clone(), mask.clone(), self.training))
            return hidden.sum(1)

    head = Head()
    tiny.train()
    got = tiny.embed(SENTS[:2], "avg", head=head)
    ((hidden, mask, training),) = calls
    assert not training and head.training and tiny.training  # eval inside, modes restored after
    batch = tiny.tokenize(SENTS[:2])
    torch.testing.assert_close(hidden, reference_states(tiny, batch), rtol=1e-5, atol=1e-5)
    assert torch.equal(mask, batch["attention_mask"])
    assert got.shape == (2, tiny.hidden_size)
    tiny.eval()
    with torch.inference_mode():
        plain = tiny.features(batch, "avg").numpy()
    tiny.train()
    assert (tiny.embed(SENTS[:2], "avg") == plain).all()
