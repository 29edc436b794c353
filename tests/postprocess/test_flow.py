"""BERT-flow (harness/postprocess/flow.py): the change of variables by brute force, inverses, actnorm's
initialisation, the fit, and the checks on its input; the released Glow's computation rebuilt in
NumPy (bohanli/BERT-flow), and its released reading as the default."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
import torch

from harness.errors import ConfigError
from harness.postprocess.flow import (
    READINGS,
    ActNorm,
    ChannelMix,
    FlowConfig,
    Glow,
    fit_flow,
    standard_normal_log_prob,
)
from methods.params import SWITCH

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


# -- against the released Glow (bohanli/BERT-flow) -----------------------------------------------------
# BERT-flow checked numerically against the released Glow's computation, rebuilt from its equations.
#
# The reference below is ``flow/glow_1x1.py`` (``objective_tower``) and ``flow/glow_ops_1x1.py``
# (bohanli/BERT-flow) written in NumPy float64 on the released code's NHWC shapes (an embedding is a
# ``[n, 1, 1, d]`` image, every convolution 1x1): ``actnorm`` (``actnorm_center`` then
# ``actnorm_scale`` with ``logscale_factor = 3``), ``invertible_1x1_conv`` (the fixed reversal matrix
# of ``permutation=True``, or ``P L (U + diag(sign(s) exp(log s)))``), ``additive_coupling`` /
# ``affine_coupling`` over ``conv_stack`` (``conv`` without bias + actnorm + relu, twice, then the
# ``zeros`` conv with bias and ``exp(3 logs)``), ``revnet_step`` / ``revnet``, ``split`` with
# ``compute_prior``'s fixed N(0, 1), ``top_prior``, the bits-per-dimension objective and the latent
# ``concat(eps + [z])``; and the reverse pass of ``encoder_decoder`` with the stored ``eps``.
# The harness's :class:`harness.postprocess.flow.Glow` is given random values for every parameter (so the
# zero-initialised last layers do not hide a term) and both are fed the same fixed inputs.

LOG2 = math.log(2.0)

Arr = np.ndarray


def normal_log_prob(x: Arr) -> Arr:
    """``tf.distributions.Normal(0, exp(0)).log_prob``, summed over axes 1, 2, 3."""
    return (-0.5 * x**2 - 0.5 * math.log(2 * math.pi)).sum(axis=(1, 2, 3))


def conv1x1(x: Arr, w: Arr) -> Arr:
    """``tf.nn.conv2d``, a ``[1, 1, c_in, c_out]`` filter on NHWC: ``y[..., o] = sum_c x[..., c] W[c, o]``."""
    return np.einsum("nhwc,co->nhwo", x, w)


def actnorm(p: dict[str, Arr], x: Arr, reverse: bool = False) -> tuple[Arr, float]:
    """``actnorm``: center (``x + b``), then scale (``x * exp(3 logs)``); reversed in reverse."""
    logs = p["logs"] * 3.0
    h, w = x.shape[1], x.shape[2]
    if not reverse:
        return (x + p["b"]) * np.exp(logs), float(logs.sum()) * h * w
    return x * np.exp(-logs) - p["b"], -float(logs.sum()) * h * w


def invertible_1x1(p: dict[str, Arr], x: Arr, reverse: bool) -> tuple[Arr, Arr]:
    c = x.shape[-1]
    if "P" not in p:  # permutation=True: np_w[i][c - 1 - i] = 1, no objective
        w = np.zeros((c, c))
        for i in range(c):
            w[i][c - 1 - i] = 1.0
        return conv1x1(x, np.linalg.inv(w) if reverse else w), np.zeros(x.shape[0])
    l_mask = np.tril(np.ones((c, c)), -1)
    lower = p["L"] * l_mask + np.eye(c)
    upper = p["U"] * l_mask.T + np.diag(p["sign_S"] * np.exp(p["log_S"]))
    w = p["P"] @ (lower @ upper)
    objective = p["log_S"].sum() * x.shape[1] * x.shape[2]
    if not reverse:
        return conv1x1(x, w), np.full(x.shape[0], objective)
    return conv1x1(x, np.linalg.inv(w)), np.full(x.shape[0], -objective)


def conv_stack(p: dict[str, Any], x: Arr) -> Arr:
    """``conv_block`` (conv 1_1 + actnorm + relu, conv 1_2 + actnorm + relu), then the ``zeros`` conv."""
    h = np.maximum(actnorm(p["1_1/actnorm"], conv1x1(x, p["1_1/W"]))[0], 0.0)
    h = np.maximum(actnorm(p["1_2/actnorm"], conv1x1(h, p["1_2/W"]))[0], 0.0)
    return (conv1x1(h, p["zeros/W"]) + p["zeros/b"]) * np.exp(p["zeros/logs"] * 3.0)


def coupling(p: dict[str, Any], x: Arr, affine: bool, reverse: bool) -> tuple[Arr, Arr]:
    c = x.shape[-1]
    x1, x2 = x[..., : c // 2], x[..., c // 2 :]
    h = conv_stack(p, x1)
    if not affine:  # additive_coupling
        z2 = x2 - h if reverse else x2 + h
        return np.concatenate([x1, z2], axis=3), np.zeros(x.shape[0])
    shift, scale = h[..., 0::2], 1.0 / (1.0 + np.exp(-(h[..., 1::2] + 2.0)))
    z2 = x2 / scale - shift if reverse else (x2 + shift) * scale
    objective = np.log(scale).sum(axis=(1, 2, 3))
    return np.concatenate([x1, z2], axis=3), -objective if reverse else objective


def revnet(steps: list[dict[str, Any]], x: Arr, affine: bool, reverse: bool) -> tuple[Arr, Arr]:
    objective = np.zeros(x.shape[0])
    for p in reversed(steps) if reverse else steps:
        ops: list[Any] = [
            lambda x, p=p: actnorm(p["actnorm"], x, reverse),
            lambda x, p=p: invertible_1x1(p["invertible"], x, reverse),
            lambda x, p=p: coupling(p["coupling"], x, affine, reverse),
        ]
        for op in reversed(ops) if reverse else ops:
            x, obj = op(x)
            objective = objective + obj
    return x, objective


def released_objective(
    levels: list[list[dict[str, Any]]], x: Arr, affine: bool
) -> tuple[Arr, Arr, list[Arr]]:
    """``objective_tower``: bits per dimension, the latent ``concat(eps + [z])`` and the eps list."""
    feats = x[:, None, None, :]
    objective = np.zeros(x.shape[0])
    eps: list[Arr] = []
    h = feats
    for level, steps in enumerate(levels):
        h, obj = revnet(steps, h, affine, reverse=False)
        objective = objective + obj
        if level < len(levels) - 1:  # split: x2 ~ N(0, 1) (compute_prior), eps = (x2 - 0) / 1
            c = h.shape[-1]
            h, x2 = h[..., : c // 2], h[..., c // 2 :]
            objective = objective + normal_log_prob(x2)
            eps.append(x2)
    objective = objective + normal_log_prob(h)  # top_prior "normal"
    bits = -objective / (LOG2 * feats.shape[1] * feats.shape[2] * feats.shape[3])
    z = np.concatenate([*eps, h], axis=-1)[:, 0, 0, :]
    return bits, z, eps


def released_reverse(levels: list[list[dict[str, Any]]], z_top: Arr, eps: list[Arr], affine: bool) -> Arr:
    """``encoder_decoder(reverse=True)`` with the forward pass's eps: split's ``concat([x, x2])``."""
    h = z_top
    for level in reversed(range(len(levels))):
        if level < len(levels) - 1:
            h = np.concatenate([h, eps[level]], axis=3)
        h, _ = revnet(levels[level], h, affine, reverse=True)
    return h[:, 0, 0, :]


def as_released(flow: Glow) -> list[list[dict[str, Any]]]:
    """The harness flow's parameters under the released code's variable names, per level and step."""

    def np_(t: torch.Tensor) -> Arr:
        return t.detach().cpu().numpy().astype(np.float64)

    def norm(module: Any) -> dict[str, Arr]:
        return {"b": np_(module.b), "logs": np_(module.logs)}

    levels = []
    for steps in flow.by_level:
        out = []
        for step in steps:
            mix = step.mix
            invertible: dict[str, Arr] = {}
            if mix.kind == "lu":
                invertible = {"P": np_(mix.p), "L": np_(mix.lower), "U": np_(mix.upper)}
                invertible.update(sign_S=np_(mix.sign_s), log_S=np_(mix.log_s))
            net = step.coupling.net
            out.append(
                {
                    "actnorm": norm(step.actnorm),
                    "invertible": invertible,
                    "coupling": {
                        "1_1/W": np_(net.w1),
                        "1_1/actnorm": norm(net.norm1),
                        "1_2/W": np_(net.w2),
                        "1_2/actnorm": norm(net.norm2),
                        "zeros/W": np_(net.w3),
                        "zeros/b": np_(net.b3),
                        "zeros/logs": np_(net.logs3),
                    },
                }
            )
        levels.append(out)
    return levels


CASES = [
    (16, 3, 3, 5, "additive", "reverse"),  # the released default config's shape (l3, d3), narrower
    (16, 3, 2, 4, "affine", "reverse"),
    (8, 2, 2, 3, "additive", "lu"),
    (12, 2, 3, 6, "affine", "lu"),
    (8, 1, 2, 4, "additive", "reverse"),  # one level: no split
]


@pytest.mark.parametrize(("dim", "levels", "depth", "width", "kind", "permutation"), CASES)
def test_log_likelihood_latent_and_inverse_match_the_released_glow(
    dim, levels, depth, width, kind, permutation
):
    config = FlowConfig(levels=levels, depth=depth, width=width, coupling=kind, permutation=permutation)
    flow = Glow(dim, config, seed=dim + depth)
    gen = torch.Generator().manual_seed(levels * 100 + width)
    with torch.no_grad():  # every parameter random: the zero-initialised last layers included
        for param in flow.parameters():
            param.copy_(torch.randn(param.shape, generator=gen, dtype=param.dtype) * 0.15)
    x = np.random.default_rng(dim * depth).normal(size=(5, dim)) * 1.5
    reference = as_released(flow)

    bits, z_ref, eps = released_objective(reference, x, affine=kind == "affine")
    xt = torch.from_numpy(x)
    z, log_p = flow(xt)
    np.testing.assert_allclose(flow.bits_per_dim(xt).detach().numpy(), bits, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log_p.detach().numpy(), -bits * dim * LOG2, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(z.detach().numpy(), z_ref, rtol=1e-12, atol=1e-12)

    z_top = z_ref[:, None, None, dim - dim // 2 ** (levels - 1) :]
    x_back = released_reverse(reference, z_top, eps, affine=kind == "affine")
    np.testing.assert_allclose(x_back, x, rtol=1e-9, atol=1e-10)  # the released inverse inverts
    with torch.no_grad():
        np.testing.assert_allclose(
            flow.inverse(torch.from_numpy(z_ref)).numpy(), x_back, rtol=1e-9, atol=1e-10
        )


def test_the_released_reversal_matrix_is_the_harness_channel_order() -> None:
    c = 6
    flow = Glow(c * 2, FlowConfig(levels=1, depth=1, width=2), seed=0)
    mix = flow.by_level[0][0].mix
    x = np.arange(2.0 * c * 2).reshape(2, 1, 1, c * 2)
    y, obj = invertible_1x1({}, x, reverse=False)
    with torch.no_grad():
        ours, log_det = mix(torch.from_numpy(x[:, 0, 0, :]))
    np.testing.assert_array_equal(ours.numpy(), y[:, 0, 0, :])
    assert not obj.any() and not log_det.any()


FLOW_RELEASED = {"coupling": "additive", "permutation": "reverse", "actnorm_init": "released"}
"""BERT-flow's FlowConfig: flow/config/config_l3_d3_w32.json and the init hook that never runs."""


def test_the_flows_released_reading_is_the_default() -> None:
    switches = {f.name for f in dataclasses.fields(FlowConfig) if SWITCH in f.metadata}
    assert switches == set(FLOW_RELEASED)
    config = FlowConfig()
    assert {k: getattr(config, k) for k in FLOW_RELEASED} == FLOW_RELEASED
