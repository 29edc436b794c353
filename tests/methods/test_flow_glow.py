"""BERT-flow checked numerically against the released Glow's computation, rebuilt from its equations.

The reference below is ``flow/glow_1x1.py`` (``objective_tower``) and ``flow/glow_ops_1x1.py``
(bohanli/BERT-flow) written in NumPy float64 on the released code's NHWC shapes (an embedding is a
``[n, 1, 1, d]`` image, every convolution 1x1): ``actnorm`` (``actnorm_center`` then
``actnorm_scale`` with ``logscale_factor = 3``), ``invertible_1x1_conv`` (the fixed reversal matrix
of ``permutation=True``, or ``P L (U + diag(sign(s) exp(log s)))``), ``additive_coupling`` /
``affine_coupling`` over ``conv_stack`` (``conv`` without bias + actnorm + relu, twice, then the
``zeros`` conv with bias and ``exp(3 logs)``), ``revnet_step`` / ``revnet``, ``split`` with
``compute_prior``'s fixed N(0, 1), ``top_prior``, the bits-per-dimension objective and the latent
``concat(eps + [z])``; and the reverse pass of ``encoder_decoder`` with the stored ``eps``.
The harness's :class:`methods.flow.Glow` is given random values for every parameter (so the
zero-initialised last layers do not hide a term) and both are fed the same fixed inputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from methods.flow import FlowConfig, Glow

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
