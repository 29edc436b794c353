"""The training call (``TrainingEncode``): length buckets, token-level features, dropout rates per
call; the pooled call is unchanged by any of them."""

from __future__ import annotations

import copy

import pytest
import torch

from harness.config.choices import POOLERS
from harness.encoder.calls import EmbeddingEdit, TokenFeatures
from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_off, dropout_rates
from harness.encoder.training_encode import TrainingEncode
from tests.helpers import TOKEN_SENTS, assert_close_at_scale, record_widths, reference_states


def test_length_buckets_give_the_same_features_and_gradients() -> None:
    from harness.encoder.training_encode import TrainingEncode

    torch.set_num_threads(1)
    encoder = load_encoder("random:tiny", seed=0)
    encoder.eval()  # no dropout: both paths must compute the same function of the same rows
    sentences = ["a b", "a much longer sentence with many more tokens in it .", "c", "mid length one here"]
    batch = encoder.tokenize(sentences * 3, max_length=32)
    plain = TrainingEncode(encoder)(batch)
    plain_grad = torch.autograd.grad(plain.square().sum(), list(encoder.parameters()), allow_unused=True)
    scale = max(float(g.abs().max()) for g in plain_grad if g is not None)
    for buckets in (2, 3, 12, 50):
        bucketed = TrainingEncode(encoder, length_buckets=buckets)(batch)
        torch.testing.assert_close(bucketed, plain, rtol=1e-5, atol=1e-5)
        grads = torch.autograd.grad(bucketed.square().sum(), list(encoder.parameters()), allow_unused=True)
        for a, b in zip(grads, plain_grad, strict=True):
            if a is None or b is None:
                assert a is None and b is None
            else:  # sums over the rows in another grouping: rounding at the gradients' scale
                assert_close_at_scale(a, b, rel=1e-5, scale=scale)


def test_length_buckets_share_one_word_embedding_lookup() -> None:
    """The buckets' forwards get their rows' word embeddings from one lookup (inputs_embeds), so the
    table's dense gradient is built once per call; features and gradients equal the lookup per bucket
    (the padded path: the packed one looks up the real tokens once anyway)."""
    torch.set_num_threads(1)
    encoder = load_encoder("random:tiny", seed=0)
    encoder.eval()
    encoder.packed_training = False
    table = encoder.word_embeddings()
    assert table is not None
    lookups: list[tuple[int, ...]] = []
    hook = table.register_forward_hook(lambda m, i, o: lookups.append(tuple(o.shape)))
    sentences = ["a b", "a much longer sentence with many more tokens in it .", "c", "mid length one here"]
    batch = encoder.tokenize(sentences * 3, max_length=32)
    params = list(encoder.parameters())
    results = {}
    for shared in (True, False):
        encoder.one_word_lookup = shared
        lookups.clear()
        out = TrainingEncode(encoder, length_buckets=3)(batch)
        grads = torch.autograd.grad(out.square().sum(), params, allow_unused=True)
        results[shared] = (out, grads, list(lookups))
    hook.remove()
    assert results[True][2] == [(12, batch["input_ids"].shape[1], 64)]  # one lookup, every row
    assert len(results[False][2]) == 3  # one per bucket
    torch.testing.assert_close(results[True][0], results[False][0], rtol=0, atol=0)
    for a, b in zip(results[True][1], results[False][1], strict=True):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_length_buckets_trim_padding() -> None:
    from harness.encoder.training_encode import TrainingEncode

    encoder = load_encoder("random:tiny", seed=0)
    encoder.packed_training = False  # the padded path (the packed one has no padding to trim)
    widths = record_widths(encoder)
    batch = encoder.tokenize(["a", "b", "a much longer sentence with many more tokens ."], max_length=32)
    TrainingEncode(encoder, length_buckets=2)(batch)
    assert widths == [3, batch["input_ids"].shape[1]]  # [CLS] a [SEP] alone, then the long pair


@pytest.mark.parametrize("buckets", [1, 3])
def test_token_features_are_the_last_hidden_state(tiny, buckets):
    batch = tiny.tokenize(TOKEN_SENTS, 32)
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
    batch = tiny.tokenize(TOKEN_SENTS, 32)
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
    batch = tiny.tokenize(TOKEN_SENTS, 32)
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
        reference = tiny.features(batch, pooler)
        if tiny.can_pack(pooler):  # real tokens only: equal up to float rounding (test_packed.py)
            torch.testing.assert_close(default, reference, rtol=1e-5, atol=2e-5)
        else:
            assert torch.equal(default, reference)


@pytest.fixture(scope="module")
def dropout_batch(encoder):
    return encoder.tokenize(["a man plays a guitar .", "the cat sleeps .", "two dogs run ."], max_length=16)


@pytest.mark.usefixtures("single_thread")
def test_float_dropout_zero_is_the_dropout_off_form(encoder, dropout_batch):
    encode = TrainingEncode(encoder)
    with torch.no_grad():
        off = encode(dropout_batch, dropout=False)
        zero = encode(dropout_batch, dropout=0.0)
        with dropout_off(encoder):
            direct = encode(dropout_batch)
    assert torch.equal(off, zero) and torch.equal(off, direct)


@pytest.mark.usefixtures("single_thread")
def test_float_dropout_at_the_encoders_own_rate_is_the_default_form(encoder, dropout_batch):
    (own,) = set(dropout_rates(encoder))  # the tiny encoder uses one rate everywhere
    encode = TrainingEncode(encoder)
    with torch.no_grad():
        torch.manual_seed(4)
        default = encode(dropout_batch)
        torch.manual_seed(4)
        explicit = encode(dropout_batch, dropout=own)
        torch.manual_seed(4)
        other = encode(dropout_batch, dropout=0.5)
    assert torch.equal(default, explicit)
    assert not torch.allclose(default, other)


@pytest.mark.usefixtures("single_thread")
def test_float_dropout_sets_every_rate_for_the_call_only(encoder, dropout_batch):
    before = dropout_rates(encoder)
    seen: list[list[float]] = []
    model: torch.nn.Module = encoder.model
    handle = model.register_forward_pre_hook(lambda module, args: seen.append(dropout_rates(module)))
    encoder.packed_training = False  # the model's own forward, which the hook sees
    try:
        with torch.no_grad():
            TrainingEncode(encoder)(dropout_batch, dropout=0.155)
    finally:
        handle.remove()
        encoder.packed_training = True
    assert seen and all(r == 0.155 for rates in seen for r in rates)
    assert dropout_rates(encoder) == before  # a rate outside [0, 1) is refused by SCD's parameters
