"""BERT-flow: a Glow-style normalising flow fitted to frozen sentence embeddings (post-processing).

Li et al., "On the Sentence Embeddings from Pre-trained Language Models", EMNLP 2020
(https://arxiv.org/abs/2011.05864); official code https://github.com/bohanli/BERT-flow. Not a
training method: the encoder stays frozen, a flow ``f`` is fitted by maximum likelihood on the
embeddings ``x`` of corpus sentences, and evaluation scores the latent ``z = f(x)`` instead of ``x``.

The flow (the repository's ``flow/glow_1x1.py``, ``flow/glow_ops_1x1.py`` and its default
``flow/config/config_l3_d3_w32.json``): an embedding ``x in R^d`` is treated as a 1x1 image with
``d`` channels, so every 1x1 convolution is a linear map of the channels. ``levels`` levels, each
``depth`` steps of

    actnorm       y = (x + b) * exp(3 * logs)                        log|det| = 3 * sum(logs)
    1x1 / linear  y = x W                                            log|det| = log|det W|
    coupling      x = [x1, x2];  h = NN(x1)
                  additive: y2 = x2 + h                              log|det| = 0
                  affine:   y2 = (x2 + h[0::2]) * sigmoid(h[1::2] + 2)   log|det| = sum log sigmoid(.)

then (all levels but the last) a split ``[x1, x2]`` in which ``x2`` leaves the flow with a standard
normal prior and ``x1`` goes on (no squeeze: an embedding has no spatial extent). The top latent
has a standard normal prior too, and ``z = [x2 of level 0, x2 of level 1, ..., top]`` (``d``
channels). ``NN`` is linear(width) -> actnorm -> relu -> linear(width) -> actnorm -> relu ->
zero-initialised linear with bias, scaled by ``exp(3 * logs)`` (``logs`` zero-initialised). The
objective is bits per dimension, ``-(log N(z; 0, I) + log|det dz/dx|) / (d ln 2)``.

Where the repository and the Glow description it cites disagree, :class:`FlowConfig` has both
readings (``switch`` fields, docs/baselines.md "BERT-flow"); the defaults are the released code's:

* ``coupling``: ``additive`` (the default config's) or ``affine`` (Glow's);
* ``permutation``: ``reverse`` (the default config's ``permutation: true``: a fixed channel
  reversal, no parameters, log-det 0) or ``lu`` (Glow's learned 1x1 convolution ``W = P L (U +
  diag(sign(s) exp(log s)))``, started from the LU decomposition of a random rotation);
* ``actnorm_init``: ``released`` (the repository builds the data-dependent initialisation but never
  runs it: its ``GlowInitHook`` is imported and never attached to the estimator, so actnorm starts
  from TensorFlow's default Glorot-uniform initialiser) or ``data`` (Glow's: on the first batch,
  per-channel zero mean and unit variance).

Training (``run_siamese.py``, ``optimization_bert_flow.py``, ``scripts/train_siamese.sh``): one
epoch over the fitting sentences, 32 sentence pairs (64 sentences) a step, the loss the sum of the
two sides' mean bits per dimension, BERT's AdamW (no bias correction, epsilon 1e-6, decoupled
weight decay 0.01 on every flow variable) at a constant 1e-3, gradients clipped to global norm 1.
Everything random (initialisation, rotation, shuffle) comes from ``seed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import nn

from harness.errors import ConfigError, TrainingError
from methods.params import SWITCH

CouplingKind = Literal["additive", "affine"]
Permutation = Literal["reverse", "lu"]
ActnormInit = Literal["released", "data"]
LOGSCALE_FACTOR = 3.0
"""Actnorm and the coupling network's last layer learn ``logs / 3`` (Glow's ``logscale_factor``)."""
CONV_INIT_STD = 0.05
"""Normal initialisation of the coupling network's linear layers (Glow's ``default_initializer``)."""


@dataclass(frozen=True)
class FlowConfig:
    """The flow's architecture and fit; the defaults are ``config_l3_d3_w32`` and ``run_siamese.py``'s."""

    levels: int = 3
    depth: int = 3
    width: int = 32
    coupling: CouplingKind = field(
        default="additive", metadata={SWITCH: "released: additive coupling (config); glow: affine"}
    )
    permutation: Permutation = field(
        default="reverse", metadata={SWITCH: "released: fixed channel reversal; glow: learned LU 1x1"}
    )
    actnorm_init: ActnormInit = field(
        default="released",
        metadata={SWITCH: "released: Glorot-uniform (the init hook never runs); glow: data-dependent"},
    )
    lr: float = 1e-3
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    grad_clip: float = 1.0
    batch_size: int = 64
    epochs: int = 1

    def validate(self, dim: int) -> None:
        """Raise :class:`ConfigError` when the flow cannot be built on ``dim`` channels."""
        if self.levels < 1 or self.depth < 1 or self.width < 1:
            raise ConfigError(f"flow levels, depth and width must be >= 1, got {self}")
        if self.batch_size < 1 or self.epochs < 1:
            raise ConfigError(f"flow batch_size and epochs must be >= 1, got {self}")
        if dim % (2**self.levels) != 0:
            raise ConfigError(
                f"a {self.levels}-level flow halves the channels {self.levels} times: it needs an "
                f"embedding width divisible by {2**self.levels}, got d={dim}"
            )

    def steps(self, n: int) -> int:
        """Optimiser steps of a fit on ``n`` sentences (the last partial batch dropped, at least one)."""
        return self.epochs * max(1, n // min(self.batch_size, n))


READINGS: dict[str, FlowConfig] = {
    "flow": FlowConfig(),
    "flow_glow": FlowConfig(coupling="affine", actnorm_init="data"),
}
"""The post-processing choices (``post_whiten`` values) that fit a flow: the released code's reading
and Glow's (affine coupling, data-dependent actnorm). Glow's learned LU 1x1 (``permutation="lu"``)
is not in it: with the released optimiser (lr 1e-3, no bias correction, so a first step of ~3e-3 on
every one of the d^2 entries) it diverges on 384-wide embeddings within ten steps."""


def _released_uniform(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """TensorFlow's Glorot-uniform of a ``[1, 1, 1, c]`` variable: ``U(-a, a)``, ``a = sqrt(6 / (1 + c))``."""
    limit = math.sqrt(6.0 / (1 + shape[-1]))
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * limit


class ActNorm(nn.Module):
    """``y = (x + b) * exp(3 logs)`` per channel; data-dependent initialisation on the first input
    when ``init == "data"``."""

    def __init__(self, channels: int, init: ActnormInit, gen: torch.Generator) -> None:
        super().__init__()
        if init == "released":
            self.b = nn.Parameter(_released_uniform((channels,), gen))
            self.logs = nn.Parameter(_released_uniform((channels,), gen))
        else:
            self.b = nn.Parameter(torch.zeros(channels, dtype=torch.float64))
            self.logs = nn.Parameter(torch.zeros(channels, dtype=torch.float64))
        self.pending = init == "data"

    def initialise(self, x: torch.Tensor) -> None:
        """Glow's data-dependent initialisation: zero mean and unit variance per channel on ``x``."""
        with torch.no_grad():
            mean = x.mean(dim=0)
            var = ((x - mean) ** 2).mean(dim=0)
            self.b.copy_(-mean)
            self.logs.copy_(torch.log(1.0 / (var.sqrt() + 1e-6)) / LOGSCALE_FACTOR)
        self.pending = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pending:
            self.initialise(x)
        logs = self.logs * LOGSCALE_FACTOR
        return (x + self.b) * torch.exp(logs), logs.sum().expand(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * torch.exp(-self.logs * LOGSCALE_FACTOR) - self.b


class ChannelMix(nn.Module):
    """The invertible 1x1 convolution ``y = x W``: a fixed reversal or Glow's LU-parametrised ``W``."""

    order: torch.Tensor
    p: torch.Tensor
    sign_s: torch.Tensor
    l_mask: torch.Tensor

    def __init__(self, channels: int, kind: Permutation, rng: np.random.Generator) -> None:
        super().__init__()
        self.kind = kind
        if kind == "reverse":
            self.register_buffer("order", torch.arange(channels - 1, -1, -1))
            return
        import scipy.linalg

        rotation = np.linalg.qr(rng.random((channels, channels)))[0]
        p, lower, upper = scipy.linalg.lu(rotation)
        s = np.diag(upper)
        self.register_buffer("p", torch.from_numpy(p))
        self.register_buffer("sign_s", torch.from_numpy(np.sign(s)))
        self.register_buffer("l_mask", torch.tril(torch.ones(channels, channels, dtype=torch.float64), -1))
        self.lower = nn.Parameter(torch.from_numpy(lower))
        self.upper = nn.Parameter(torch.from_numpy(np.triu(upper, 1)))
        self.log_s = nn.Parameter(torch.from_numpy(np.log(np.abs(s))))

    def weight(self) -> torch.Tensor:
        eye = torch.eye(self.l_mask.shape[0], dtype=self.l_mask.dtype, device=self.l_mask.device)
        lower = self.lower * self.l_mask + eye
        upper = self.upper * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        return self.p @ lower @ upper

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.kind == "reverse":
            return x[:, self.order], x.new_zeros(x.shape[0])
        return x @ self.weight(), self.log_s.sum().expand(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        if self.kind == "reverse":
            return y[:, self.order]
        return y @ torch.linalg.inv(self.weight())


class CouplingNet(nn.Module):
    """``NN(x1)``: linear, actnorm, relu (twice), then a zero-initialised linear scaled by ``exp(3 logs)``."""

    def __init__(self, c_in: int, width: int, c_out: int, init: ActnormInit, gen: torch.Generator) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(c_in, width, generator=gen, dtype=torch.float64) * CONV_INIT_STD)
        self.norm1 = ActNorm(width, init, gen)
        self.w2 = nn.Parameter(torch.randn(width, width, generator=gen, dtype=torch.float64) * CONV_INIT_STD)
        self.norm2 = ActNorm(width, init, gen)
        self.w3 = nn.Parameter(torch.zeros(width, c_out, dtype=torch.float64))
        self.b3 = nn.Parameter(torch.zeros(c_out, dtype=torch.float64))
        self.logs3 = nn.Parameter(torch.zeros(c_out, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norm1(x @ self.w1)[0])  # the inner actnorms' log-dets are no part of the flow's
        h = torch.relu(self.norm2(h @ self.w2)[0])
        return (h @ self.w3 + self.b3) * torch.exp(self.logs3 * LOGSCALE_FACTOR)


class Coupling(nn.Module):
    """Glow's coupling: the first half of the channels passes, the second is shifted (and scaled)."""

    def __init__(self, channels: int, config: FlowConfig, gen: torch.Generator) -> None:
        super().__init__()
        self.kind = config.coupling
        half = channels // 2
        c_out = half if self.kind == "additive" else channels
        self.net = CouplingNet(half, config.width, c_out, config.actnorm_init, gen)

    def _shift_scale(self, x1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.net(x1)
        if self.kind == "additive":
            return h, None
        return h[:, 0::2], torch.sigmoid(h[:, 1::2] + 2.0)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x1, x2 = x.chunk(2, dim=1)
        shift, scale = self._shift_scale(x1)
        if scale is None:
            return torch.cat([x1, x2 + shift], dim=1), x.new_zeros(x.shape[0])
        return torch.cat([x1, (x2 + shift) * scale], dim=1), torch.log(scale).sum(dim=1)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        y1, y2 = y.chunk(2, dim=1)
        shift, scale = self._shift_scale(y1)
        x2 = y2 - shift if scale is None else y2 / scale - shift
        return torch.cat([y1, x2], dim=1)


class FlowStep(nn.Module):
    """One step of the flow: actnorm, the 1x1 convolution, the coupling."""

    def __init__(
        self, channels: int, config: FlowConfig, gen: torch.Generator, rng: np.random.Generator
    ) -> None:
        super().__init__()
        self.actnorm = ActNorm(channels, config.actnorm_init, gen)
        self.mix = ChannelMix(channels, config.permutation, rng)
        self.coupling = Coupling(channels, config, gen)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, a = self.actnorm(x)
        x, b = self.mix(x)
        x, c = self.coupling(x)
        return x, a + b + c

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return self.actnorm.inverse(self.mix.inverse(self.coupling.inverse(y)))


class Glow(nn.Module):
    """The multi-level flow: ``levels`` x (``depth`` x [actnorm, 1x1, coupling], split)."""

    def __init__(self, dim: int, config: FlowConfig, seed: int = 0) -> None:
        super().__init__()
        config.validate(dim)
        gen = torch.Generator().manual_seed(seed)
        rng = np.random.default_rng(seed)
        self.dim = dim
        self.n_levels = config.levels
        self.by_level: list[list[FlowStep]] = [
            [FlowStep(dim // 2**level, config, gen, rng) for _ in range(config.depth)]
            for level in range(config.levels)
        ]
        self.steps = nn.ModuleList([step for level in self.by_level for step in level])  # registered

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z [n, d], log p(x) [n])``: the latent and the log-density by the change of variables."""
        log_p = x.new_zeros(x.shape[0])
        left: list[torch.Tensor] = []
        for level, steps in enumerate(self.by_level):
            for step in steps:
                x, log_det = step(x)
                log_p = log_p + log_det
            if level < self.n_levels - 1:  # the second half leaves the flow with a N(0, I) prior
                x, out = x.chunk(2, dim=1)
                left.append(out)
        z = torch.cat([*left, x], dim=1)
        return z, log_p + standard_normal_log_prob(z)

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        """``x = f^-1(z)``."""
        sizes = [self.dim // 2 ** (level + 1) for level in range(self.n_levels - 1)]
        parts = list(z.split([*sizes, z.shape[1] - sum(sizes)], dim=1))
        x = parts.pop()
        for level in reversed(range(self.n_levels)):
            if level < self.n_levels - 1:
                x = torch.cat([x, parts[level]], dim=1)
            for step in reversed(self.by_level[level]):
                x = step.inverse(x)
        return x

    def bits_per_dim(self, x: torch.Tensor) -> torch.Tensor:
        """The per-sentence objective ``-log p(x) / (d ln 2)``."""
        return -self(x)[1] / (self.dim * math.log(2.0))


def standard_normal_log_prob(z: torch.Tensor) -> torch.Tensor:
    """``log N(z; 0, I)`` summed over the channels: ``[n]``."""
    return -0.5 * (z**2).sum(dim=1) - 0.5 * z.shape[1] * math.log(2 * math.pi)


@dataclass(frozen=True)
class FittedFlow:
    """A fitted flow and its loss per step (the mean bits per dimension of each step's batch)."""

    flow: Glow
    losses: tuple[float, ...]

    def transform(self, x: np.ndarray) -> np.ndarray:
        """The latents ``z = f(x)`` of embeddings ``[n, d]``, float32."""
        dtype = next(self.flow.parameters()).dtype
        with torch.no_grad():
            z, _ = self.flow(torch.as_tensor(np.asarray(x), dtype=dtype))
        return z.numpy().astype(np.float32)


def _adamw_step(
    params: list[nn.Parameter], state: dict[int, tuple[torch.Tensor, torch.Tensor]], cfg: FlowConfig
) -> None:
    """One step of BERT's AdamWeightDecayOptimizer (no bias correction, decoupled weight decay)."""
    with torch.no_grad():
        for i, p in enumerate(params):
            if p.grad is None:
                continue
            m, v = state.setdefault(i, (torch.zeros_like(p), torch.zeros_like(p)))
            m.mul_(0.9).add_(p.grad, alpha=0.1)
            v.mul_(0.999).addcmul_(p.grad, p.grad, value=0.001)
            p.sub_(cfg.lr * (m / (v.sqrt() + cfg.adam_eps) + cfg.weight_decay * p))


def fit_flow(
    x: np.ndarray, config: FlowConfig | None = None, *, seed: int = 0, dtype: torch.dtype = torch.float32
) -> FittedFlow:
    """Fit a flow by maximum likelihood on embeddings ``x: [n, d]`` (see the module docstring).

    Raises:
        ConfigError: ``x`` is not a finite ``[n >= 2, d]`` array, or ``d`` does not suit the flow.
    """
    cfg = config or FlowConfig()
    arr = np.asarray(x)
    if arr.ndim != 2 or arr.shape[0] < 2:
        raise ConfigError(f"a flow fit needs a [n >= 2, d] array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError("a flow fit got non-finite embeddings")
    cfg.validate(arr.shape[1])
    flow = Glow(arr.shape[1], cfg, seed).to(dtype)
    data = torch.as_tensor(arr, dtype=dtype)
    params = [p for p in flow.parameters() if p.requires_grad]
    state: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    rng = np.random.default_rng(seed)
    batch = min(cfg.batch_size, len(arr))
    losses: list[float] = []
    for _ in range(cfg.epochs):
        order = rng.permutation(len(arr))
        for start in range(0, len(arr) - batch + 1, batch):
            rows = data[torch.from_numpy(order[start : start + batch])]
            half = batch // 2 or 1  # the two sides of the released code's sentence pairs
            nll = flow.bits_per_dim(rows)
            loss = nll[:half].mean() + (nll[half:].mean() if batch > half else 0.0)
            flow.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            _adamw_step(params, state, cfg)
            losses.append(float(nll.detach().mean()))
    if not all(math.isfinite(v) for v in losses):
        raise TrainingError("the flow fit diverged (non-finite negative log-likelihood)")
    flow.eval()
    return FittedFlow(flow, tuple(losses))


def reading_of(kind: str) -> FlowConfig:
    """The :class:`FlowConfig` of a ``post_whiten`` choice that fits a flow."""
    try:
        return READINGS[kind]
    except KeyError:
        raise ConfigError(f"{kind!r} is not a flow reading; choose one of {', '.join(READINGS)}") from None


__all__ = [
    "READINGS",
    "FittedFlow",
    "FlowConfig",
    "Glow",
    "fit_flow",
    "reading_of",
    "standard_normal_log_prob",
]
