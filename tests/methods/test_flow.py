"""BERT-flow (methods/flow.py): the change of variables by brute force, inverses, actnorm's
initialisation, the fit, and the checks on its input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from harness.errors import ConfigError
from methods.flow import READINGS, ActNorm, ChannelMix, FlowConfig, Glow, fit_flow, standard_normal_log_prob

CONFIGS = {
    **READINGS,
    "lu": FlowConfig(permutation="lu"),
    "affine_lu_data": FlowConfig(coupling="affine", permutation="lu", actnorm_init="data"),
}


def correlated(seed: int, n: int, d: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mix = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    return torch.randn(n, d, generator=g, dtype=torch.float64) @ mix + 0.5


def trained_looking(dim: int, config: FlowConfig, seed: int) -> Glow:
    """A float64 flow whose every parameter is moved off its initial value (the zero-initialised
    last layer of each coupling network would otherwise make every coupling the identity)."""
    flow = Glow(dim, config, seed)
    flow(correlated(seed + 100, 32, dim))  # data-dependent actnorm initialisation, where it is on
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return flow


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize(("dim", "levels", "depth"), [(8, 1, 1), (8, 2, 2), (16, 3, 2), (24, 3, 1)])
def test_log_likelihood_is_the_change_of_variables(name: str, dim: int, levels: int, depth: int) -> None:
    """log p(x) = log N(f(x); 0, I) + log|det df/dx|, the Jacobian taken by autograd, row by row."""
    config = dataclasses.replace(CONFIGS[name], levels=levels, depth=depth, width=8)
    flow = trained_looking(dim, config, seed=dim + levels)
    x = correlated(7, 4, dim)
    _, log_p = flow(x)
    for i in range(len(x)):

        def f(row: torch.Tensor) -> torch.Tensor:
            return flow(row.unsqueeze(0))[0][0]

        jac = torch.autograd.functional.jacobian(f, x[i])
        _, log_abs_det = torch.linalg.slogdet(jac)
        direct = standard_normal_log_prob(f(x[i]).unsqueeze(0))[0] + log_abs_det
        assert log_p[i].item() == pytest.approx(direct.item(), rel=1e-7, abs=1e-6)  # slogdet rounding


def test_standard_normal_log_prob_is_the_density() -> None:
    z = correlated(0, 5, 6)
    expected = torch.distributions.Normal(0.0, 1.0).log_prob(z).sum(dim=1)
    torch.testing.assert_close(standard_normal_log_prob(z), expected)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_inverse_round_trips(name: str) -> None:
    flow = trained_looking(32, CONFIGS[name], seed=3)
    x = correlated(9, 16, 32)
    z, _ = flow(x)
    assert not torch.allclose(z, x, atol=1e-3)
    torch.testing.assert_close(flow.inverse(z), x, rtol=1e-9, atol=1e-8)
    torch.testing.assert_close(flow(flow.inverse(z))[0], z, rtol=1e-9, atol=1e-8)


def test_data_dependent_actnorm_gives_zero_mean_unit_variance() -> None:
    x = correlated(1, 200, 12) * torch.linspace(0.1, 5.0, 12, dtype=torch.float64)
    norm = ActNorm(12, "data", torch.Generator().manual_seed(0))
    y, log_det = norm(x)
    torch.testing.assert_close(y.mean(dim=0), torch.zeros(12, dtype=torch.float64), rtol=0, atol=1e-10)
    std = x.std(dim=0, unbiased=False)  # unit variance up to Glow's 1e-6 beside the deviation
    torch.testing.assert_close(y.std(dim=0, unbiased=False), std / (std + 1e-6), rtol=1e-12, atol=0)
    assert (y.var(dim=0, unbiased=False) - 1).abs().max().item() < 1e-4
    expected = -torch.log(std + 1e-6).sum()  # log|det| = sum log(scale)
    assert log_det[0].item() == pytest.approx(expected.item(), rel=1e-12)
    y2, _ = norm(x * 3.0)  # initialised once: a second batch goes through the same transform
    torch.testing.assert_close(y2, (x * 3.0 + norm.b) * torch.exp(3 * norm.logs))


def test_released_actnorm_starts_from_tensorflows_glorot_uniform() -> None:
    norm = ActNorm(768, "released", torch.Generator().manual_seed(0))
    limit = math.sqrt(6.0 / 769)
    for values in (norm.b, norm.logs):
        assert values.abs().max().item() <= limit
        assert values.abs().max().item() > 0.9 * limit  # spread over the whole range, not zeros
    assert not norm.pending


def test_channel_mixes() -> None:
    x = correlated(2, 3, 6)
    reverse = ChannelMix(6, "reverse", np.random.default_rng(0))
    y, log_det = reverse(x)
    torch.testing.assert_close(y, x.flip(1))
    assert log_det.abs().max().item() == 0.0
    lu = ChannelMix(6, "lu", np.random.default_rng(0)).double()
    w = lu.weight().detach()
    torch.testing.assert_close(w @ w.T, torch.eye(6, dtype=torch.float64), rtol=0, atol=1e-10)  # a rotation
    assert abs(lu(x)[1][0].item()) < 1e-10  # |det| of a rotation is 1


@pytest.mark.parametrize("name", sorted(READINGS))
def test_fit_lowers_the_negative_log_likelihood(name: str) -> None:
    data = correlated(4, 3500, 16)  # one distribution: the held-out rows are its last 500
    train, held_out = data[:3000], data[3000:]
    config = dataclasses.replace(READINGS[name], epochs=3)
    before = Glow(16, config, seed=0).to(torch.float32)
    before(train[:64].float())  # the fit's first batch initialises a data-dependent actnorm the same way
    fitted = fit_flow(train.numpy(), config, seed=0)
    assert len(fitted.losses) == config.steps(3000) == 3 * (3000 // 64)
    with torch.no_grad():
        nll_before = before.bits_per_dim(held_out.float()).mean().item()
        nll_after = fitted.flow.bits_per_dim(held_out.float()).mean().item()
    assert nll_after < nll_before - 0.2
    assert np.mean(fitted.losses[-10:]) < np.mean(fitted.losses[:10])


def test_fit_is_seeded_and_transform_is_the_latent() -> None:
    x = correlated(6, 300, 16).numpy()
    a, b = fit_flow(x, seed=1), fit_flow(x, seed=1)
    c = fit_flow(x, seed=2)
    za = a.transform(x[:20])
    assert za.dtype == np.float32 and za.shape == (20, 16)
    np.testing.assert_array_equal(za, b.transform(x[:20]))
    assert not np.allclose(za, c.transform(x[:20]))
    with torch.no_grad():
        z, _ = a.flow(torch.as_tensor(x[:20], dtype=torch.float32))
    np.testing.assert_array_equal(za, z.numpy())


def test_fewer_sentences_than_a_batch_still_take_one_step() -> None:
    assert FlowConfig().steps(10000) == 156
    assert FlowConfig().steps(40) == 1
    assert len(fit_flow(correlated(0, 40, 8).numpy()).losses) == 1


def test_bad_input_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="divisible by 8"):
        fit_flow(np.zeros((10, 12)))
    with pytest.raises(ConfigError, match="non-finite"):
        fit_flow(np.full((10, 16), np.nan))
    with pytest.raises(ConfigError, match=r"\[n >= 2, d\]"):
        fit_flow(np.zeros((1, 16)))
    with pytest.raises(ConfigError, match="levels"):
        FlowConfig(levels=0).validate(16)
