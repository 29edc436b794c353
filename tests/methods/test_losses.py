"""Every pure loss against a slow loop written from the paper's equation, plus closed-form cases."""

from __future__ import annotations

import math

import pytest
import torch

from methods.losses import (
    barlow_twins_loss,
    correlation_rank,
    cross_correlation,
    dcl_loss,
    info_nce,
    info_nce_terms,
    multi_positive_l1,
    multi_positive_l2,
    off_dropout_nce,
    split_info_nce,
)
from tests.helpers import cos

GRID = [(b, d, tau) for b in (2, 5, 8) for d in (4, 12) for tau in (0.05, 1.0)]


def rows(t: torch.Tensor) -> list[list[float]]:
    return t.tolist()


def ref_info_nce(z1: list[list[float]], z2: list[list[float]], tau: float) -> float:
    total = 0.0
    for i in range(len(z1)):
        den = sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(len(z2)))
        total += -math.log(math.exp(cos(z1[i], z2[i]) / tau) / den)
    return total / len(z1)


def ref_l1(h, pos, tau, weights):
    # Eq. 7: sum_p lambda_p * mean_i -log exp(s(h_i, h_ip)) / sum_j exp(s(h_i, h_jp))
    b, p = len(h), len(pos[0])
    total = 0.0
    for q in range(p):
        term = 0.0
        for i in range(b):
            den = sum(math.exp(cos(h[i], pos[j][q]) / tau) for j in range(b))
            term += -math.log(math.exp(cos(h[i], pos[i][q]) / tau) / den)
        total += weights[q] * term / b
    return total


def ref_l2(h, pos, tau, weights):
    # Eq. 8: mean_i -log sum_p lambda_p exp(s(h_i, h_ip)) / sum_j exp(s(h_i, h_jp))
    b, p = len(h), len(pos[0])
    total = 0.0
    for i in range(b):
        inside = 0.0
        for q in range(p):
            den = sum(math.exp(cos(h[i], pos[j][q]) / tau) for j in range(b))
            inside += weights[q] * math.exp(cos(h[i], pos[i][q]) / tau) / den
        total += -math.log(inside)
    return total / b


def ref_split(pa, pb, na, nb, tau, m, placement):
    b = len(pa)
    total = 0.0
    for i in range(b):
        s = cos(pa[i], pb[i]) / tau
        negs = sum(math.exp(cos(na[i], nb[j]) / tau) for j in range(b) if j != i)
        if placement == "released":
            total += -m * s + math.log(math.exp(m * s) + negs)
        else:
            total += -s + math.log(math.exp(s) + m * negs)
    return total / b


def ref_bn(z: list[list[float]], eps: float) -> list[list[float]]:
    n, d = len(z), len(z[0])
    out = [[0.0] * d for _ in range(n)]
    for k in range(d):
        mean = sum(z[i][k] for i in range(n)) / n
        var = sum((z[i][k] - mean) ** 2 for i in range(n)) / n
        for i in range(n):
            out[i][k] = (z[i][k] - mean) / math.sqrt(var + eps)
    return out


def ref_dcl(z1, z2, tau_dcl, reduction, eps=1e-5):
    b, d = len(z1), len(z1[0])
    n1, n2 = ref_bn(z1, eps), ref_bn(z2, eps)
    c = [[sum(n1[i][k] * n2[i][q] for i in range(b)) / b / tau_dcl for q in range(d)] for k in range(d)]
    losses = [-math.log(math.exp(c[k][k]) / sum(math.exp(c[k][q]) for q in range(d))) for k in range(d)]
    return sum(losses) / d if reduction == "mean" else sum(losses)


def ref_barlow(z1, z2, lam, pad, eps=1e-5):
    z1, z2 = z1 + pad, z2 + pad
    n, d = len(z1), len(z1[0])
    n1, n2 = ref_bn(z1, eps), ref_bn(z2, eps)
    total = 0.0
    for k in range(d):
        for q in range(d):
            c = sum(n1[i][k] * n2[i][q] for i in range(n)) / n
            total += (1 - c) ** 2 if k == q else lam * c * c
    return total


def gen(seed: int, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize(("b", "d", "tau"), GRID)
def test_info_nce_matches_loop(b, d, tau):
    z1, z2 = gen(0, b, d), gen(1, b, d)
    assert info_nce(z1, z2, tau).item() == pytest.approx(ref_info_nce(rows(z1), rows(z2), tau), rel=1e-9)


@pytest.mark.parametrize(("b", "d", "tau"), GRID)
@pytest.mark.parametrize("weights", [None, (0.8, 1.0)])
def test_multi_positive_losses_match_loop(b, d, tau, weights):
    h, pos = gen(2, b, d), gen(3, b, 2, d)
    w = weights or (1.0, 1.0)
    ref1 = ref_l1(rows(h), pos.tolist(), tau, w)
    ref2 = ref_l2(rows(h), pos.tolist(), tau, w)
    assert multi_positive_l1(h, pos, tau, weights).item() == pytest.approx(ref1, rel=1e-9)
    assert multi_positive_l2(h, pos, tau, weights).item() == pytest.approx(ref2, rel=1e-9)
    terms = info_nce_terms(h, pos, tau)
    assert terms[1].item() == pytest.approx(ref_info_nce(rows(h), rows(pos[:, 1]), tau), rel=1e-9)


def test_multi_positive_losses_on_hand_computed_2x2():
    # anchors e1, e2; positive 1 = the anchors themselves, positive 2 = the anchors swapped; tau = 1.
    h = torch.eye(2, dtype=torch.float64)
    pos = torch.stack([h, h.flip(0)], dim=1)  # [B=2, P=2, d=2]
    e = math.e
    # term 1: -log(e / (e + 1)) per row; term 2: -log(1 / (1 + e)) per row.
    assert multi_positive_l1(h, pos, 1.0).item() == pytest.approx(math.log(2 + e + 1 / e), rel=1e-12)
    # L2: -log(e / (1 + e) + 1 / (1 + e)) = 0.
    assert multi_positive_l2(h, pos, 1.0).item() == pytest.approx(0.0, abs=1e-12)
    w = (0.5, 2.0)
    l1 = 0.5 * math.log(1 + 1 / e) + 2.0 * math.log(1 + e)
    l2 = math.log((1 + e) / (0.5 * e + 2.0))
    assert multi_positive_l1(h, pos, 1.0, w).item() == pytest.approx(l1, rel=1e-12)
    assert multi_positive_l2(h, pos, 1.0, w).item() == pytest.approx(l2, rel=1e-12)


def test_one_positive_l1_and_l2_are_info_nce():
    h, pos = gen(4, 6, 5), gen(5, 6, 1, 5)
    ref = info_nce(h, pos[:, 0], 0.05)
    torch.testing.assert_close(multi_positive_l1(h, pos, 0.05), ref)
    torch.testing.assert_close(multi_positive_l2(h, pos, 0.05), ref)


def test_info_nce_closed_form_orthogonal_views():
    b, tau = 4, 0.05
    z = torch.eye(b, dtype=torch.float64)
    expected = math.log(1 + (b - 1) * math.exp(-1 / tau))
    assert info_nce(z, z, tau).item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("b", "d", "tau"), GRID)
@pytest.mark.parametrize("m", [0.9, 1.2])
@pytest.mark.parametrize("placement", ["released", "paper"])
def test_split_info_nce_matches_loop(b, d, tau, m, placement):
    z1, z2, z0 = gen(6, b, d), gen(7, b, d), gen(8, b, d)
    ref = ref_split(rows(z1), rows(z2), rows(z0), rows(z0), tau, m, placement)
    got = off_dropout_nce(z1, z2, z0, tau, m, placement)
    assert got.item() == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("placement", ["released", "paper"])
def test_split_info_nce_with_m1_and_simcse_negatives_is_info_nce(placement):
    z1, z2 = gen(9, 8, 12), gen(10, 8, 12)
    torch.testing.assert_close(off_dropout_nce(z1, z2, None, 0.05, 1.0, placement), info_nce(z1, z2, 0.05))
    torch.testing.assert_close(split_info_nce(z1, z2, z1, z2, 0.05), info_nce(z1, z2, 0.05))


def test_m_placements_differ_when_m_is_not_one():
    z1, z2, z0 = gen(11, 8, 12), gen(12, 8, 12), gen(13, 8, 12)
    a = off_dropout_nce(z1, z2, z0, 0.05, 0.9, "released")
    b = off_dropout_nce(z1, z2, z0, 0.05, 0.9, "paper")
    assert not torch.allclose(a, b)


@pytest.mark.parametrize(
    ("b", "d", "tau"), [(b, d, t) for b in (2, 5, 8) for d in (4, 12) for t in (1.0, 5.0)]
)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_dcl_matches_loop(b, d, tau, reduction):
    z1, z2 = gen(14, b, d), gen(15, b, d)
    ref = ref_dcl(rows(z1), rows(z2), tau, reduction)
    assert dcl_loss(z1, z2, tau, reduction).item() == pytest.approx(ref, rel=1e-9)


def test_dcl_sum_is_d_times_mean():
    z1, z2 = gen(16, 8, 12), gen(17, 8, 12)
    torch.testing.assert_close(dcl_loss(z1, z2, 5.0, "sum"), 12 * dcl_loss(z1, z2, 5.0, "mean"))


@pytest.mark.parametrize(("b", "d"), [(b, d) for b in (2, 5, 8) for d in (4, 12)])
@pytest.mark.parametrize("m_pad", [0, 3])
def test_barlow_twins_matches_loop(b, d, m_pad):
    z1, z2, pad = gen(18, b, d), gen(19, b, d), gen(20, m_pad, d)
    ref = ref_barlow(rows(z1), rows(z2), 5e-3, rows(pad))
    got = barlow_twins_loss(z1, z2, 5e-3, pad if m_pad else None)
    assert got.item() == pytest.approx(ref, rel=1e-9)


def test_barlow_correlation_rank_is_bounded_by_rows_without_padding():
    z1, z2 = gen(21, 4, 12), gen(22, 4, 12)
    assert int(torch.linalg.matrix_rank(cross_correlation(z1, z2))) <= 4
    padded = cross_correlation(z1, z2, gen(23, 20, 12))
    assert int(torch.linalg.matrix_rank(padded)) == 12


def test_barlow_twins_closed_form_identical_decorrelated_views():
    # identical views whose standardised columns are orthogonal: C = I (up to BN's eps) -> loss ~ 0
    z = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)
    assert barlow_twins_loss(z, z, 5e-3).item() == pytest.approx(0.0, abs=1e-8)


def test_l2_printed_form_on_hand_values() -> None:
    # anchors e1, e2; positive 1 = the anchors (s = 1), positive 2 = the anchors swapped (s = 0); tau 1.
    h = torch.eye(2, dtype=torch.float64)
    pos = torch.stack([h, h.flip(0)], dim=1)
    e = math.e
    # printed Eq. 8: -log[(exp(-1) + exp(-0)) / (1 + e)] = -log(1 / e) = 1 for each row.
    assert multi_positive_l2(h, pos, 1.0, form="printed").item() == pytest.approx(1.0, rel=1e-12)
    w = (0.5, 2.0)
    expected = math.log((1 + e) / (0.5 / e + 2.0))
    assert multi_positive_l2(h, pos, 1.0, w, form="printed").item() == pytest.approx(expected, rel=1e-12)
    # the default form is unchanged: -log((e + 1) / (1 + e)) = 0
    assert multi_positive_l2(h, pos, 1.0).item() == pytest.approx(0.0, abs=1e-12)


def test_uncentred_cross_correlation_on_hand_values_and_rank_bounds() -> None:
    z1 = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    z2 = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    # C_kl = sum_b z1_bk z2_bl / (||z1_.k|| ||z2_.l||)
    expected = torch.tensor(
        [[2 / (math.sqrt(2) * 2), 2 / (math.sqrt(2) * math.sqrt(2))], [0.0, 1 / math.sqrt(2)]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(cross_correlation(z1, z2, centre=False), expected)
    g = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(4, 8, generator=g, dtype=torch.float64),
        torch.randn(4, 8, generator=g, dtype=torch.float64),
    )
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b))) == 3  # centred: B - 1
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b, centre=False))) == 4  # uncentred: B
    pad = torch.randn(2, 8, generator=g, dtype=torch.float64)
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b, pad))) == 5  # B + M - 1
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b, pad, centre=False))) == 6  # B + M
    # the probe's own rank, also of a bf16 matrix (CUDA's autocast makes one; matrix_rank refuses it)
    assert correlation_rank(cross_correlation(a, b, pad)) == 5
    assert correlation_rank(torch.diag(torch.tensor([1.0, 2.0, 0.0, 3.0])).to(torch.bfloat16)) == 3


def test_dcl_divisor_is_the_biased_batch_size() -> None:
    # C = BN(z1)^T BN(z2) / B / tau is the Pearson correlation matrix over tau (B divisor, biased BN).
    g = torch.Generator().manual_seed(1)
    z1 = torch.randn(16, 3, generator=g, dtype=torch.float64)
    z2 = z1 + 0.3 * torch.randn(16, 3, generator=g, dtype=torch.float64)
    corr = torch.corrcoef(torch.cat([z1, z2], dim=1).T)[:3, 3:] / 5.0
    ref = torch.nn.functional.cross_entropy(corr, torch.arange(3))
    assert dcl_loss(z1, z2, tau_dcl=5.0, eps=1e-12).item() == pytest.approx(ref.item(), rel=1e-8)
    # a (B - 1) divisor would be the same loss at tau * (B - 1) / B: the documented equivalence
    unbiased = torch.nn.functional.cross_entropy(corr * 16 / 15, torch.arange(3))
    assert dcl_loss(z1, z2, tau_dcl=5.0 * 15 / 16, eps=1e-12).item() == pytest.approx(
        unbiased.item(), rel=1e-8
    )
