"""The oneDNN fp32 linears: the same embeddings and gradients as the default path, GELU fused only
where it is exact, and the default path where the operator fails on this CPU."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_off
from tests.helpers import EMBED_SENTS


@pytest.mark.parametrize("pooler", ["cls_before_pooler", "avg"])
def test_onednn_linears_give_the_fp32_embeddings_up_to_rounding(pooler):
    from harness.encoder.cpu_kernels import onednn_available

    if not onednn_available():
        pytest.skip("this PyTorch has no oneDNN linear operator (the default path is used)")
    encoder = load_encoder("random:tiny", seed=3)
    calls: list[str] = []
    real = torch.ops.mkldnn._linear_pointwise

    def counting(*args: Any) -> torch.Tensor:
        calls.append(args[3])  # the fused post-op: "none" or "gelu"
        return real(*args)

    encoder.onednn_fp32 = False
    plain = encoder.embed(EMBED_SENTS * 3, pooler)
    encoder.onednn_fp32 = True
    with mock.patch.object(torch.ops.mkldnn, "_linear_pointwise", counting):
        fast = encoder.embed(EMBED_SENTS * 3, pooler)
        assert calls and "gelu" in calls  # oneDNN ran, GELU fused into the feed-forward's first layer
        calls.clear()
        encoder.embed(EMBED_SENTS, pooler, "bf16")
        assert not calls  # autocast keeps its own (bf16) path
    np.testing.assert_allclose(fast, plain, rtol=1e-4, atol=1e-5)
    assert not any("forward" in vars(m) for m in encoder.model.modules())  # class forwards are back


def test_onednn_linears_give_the_fp32_gradients_up_to_rounding():
    from harness.encoder.cpu_kernels import onednn_available

    if not onednn_available():
        pytest.skip("this PyTorch has no oneDNN linear operator (the default path is used)")
    encoder = load_encoder("random:tiny", seed=4)
    batch = encoder.tokenize(EMBED_SENTS * 2)
    calls: list[str] = []
    real = torch.ops.mkldnn._linear_pointwise

    def counting(*args: Any) -> torch.Tensor:
        calls.append(args[3])
        return real(*args)

    grads, losses = [], []
    for fast in (False, True):
        encoder.zero_grad()
        encoder.onednn_fp32 = fast
        encoder.train()
        with mock.patch.object(torch.ops.mkldnn, "_linear_pointwise", counting), dropout_off(encoder):
            loss = encoder.features(batch, "avg").pow(2).sum()
            forward_calls = len(calls)
            loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in encoder.parameters() if p.grad is not None]))
        if fast:  # forward products, then dx and dW per layer; GELU unfused where its gradient is needed
            assert forward_calls > 0 and len(calls) > 2 * forward_calls and set(calls) == {"none"}
        else:
            assert not calls
        calls.clear()
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4)
    assert grads[1].abs().sum() > 0


def test_exact_gelu_is_recognised_and_approximations_are_not():
    from transformers.activations import ACT2FN

    from harness.encoder.cpu_kernels import _exact_gelu

    assert _exact_gelu(ACT2FN["gelu"]) and _exact_gelu(torch.nn.GELU()) and _exact_gelu(F.gelu)
    assert not _exact_gelu(ACT2FN["gelu_new"]) and not _exact_gelu(torch.nn.GELU(approximate="tanh"))
    assert not _exact_gelu(ACT2FN["relu"]) and not _exact_gelu(None)


def test_a_onednn_operator_that_fails_on_this_cpu_leaves_the_default_path():
    from harness.encoder.cpu_kernels import onednn_available

    def broken(*args: Any) -> torch.Tensor:
        raise RuntimeError("could not create a primitive")

    encoder = load_encoder("random:tiny", seed=5)
    expected = encoder.embed(EMBED_SENTS)
    onednn_available.cache_clear()
    try:
        with mock.patch.object(torch.ops.mkldnn, "_linear_pointwise", broken):
            assert not onednn_available()
            np.testing.assert_allclose(encoder.embed(EMBED_SENTS), expected, rtol=1e-4, atol=1e-5)
    finally:
        onednn_available.cache_clear()
