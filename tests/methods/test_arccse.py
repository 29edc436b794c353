"""ArcCSE: ArcCon and the triplet hinge against slow loops, the nested [MASK] spans, and the
reduction to SimCSE (margin 0, no triplet term) in loss and gradients."""

from __future__ import annotations

import math
from typing import Literal

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods import REGISTRY, build_params
from methods.arccse import ArcCSE, ArcCSEParams, arc_con_loss, span_masks, triplet_order_loss
from methods.losses import info_nce
from tests.helpers import SENTS, cos, loss_and_grads


def ref_arc(z1: list[list[float]], z2: list[list[float]], tau: float, m: float, form: str) -> float:
    total = 0.0
    for i in range(len(z1)):
        c = cos(z1[i], z2[i])
        theta = math.acos(max(-1.0, min(1.0, c)))
        pos = math.cos(theta + m) if (form == "paper" or c > 0) else c
        den = math.exp(pos / tau) + sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(len(z2)) if j != i)
        total += -math.log(math.exp(pos / tau) / den)
    return total / len(z1)


def ref_tri(t0: list[list[float]], t1: list[list[float]], t2: list[list[float]], margin: float) -> float:
    return sum(max(0.0, cos(a, c) - cos(a, b) + margin) for a, b, c in zip(t0, t1, t2)) / len(t0)


GRID = [
    (b, d, tau, m, form)
    for b in (2, 5, 8)
    for d in (4, 12)
    for tau in (0.05, 1.0)
    for m in (0.0, math.radians(10), 1.2)
    for form in ("paper", "easy")
]


@pytest.mark.parametrize(("b", "d", "tau", "m", "form"), GRID)
def test_arc_con_matches_the_slow_loop(b: int, d: int, tau: float, m: float, form: str) -> None:
    gen = torch.Generator().manual_seed(b * 1000 + d)
    z1 = torch.randn(b, d, generator=gen, dtype=torch.float64)
    z2 = z1 + 0.8 * torch.randn(b, d, generator=gen, dtype=torch.float64)  # positive and negative cosines
    got = arc_con_loss(z1, z2, tau, m, form)  # type: ignore[arg-type]
    assert got.item() == pytest.approx(ref_arc(z1.tolist(), z2.tolist(), tau, m, form), rel=1e-9)


@pytest.mark.parametrize(
    ("b", "d", "tau"), [(b, d, tau) for b in (2, 5, 8) for d in (4, 12) for tau in (0.05, 1.0)]
)
def test_zero_margin_is_infonce(b: int, d: int, tau: float) -> None:
    gen = torch.Generator().manual_seed(b + d)
    z1, z2 = torch.randn(2, b, d, generator=gen, dtype=torch.float64)
    forms: tuple[Literal["paper", "easy"], ...] = ("paper", "easy")
    for form in forms:
        torch.testing.assert_close(arc_con_loss(z1, z2, tau, 0.0, form), info_nce(z1, z2, tau))


def test_easy_form_leaves_obtuse_positives_alone() -> None:
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    z2 = torch.tensor([[-1.0, 0.2], [0.1, 1.0]], dtype=torch.float64)  # positive 0 is obtuse, 1 acute
    m = math.radians(10)
    easy, paper = arc_con_loss(z1, z2, 0.5, m, "easy"), arc_con_loss(z1, z2, 0.5, m, "paper")
    assert easy.item() == pytest.approx(ref_arc(z1.tolist(), z2.tolist(), 0.5, m, "easy"), rel=1e-12)
    assert easy.item() < paper.item()  # cos(theta + m) < cos(theta) for the obtuse positive only


def test_the_margin_makes_the_loss_larger_and_keeps_gradients_finite_at_theta_zero() -> None:
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    loss = arc_con_loss(z, z, 0.05, math.radians(10))  # identical views: theta = 0 on the diagonal
    loss.backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()
    assert loss.item() > info_nce(z.detach(), z.detach(), 0.05).item()


@pytest.mark.parametrize(
    ("b", "d", "margin"), [(b, d, mg) for b in (1, 3, 7) for d in (2, 9) for mg in (0.0, 0.3)]
)
def test_triplet_order_matches_the_slow_loop(b: int, d: int, margin: float) -> None:
    gen = torch.Generator().manual_seed(b * 10 + d)
    t0, t1, t2 = torch.randn(3, b, d, generator=gen, dtype=torch.float64)
    got = triplet_order_loss(t0, t1, t2, margin)
    assert got.item() == pytest.approx(
        ref_tri(t0.tolist(), t1.tolist(), t2.tolist(), margin), rel=1e-9, abs=1e-12
    )


def test_span_masks_are_nested_contiguous_and_sized() -> None:
    maskable = torch.zeros(4, 14, dtype=torch.bool)
    for row, n in enumerate((10, 1, 0, 12)):
        maskable[row, 1 : 1 + n] = True  # [CLS] tokens [SEP] pad
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        short, long = span_masks(maskable, (0.2, 0.5), gen)
        assert not (short & ~long).any() and not (long & ~maskable).any()
        for row, n in enumerate((10, 1, 0, 12)):
            for mask, ratio in ((short, 0.2), (long, 0.5)):
                idx = torch.nonzero(mask[row]).flatten().tolist()
                assert len(idx) == (min(n, max(1, round(ratio * n))) if n else 0)
                assert idx == list(range(idx[0], idx[0] + len(idx))) if idx else True


def bound(**params: object) -> tuple[ArcCSE, object]:
    encoder = load_encoder("random:tiny", seed=0)
    encoder.train()
    torch.manual_seed(123)
    method = ArcCSE(ArcCSEParams.from_overrides(dict(params)), encoder.hidden_size)
    method.bind(encoder)
    return method, encoder


def test_masked_triplets_replace_only_real_tokens_with_the_tokenizers_mask_id() -> None:
    method, encoder = bound(mask_ratios="0.3,0.6")
    batch = encoder.tokenize(SENTS, max_length=32)  # type: ignore[attr-defined]
    mask_id = encoder.tokenizer.mask_token_id  # type: ignore[attr-defined]
    torch.manual_seed(0)
    rows = method.masked_triplets(batch)
    ids = rows["input_ids"].view(len(SENTS), 3, -1)
    torch.testing.assert_close(ids[:, 0], batch["input_ids"])
    for k in (1, 2):
        changed = ids[:, k] != batch["input_ids"]
        assert bool((ids[:, k][changed] == mask_id).all())
        assert not changed[:, 0].any()  # [CLS] kept
        assert not (changed & (batch["attention_mask"] == 0)).any()  # padding kept
    assert bool(((ids[:, 1] == mask_id).sum(1) < (ids[:, 2] == mask_id).sum(1)).any())
    assert bool((((ids[:, 1] == mask_id) & (ids[:, 2] != mask_id)) == 0).all())  # x' inside x''
    torch.testing.assert_close(rows["attention_mask"].view(len(SENTS), 3, -1)[:, 2], batch["attention_mask"])


def test_margin_zero_without_triplets_is_simcse_in_loss_and_gradients() -> None:
    encoder = load_encoder("random:tiny", seed=0)
    encoder.train()
    batch = encoder.tokenize(SENTS, max_length=32)
    torch.manual_seed(123)
    simcse = REGISTRY["simcse"](build_params("simcse"), encoder.hidden_size)
    torch.manual_seed(123)
    arc = ArcCSE(ArcCSEParams(margin=0.0, triplet_weight=0.0), encoder.hidden_size)
    arc.bind(encoder)
    (out_a, grads_a), (out_b, grads_b) = (
        loss_and_grads(arc, encoder, batch),
        loss_and_grads(simcse, encoder, batch),
    )
    torch.testing.assert_close(out_a.loss, out_b.loss, rtol=1e-5, atol=1e-6)
    for ga, gb in zip(grads_a, grads_b):
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-6)
    with_margin = ArcCSE(ArcCSEParams(triplet_weight=0.0), encoder.hidden_size)
    with_margin.load_state_dict(arc.state_dict())
    assert loss_and_grads(with_margin, encoder, batch)[0].loss.item() > out_b.loss.item()


def test_the_triplet_pass_is_dropout_off_and_weighted() -> None:
    method, encoder = bound()
    calls: list[tuple[int, bool]] = []

    class Spy(TrainingEncode):
        def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
            calls.append((int(batch["input_ids"].shape[0]), dropout))
            return super().__call__(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)

    batch = encoder.tokenize(SENTS, max_length=32)  # type: ignore[attr-defined]
    out = method.compute_loss(Spy(encoder), batch, step=1)  # type: ignore[arg-type]
    b = len(SENTS)
    assert calls == [(2 * b, True), (3 * b, False)]
    assert out.loss.item() == pytest.approx(
        float(out.metrics["loss_arc"]) + 0.1 * float(out.metrics["loss_tri"]), rel=1e-5
    )


def test_bad_values_name_the_field() -> None:
    cases: tuple[tuple[dict[str, object], str], ...] = (
        ({"mask_ratios": "0.5,0.2"}, "mask_ratios"),
        ({"mask_ratios": "x"}, "mask_ratios"),
        ({"margin": 200.0}, "margin"),
        ({"triplet_weight": -1.0}, "triplet_weight"),
    )
    for overrides, field in cases:
        with pytest.raises(ConfigError, match=field):
            build_params("arccse", overrides).validate()
