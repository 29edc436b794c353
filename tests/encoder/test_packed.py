"""The training forward on real tokens only: the bucketed forward's features, gradients and random
stream, and the bucketed path wherever it cannot hold."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder
from harness.encoder.packed import packed_supported
from harness.encoder.training_encode import TrainingEncode
from tests.helpers import EMBED_SENTS

SENTENCES = [*EMBED_SENTS, "a", "one two three four five six seven eight nine ten eleven twelve"] * 3


def _call(
    encoder: SentenceEncoder,
    packed: bool,
    buckets: int,
    *,
    pooler: str = "cls_before_pooler",
    seed: int = 7,
    bf16: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features, every parameter's gradient (of their squared sum) and the generator's state after
    one training call from ``seed``."""
    encoder.packed_training = packed
    encoder.zero_grad(set_to_none=True)
    batch = encoder.tokenize(SENTENCES, 32)
    torch.manual_seed(seed)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = TrainingEncode(encoder, pooler, buckets)(batch)
    out.float().pow(2).sum().backward()
    grads = torch.cat([p.grad.flatten() for p in encoder.parameters() if p.grad is not None])
    return out.detach().float(), grads, torch.get_rng_state()


@pytest.mark.parametrize("buckets", [1, 3])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("pooler", ["cls_before_pooler", "cls"])
def test_packed_call_equals_the_bucketed_one_with_the_same_dropout(buckets, training, pooler):
    encoder = load_encoder("random:tiny", seed=3)
    encoder.train(training)
    assert encoder.can_pack(pooler)
    padded, packed = (_call(encoder, p, buckets, pooler=pooler) for p in (False, True))
    assert torch.allclose(padded[0], packed[0], atol=2e-5), (padded[0] - packed[0]).abs().max()
    assert torch.allclose(padded[1], packed[1], atol=1e-4, rtol=1e-4)
    assert torch.equal(padded[2], packed[2])  # the generator drew exactly as much, in the same calls
    if training:  # the comparison can fail: another seed drops other units
        other = _call(encoder, True, buckets, pooler=pooler, seed=8)
        assert (other[0] - padded[0]).abs().max() > 100 * (packed[0] - padded[0]).abs().max()


def test_packed_call_draws_the_masks_in_the_bucketed_order():
    """Drawn for other buckets (the same masks in another order), the features differ: the order of
    the draws matters, so the test above checks it."""
    encoder = load_encoder("random:tiny", seed=3)
    encoder.train()
    padded = _call(encoder, False, 3)
    encoder.packed_training = True
    batch = encoder.tokenize(SENTENCES, 32)
    torch.manual_seed(7)
    other = encoder.packed_features(batch, "cls_before_pooler", 2)
    assert not torch.allclose(padded[0], other.detach(), atol=1e-2)


def test_packed_call_in_bf16_stays_within_rounding_of_the_bucketed_one():
    encoder = load_encoder("random:tiny", seed=4)
    encoder.train()
    padded, packed, other = (
        _call(encoder, False, 3, bf16=True),
        _call(encoder, True, 3, bf16=True),
        _call(encoder, True, 3, bf16=True, seed=9),
    )
    rounding = (padded[0] - packed[0]).abs().max()
    assert rounding < 0.02 * padded[0].abs().max()
    assert (other[0] - padded[0]).abs().max() > 10 * rounding
    assert torch.equal(padded[2], packed[2])


def test_a_dropout_rate_of_the_call_reaches_the_packed_forward():
    encoder = load_encoder("random:tiny", seed=5)
    encoder.train()
    batch = encoder.tokenize(SENTENCES, 32)
    out = []
    for packed in (False, True):
        encoder.packed_training = packed
        torch.manual_seed(1)
        out.append(TrainingEncode(encoder, "cls_before_pooler", 2)(batch, dropout=0.3).detach())
    assert torch.allclose(out[0], out[1], atol=2e-5)
    encoder.packed_training = True
    torch.manual_seed(1)
    off = TrainingEncode(encoder, "cls_before_pooler", 2)(batch, dropout=False)
    assert not torch.allclose(off, out[1], atol=1e-3)


def test_calls_the_packed_forward_cannot_compute_take_the_bucketed_path(monkeypatch):
    encoder = load_encoder("random:tiny", seed=6)
    assert encoder.can_pack("cls_before_pooler")
    assert not encoder.can_pack("avg")  # every position of the last layer is needed
    encoder.cls_shortcut = False
    assert not encoder.can_pack("cls_before_pooler")
    encoder.cls_shortcut = True
    encoder.tokenizer.padding_side = "left"
    assert not encoder.can_pack("cls_before_pooler")
    encoder.tokenizer.padding_side = "right"
    encoder.packed_training = False
    assert not encoder.can_pack("cls_before_pooler")
    encoder.packed_training = True

    relative: Any = load_encoder("random:tiny", seed=6).model
    relative.config.position_embedding_type = "relative_key"
    assert not packed_supported(relative)
    decoder: Any = load_encoder("random:tiny", seed=6).model
    decoder.encoder.layer[0].is_decoder = True
    assert not packed_supported(decoder)

    called = []
    monkeypatch.setattr(SentenceEncoder, "packed_features", lambda *a, **k: called.append(a))
    batch = encoder.tokenize(SENTENCES, 32)
    TrainingEncode(encoder, "avg", 2)(batch)
    TrainingEncode(encoder, "cls_before_pooler", 2).tokens(batch)
    assert not called
    TrainingEncode(encoder, "cls_before_pooler", 2)(batch)
    assert len(called) == 1


def test_training_steps_packed_give_the_padded_steps_losses_and_weights(data_root):
    """Whole optimiser steps with dropout on (4 length buckets, fp32): the same losses and updated
    weights within float tolerance, the generator in the same state after them."""
    from harness.run.step import TrainStep
    from harness.store.run_config import resolve_config
    from methods import get_method

    config = resolve_config(
        "simcse", None, "smoke", {"max_steps": 3, "batch_size": 8, "length_buckets": 4}, data_root=data_root
    )
    results = []
    for packed in (False, True):
        encoder = load_encoder("random:tiny", seed=0)
        encoder.packed_training = packed
        torch.manual_seed(0)
        step = TrainStep(encoder, get_method("simcse")(config.params, encoder.hidden_size), config, total=3)
        losses = [float(step(SENTENCES[i : i + 8], i + 1)[0]) for i in range(3)]
        results.append((losses, [p.detach().clone() for p in encoder.parameters()], torch.get_rng_state()))
    (padded, padded_weights, padded_rng), (packed_losses, packed_weights, packed_rng) = results
    assert packed_losses == pytest.approx(padded, rel=1e-5)
    assert len(set(padded)) == 3  # three different batches, three different losses
    for a, b in zip(padded_weights, packed_weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert torch.equal(padded_rng, packed_rng)
