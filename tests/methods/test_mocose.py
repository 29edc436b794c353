"""MoCoSE: the queue loss against a loop, the momentum schedule and updates, the FGSM noise, and the
reduction to in-batch InfoNCE (momentum 0, no queue, no noise, no heads)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods import build_params
from methods.losses import info_nce
from methods.mocose import MoCoSE, MoCoSEParams, queue_info_nce

GRID = [(b, d, m, tau) for b in (2, 5) for d in (4, 12) for m in (0, 3) for tau in (0.05, 1.0)]


def cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a)) / math.sqrt(sum(y * y for y in b))


def ref_queue_nce(q, k, queue, tau) -> float:
    total = 0.0
    for i in range(len(q)):
        den = sum(math.exp(cos(q[i], kj) / tau) for kj in k) + sum(
            math.exp(cos(q[i], r) / tau) for r in queue
        )
        total += -math.log(math.exp(cos(q[i], k[i]) / tau) / den)
    return total / len(q)


@pytest.mark.parametrize(("b", "d", "m", "tau"), GRID)
def test_queue_info_nce_matches_the_loop_reference(b: int, d: int, m: int, tau: float) -> None:
    gen = torch.Generator().manual_seed(b * 10 + d + m)
    q, k, queue = (torch.randn(n, d, generator=gen, dtype=torch.float64) for n in (b, b, m))
    expected = ref_queue_nce(q.tolist(), k.tolist(), queue.tolist(), tau)
    assert queue_info_nce(q, k, queue, tau).item() == pytest.approx(expected, rel=1e-9)


def test_the_decay_rises_from_m_to_one_on_a_cosine() -> None:
    p = MoCoSEParams()
    assert p.decay(0) == pytest.approx(0.85)
    assert p.decay(p.momentum_steps // 2) == pytest.approx(1 - 0.15 / 2)
    assert p.decay(p.momentum_steps) == pytest.approx(1.0)
    values = [p.decay(u) for u in range(0, p.momentum_steps, 500)]
    assert values == sorted(values)
    assert MoCoSEParams(momentum_steps=0).decay(1234) == 0.85


@pytest.fixture(scope="module")
def batch():
    enc = load_encoder("random:tiny", seed=0)
    return enc.tokenize(
        ["a man plays a guitar .", "two dogs run", "the sky is blue today", "hi"], max_length=16
    )


def make(encoder, **overrides) -> MoCoSE:
    method = MoCoSE(MoCoSEParams.from_overrides(overrides), encoder.hidden_size)
    method.bind(encoder)
    return method


class Recording(TrainingEncode):
    def __init__(self, encoder) -> None:
        super().__init__(encoder)
        self.outputs: list[torch.Tensor] = []

    def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
        out = super().__call__(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)
        self.outputs.append(out)
        return out


def test_momentum_zero_without_queue_noise_or_heads_is_in_batch_infonce(batch) -> None:
    encoder = load_encoder("random:tiny", seed=1)
    encoder.train()
    method = make(
        encoder, momentum=0.0, momentum_steps=0, queue_size=0, fgsm=0.0, mlp=False, key_gradient="none"
    )
    encode = Recording(encoder)
    out = method.compute_loss(encode, batch, step=1)
    q, k = encode.outputs
    assert q.requires_grad and not k.requires_grad  # key_gradient="none": the key pass has no gradient
    torch.testing.assert_close(out.loss, info_nce(q, k, 0.05))
    # momentum 0: after the step the key encoder is the online encoder
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(0.01)
    method.after_step(1)
    for a, b in zip(method.key_encoder.parameters(), encoder.parameters(), strict=True):
        assert torch.equal(a, b)


def test_ema_moves_the_layers_and_shares_the_embedding_layer(batch) -> None:
    encoder = load_encoder("random:tiny", seed=1)
    method = make(encoder, momentum_steps=0, queue_size=0, fgsm=0.0)
    key = method.key_encoder
    before = {n: p.detach().clone() for n, p in key.named_parameters()}
    head_before = method.key_pooler.weight.detach().clone()
    assert method.pooler is not None
    with torch.no_grad():
        for p in [*encoder.parameters(), method.pooler.weight]:
            p.add_(1.0)
    method.after_step(1)
    online = dict(encoder.named_parameters())
    for name, p in key.named_parameters():
        if ".encoder." in name:
            torch.testing.assert_close(p, 0.85 * before[name] + 0.15 * online[name])
        elif ".embeddings." in name:
            assert torch.equal(p, online[name])
    torch.testing.assert_close(method.key_pooler.weight, 0.85 * head_before + 0.15 * method.pooler.weight)


def test_the_pooler_starts_from_the_encoders_pooler_and_keys_skip_the_predictor(batch) -> None:
    encoder = load_encoder("random:tiny", seed=2)
    encoder.train()
    method = make(encoder, queue_size=0, fgsm=0.0)
    assert method.pooler is not None
    model: Any = encoder.model
    dense = model.pooler.dense
    assert torch.equal(method.pooler.weight, dense.weight)
    assert set(method.trainable_parameters()).isdisjoint(set(method.key_encoder.parameters()))
    encode = Recording(encoder)
    out = method.compute_loss(encode, batch, step=1)
    assert torch.isfinite(out.loss)
    grads = torch.autograd.grad(out.loss, method.trainable_parameters(), allow_unused=True)
    assert all(g is not None for g in grads)  # pooler, projection and predictor all train


def test_the_queue_starts_random_and_fills_with_keys(batch) -> None:
    encoder = load_encoder("random:tiny", seed=1)
    method = make(encoder, queue_size=6, fgsm=0.0)
    assert method.queue is not None and int(method.queue.filled) == 6
    torch.testing.assert_close(method.queue.contents().norm(dim=1), torch.ones(6))
    empty = make(encoder, queue_size=6, queue_init="empty", fgsm=0.0)
    assert empty.queue is not None and int(empty.queue.filled) == 0
    out = empty.compute_loss(TrainingEncode(encoder), batch, step=1)
    out.loss.backward()
    metrics = empty.after_step(1)
    assert float(metrics["queue_filled"]) == 4.0
    assert empty._keys is not None
    torch.testing.assert_close(empty.queue.contents(), empty._keys)


def test_fgsm_adds_eps_times_the_sign_of_the_previous_steps_gradient(batch) -> None:
    encoder = load_encoder("random:tiny", seed=3)
    encoder.train()
    eps = 0.5
    method = make(encoder, fgsm=eps, queue_size=0)
    edit = method._query_edit()
    assert edit.words is not None
    x = torch.randn(4, 7, encoder.hidden_size)
    rows = torch.arange(4)
    assert torch.equal(edit.words(x, batch["attention_mask"], rows), x)  # no gradient yet: no noise
    torch.manual_seed(0)
    out = method.compute_loss(TrainingEncode(encoder), batch, step=1)
    words = [w for _, w in method._words]
    out.loss.backward()
    (grad,) = [w.grad for w in words]
    assert grad is not None
    method.after_step(1)
    sign = grad.sign()
    assert sign.abs().sum() > 0
    # the next step's rows get x + eps * sign(g), cropped to their width, zero where g had no position
    width = batch["input_ids"].shape[1]
    longer = torch.randn(4, width + 3, encoder.hidden_size)
    noisy = method._query_edit().words(longer, batch["attention_mask"], rows)  # type: ignore[misc]
    torch.testing.assert_close(noisy[:, :width], longer[:, :width] + eps * sign)
    torch.testing.assert_close(noisy[:, width:], longer[:, width:])
    subset = torch.tensor([2, 0])
    part = method._noise(longer[:2, :3], batch["attention_mask"][:2, :3], subset)
    torch.testing.assert_close(part, longer[:2, :3] + eps * sign[subset, :3])


def test_parameters_are_validated() -> None:
    for key, value in (("momentum", 1.0), ("queue_size", -1), ("fgsm", -1.0), ("predictor_layers", 0)):
        with pytest.raises(ConfigError, match=key):
            build_params("mocose", {key: value}).validate()
