"""Contrastive Tension: the BCE against a slow loop, the negative draws, the two-copy wiring (both
trained, both snapshotted), and the identical-copies case where the positive logit is ||z||^2."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder
from harness.encoder.training_encode import TrainingEncode
from harness.run.step import TrainStep
from harness.store.run_config import resolve_config
from methods import REGISTRY
from methods.ct import ContrastiveTension, CTParams, ct_loss, draw_negative_pairs
from tests.helpers import SENTS, corpus_text, make_corpus_root


def ref_ct(z1: list[list[float]], z2: list[list[float]], pairs: list[tuple[int, int]]) -> float:
    """Mean BCE over positives (i, i) with label 1 and the given negatives (a, b) with label 0."""

    def dot(u: list[float], v: list[float]) -> float:
        return sum(x * y for x, y in zip(u, v))

    def sigmoid(x: float) -> float:
        return 1.0 / (1.0 + math.exp(-x))

    terms = [-math.log(sigmoid(dot(z1[i], z2[i]))) for i in range(len(z1))]
    terms += [-math.log(1.0 - sigmoid(dot(z1[a], z2[b]))) for a, b in pairs]
    return sum(terms) / len(terms)


@pytest.mark.parametrize(("b", "d", "k"), [(b, d, k) for b in (2, 5, 8) for d in (3, 12) for k in (1, 3, 7)])
def test_ct_loss_matches_the_slow_loop(b: int, d: int, k: int) -> None:
    gen = torch.Generator().manual_seed(b * 100 + d * 10 + k)
    z1 = 0.3 * torch.randn(b, d, generator=gen, dtype=torch.float64)
    z2 = 0.3 * torch.randn(b, d, generator=gen, dtype=torch.float64)
    torch.manual_seed(k)
    neg_a, neg_b = draw_negative_pairs(b, k, torch.device("cpu"))
    loss, pos, neg = ct_loss(z1, z2, neg_a, neg_b)
    expected = ref_ct(z1.tolist(), z2.tolist(), list(zip(neg_a.tolist(), neg_b.tolist())))
    assert loss.item() == pytest.approx(expected, rel=1e-10)
    assert (pos + neg).item() == pytest.approx(loss.item(), rel=1e-12)
    only_pos = ref_ct(z1.tolist(), z2.tolist(), []) * b / (b + b * k)
    assert pos.item() == pytest.approx(only_pos, rel=1e-10)


def test_large_logits_stay_finite() -> None:
    z = torch.full((4, 8), 30.0, dtype=torch.float64)  # dot products of 7200: sigmoid saturates
    a, b = draw_negative_pairs(4, 3, torch.device("cpu"))
    loss, pos, neg = ct_loss(z, z, a, b)
    assert torch.isfinite(loss) and pos.item() == pytest.approx(0.0, abs=1e-12)
    assert neg.item() == pytest.approx(7200.0 * 12 / 16, rel=1e-9)


def test_negative_pairs_are_distinct_rows_drawn_uniformly() -> None:
    torch.manual_seed(0)
    a, b = draw_negative_pairs(5, 4000, torch.device("cpu"))
    assert a.shape == b.shape == (20000,)
    assert bool((a != b).all()) and int(a.min()) == 0 and int(b.max()) == 4
    counts = torch.zeros(5, 5)
    counts.index_put_((a, b), torch.ones(20000), accumulate=True)
    off = counts[~torch.eye(5, dtype=torch.bool)]
    assert float(off.min()) > 0.8 * 1000 and float(off.max()) < 1.2 * 1000  # 20 ordered pairs, ~1000 each


class Recording(TrainingEncode):
    def __init__(self, encoder) -> None:
        super().__init__(encoder, "avg")
        self.calls: list[tuple[torch.Tensor, bool, bool]] = []

    def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
        out = super().__call__(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)
        self.calls.append((out, dropout, encoder is not None))
        return out


def bound(seed: int = 0, **params: object) -> tuple[ContrastiveTension, SentenceEncoder]:
    encoder = load_encoder("random:tiny", seed=seed)
    encoder.train()
    method = ContrastiveTension(CTParams.from_overrides(dict(params)), encoder.hidden_size)
    method.bind(encoder)
    return method, encoder


def test_identical_copies_without_dropout_give_squared_norms_as_positive_logits() -> None:
    method, encoder = bound()
    encode = Recording(encoder)
    batch = encoder.tokenize(SENTS, max_length=32)
    torch.manual_seed(3)
    out = method.compute_loss(encode, batch, step=1)
    (z2, drop2, copy2), (z1, drop1, copy1) = encode.calls
    assert (drop1, drop2) == (False, False) and (copy1, copy2) == (True, False)
    torch.testing.assert_close(z1, z2, rtol=0, atol=0)  # the untrained copy is the encoder
    norms = (z2 * z2).sum(-1)
    pairs = len(SENTS) * (1 + method.params.negatives)
    expected_pos = torch.nn.functional.softplus(-norms).sum() / pairs
    assert float(out.metrics["ct_pos"]) == pytest.approx(expected_pos.item(), rel=1e-5)
    assert float(out.metrics["loss_ct"]) == pytest.approx(out.loss.item(), rel=1e-6)
    assert REGISTRY["ct"] is ContrastiveTension


def test_dropout_switch_reaches_both_calls() -> None:
    method, encoder = bound(dropout=True)
    encode = Recording(encoder)
    method.compute_loss(encode, encoder.tokenize(SENTS, max_length=32), step=1)
    assert [d for _, d, _ in encode.calls] == [True, True]


def test_both_copies_get_gradient_and_are_optimised_and_snapshotted(tmp_path: Path) -> None:
    root = make_corpus_root(tmp_path / "data", corpus_text(SENTS * 4))
    cfg = resolve_config("ct", {}, "smoke", {"max_steps": 2, "batch_size": 6}, data_root=root)
    encoder = load_encoder("random:tiny", seed=0)
    method = ContrastiveTension(cfg.params, encoder.hidden_size)  # type: ignore[arg-type]
    step = TrainStep(encoder, method, cfg, total=2)
    copy_params = list(method.model1.parameters())
    optimised = {id(p) for p in step.parameters}
    assert copy_params and all(id(p) in optimised for p in copy_params)
    assert not any(p is q for p in copy_params for q in encoder.parameters())

    before1 = [p.detach().clone() for p in copy_params]
    before2 = [p.detach().clone() for p in encoder.parameters()]
    torch.manual_seed(0)
    step(SENTS, 1)
    moved1 = any(not torch.equal(p, q) for p, q in zip(method.model1.parameters(), before1))
    moved2 = any(not torch.equal(p, q) for p, q in zip(encoder.parameters(), before2))
    assert moved1 and moved2  # both models are trained
    differ = any(not torch.equal(p, q) for p, q in zip(method.model1.parameters(), encoder.parameters()))
    assert differ  # the random negatives make the two copies move apart

    snap = method.snapshot_state()
    assert any(k.startswith("model1.") for k in snap)
    weights = {k: v.clone() for k, v in snap.items()}
    step(SENTS, 2)
    method.restore_state(weights)
    for k, v in method.snapshot_state().items():
        torch.testing.assert_close(v, weights[k])
    assert any(k.startswith("model1.") for k in method.state_dict())  # the resume checkpoint's part
