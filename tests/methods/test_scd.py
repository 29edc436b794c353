"""SCD: each term against a loop from the equations, the projector's layout, the views' dropout
rates, closed-form cases; and the encode contract's float ``dropout=`` form."""

from __future__ import annotations

import math

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods.losses import barlow_twins_loss
from methods.scd import SCD, SCDParams, build_projector, self_contrast
from tests.helpers import cos

GRID = [(b, d, tau) for b in (2, 5, 8) for d in (3, 6) for tau in (0.05, 1.0)]


def ref_self_contrast(z1, z2, tau):
    return sum(cos(a, b) / tau for a, b in zip(z1, z2)) / len(z1)


def ref_decorrelation(p1, p2, lam, eps=1e-5):
    # C_kl = sum_b x_bk y_bl / B with x, y standardised per column (biased variance, + eps)
    b, d = len(p1), len(p1[0])

    def standardise(p):
        cols = []
        for k in range(d):
            col = [row[k] for row in p]
            mean = sum(col) / b
            var = sum((x - mean) ** 2 for x in col) / b
            cols.append([(x - mean) / math.sqrt(var + eps) for x in col])
        return cols

    x, y = standardise(p1), standardise(p2)
    total = 0.0
    for k in range(d):
        for m in range(d):
            c = sum(x[k][r] * y[m][r] for r in range(b)) / b
            total += (1 - c) ** 2 if k == m else lam * c**2
    return total


@pytest.mark.parametrize(("b", "d", "tau"), GRID)
def test_self_contrast_matches_loop(b, d, tau):
    gen = torch.Generator().manual_seed(b * 10 + d)
    z1, z2 = torch.randn(b, d, generator=gen).double(), torch.randn(b, d, generator=gen).double()
    got = self_contrast(z1, z2, tau)
    assert float(got) == pytest.approx(ref_self_contrast(z1.tolist(), z2.tolist(), tau), rel=1e-10)


@pytest.mark.parametrize(("b", "d", "tau"), GRID)
def test_decorrelation_term_matches_loop(b, d, tau):
    gen = torch.Generator().manual_seed(b * 7 + d)
    p1, p2 = torch.randn(b, d, generator=gen).double(), torch.randn(b, d, generator=gen).double()
    got = barlow_twins_loss(p1, p2, 0.012)
    assert float(got) == pytest.approx(ref_decorrelation(p1.tolist(), p2.tolist(), 0.012), rel=1e-8)


class FakeEncode:
    """Distinct random rows per call; records each call's dropout argument."""

    def __init__(self, hidden: int) -> None:
        self.hidden_size = hidden
        self.dropouts: list[object] = []

    def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
        self.dropouts.append(dropout)
        return torch.randn(batch["input_ids"].shape[0], self.hidden_size, requires_grad=True)

    def tokens(self, batch, *, dropout=True, encoder=None, embeddings=None):
        raise NotImplementedError("SCD makes no token-level call")


def test_method_loss_is_alpha_self_contrast_plus_beta_decorrelation_of_the_projections():
    torch.manual_seed(0)
    params = SCDParams(mlp=False, projector=(16, 8), alpha=0.7, beta=0.3, offdiag_weight=0.05)
    method = SCD(params, 12)
    batch = {"input_ids": torch.zeros(6, 4, dtype=torch.long)}
    encode = FakeEncode(12)
    torch.manual_seed(1)
    out = method.compute_loss(encode, batch, step=0)
    assert encode.dropouts == [0.05, 0.155]  # view 1 at the low rate, view 2 at the high rate
    torch.manual_seed(1)
    z1, z2 = torch.randn(6, 12), torch.randn(6, 12)
    p1, p2 = method.projector(z1).tolist(), method.projector(z2).tolist()
    expected = 0.7 * ref_self_contrast(z1.tolist(), z2.tolist(), 0.05) + 0.3 * ref_decorrelation(p1, p2, 0.05)
    assert float(out.loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert set(out.metrics) == {"loss_self_contrast", "loss_decorrelation"}


def test_projector_layout_is_the_released_one():
    layers = build_projector(12, (16, 16, 8))
    kinds = [type(m).__name__ for m in layers]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU", "Linear"]
    linears = [m for m in layers if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(12, 16), (16, 16), (16, 8)]
    assert [m.bias is not None for m in linears] == [True, False, False]
    (single,) = build_projector(12, (8,))
    assert isinstance(single, torch.nn.Linear) and single.bias is None


def test_identical_views_give_the_closed_form():
    """With both rates 0 the views are the same rows: L_S = 1 / tau, and C = BN(p)^T BN(p) / B has
    the diagonal var_k / (var_k + eps), so with lambda = 0 L_C = sum_k (eps / (var_k + eps))^2."""
    encoder = load_encoder("random:tiny", seed=0)
    encoder.train()
    batch = encoder.tokenize(["a b c", "d e f g", "h i", "j k l m n", "o p q"], max_length=16)
    params = SCDParams(mlp=False, projector=(32, 16), dropout_low=0.0, dropout_high=0.0, offdiag_weight=0.0)
    method = SCD(params, encoder.hidden_size)
    out = method.compute_loss(TrainingEncode(encoder), batch, step=0)
    assert float(out.metrics["loss_self_contrast"]) == pytest.approx(1 / 0.05, rel=1e-5)
    with torch.no_grad():
        var = method.projector(TrainingEncode(encoder)(batch, dropout=0.0)).var(dim=0, unbiased=False)
    expected = float(((1e-5 / (var + 1e-5)) ** 2).sum())
    assert float(out.metrics["loss_decorrelation"]) == pytest.approx(expected, rel=1e-3, abs=1e-7)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"dropout_low": 1.0}, "dropout_low"),
        ({"dropout_high": -0.1}, "dropout_high"),
        ({"beta": -1}, "beta"),
        ({"projector": ()}, "projector"),
    ],
)
def test_bad_values_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        SCDParams.from_overrides(overrides).validate(64)


# -- the encode contract: dropout=<float rate> ----------------------------------------------------
