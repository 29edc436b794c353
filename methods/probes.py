"""The SimCSE++ probes: dropout-noise probes (Table 1) and Barlow Twins padding probes (Table 2).

Xu et al., "SimCSE++: Improving Contrastive Learning for Sentence Embeddings from Two Perspectives",
EMNLP 2023, Sec. 3 (METHODS.md Sec. 4). Both are SimCSE plus one injected change: the noise probes
swap the representations of the positive OR the negative pairs inside
:func:`~methods.losses.split_info_nce`; the Barlow probe adds a Barlow Twins term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Metric
from methods.losses import (
    barlow_twins_objective,
    correlation_rank,
    cross_correlation,
    info_nce,
    split_info_nce,
)
from methods.params import ContrastiveParams, check_non_negative, switch
from methods.simcse import ContrastiveMethod
from methods.simcsepp import SIMCSEPP_CITATION

NoiseVariant = Literal["pos_plus_noise", "neg_plus_noise", "pos_minus_noise", "neg_minus_noise"]


@dataclass(frozen=True)
class NoiseProbeParams(ContrastiveParams):
    """Hyper-parameters of the dropout-noise probes (grid keys), besides ``temperature`` and ``mlp``
    (noise and averaging act on the head's output).

    Attributes:
        variant: ``pos_plus_noise`` | ``neg_plus_noise`` | ``pos_minus_noise`` | ``neg_minus_noise``.
        noise_var: variance of the Gaussian noise of the ``+noise`` variants (paper: 0.1).
        k_samples: ``K`` dropout encodings averaged by the ``-noise`` variants (paper: 10).
        k_independent: ``False`` (default): the pair's other side (``z1, z2``) is the first of the
            ``K`` samples of each mean; ``True`` (the paper's description): ``z1, z2`` are two extra
            dropout views, independent of the ``2K`` averaged ones (``2K + 2`` encoder rows).
    """

    variant: NoiseVariant = "pos_plus_noise"
    noise_var: float = 0.1
    k_samples: int = 10
    k_independent: bool = switch(False, "false: z1, z2 are among the K samples; true: independent (paper)")

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        check_non_negative(self.noise_var, "noise_var")
        if self.k_samples < 1:
            raise ConfigError(f"k_samples must be >= 1, got {self.k_samples}")


class NoiseProbe(ContrastiveMethod[NoiseProbeParams]):
    """SimCSE with more (``+noise``) or less (``-noise``) noise on the positive or negative pairs.

    With ``z1, z2`` two dropout views after the head, ``e1, e2 ~ N(0, noise_var I)`` drawn fresh each
    step, and ``zbar1, zbar2`` the means of two disjoint sets of ``K`` dropout views after the head
    (one encoder call on ``2K`` copies of each sentence; ``z1, z2`` are then the first view of each
    set; with ``k_independent`` two further views, independent of the ``2K``), the loss is
    :func:`~methods.losses.split_info_nce` with

    * ``pos_plus_noise``: positives ``(z1 + e1, z2 + e2)``, negatives ``(z1, z2)``;
    * ``neg_plus_noise``: positives ``(z1, z2)``, negatives ``(z1 + e1, z2 + e2)``;
    * ``pos_minus_noise``: positives ``(zbar1, zbar2)``, negatives ``(z1, z2)``;
    * ``neg_minus_noise``: positives ``(z1, z2)``, negatives ``(zbar1, zbar2)``.

    ``noise_var = 0`` or ``K = 1`` gives SimCSE. The ``-noise`` variants cost ``K`` times SimCSE's
    encoder rows.
    """

    name = "noise_probe"
    description = (
        "SimCSE++ Table 1 probe: Gaussian noise added to, or dropout noise averaged out of, the positive "
        "or the negative pairs."
    )
    citation = SIMCSEPP_CITATION
    smoke_params = ({"variant": "neg_plus_noise"}, {"variant": "pos_minus_noise", "k_samples": 2})

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        if p.variant in ("pos_plus_noise", "neg_plus_noise"):
            views = self.head(self.encode_views(encode, batch, 2))
            z1, z2 = views[:, 0], views[:, 1]
            std = math.sqrt(p.noise_var)
            n1, n2 = z1 + std * torch.randn_like(z1), z2 + std * torch.randn_like(z2)
            if p.variant == "pos_plus_noise":
                loss = split_info_nce(n1, n2, z1, z2, p.temperature)
            else:
                loss = split_info_nce(z1, z2, n1, n2, p.temperature)
        else:
            k = p.k_samples
            extra = 2 if p.k_independent else 0
            views = self.head(self.encode_views(encode, batch, 2 * k + extra))
            m1, m2 = views[:, :k].mean(dim=1), views[:, k : 2 * k].mean(dim=1)
            if p.k_independent:
                z1, z2 = views[:, 2 * k], views[:, 2 * k + 1]
            else:
                z1, z2 = views[:, 0], views[:, k]
            if p.variant == "pos_minus_noise":
                loss = split_info_nce(m1, m2, z1, z2, p.temperature)
            else:
                loss = split_info_nce(z1, z2, m1, m2, p.temperature)
        return LossOutput(loss, {"loss_infonce": loss.detach()})


@dataclass(frozen=True)
class BarlowProbeParams(ContrastiveParams):
    """Hyper-parameters of the Barlow Twins padding probe (grid keys), besides ``temperature`` and
    ``mlp`` (the term acts on the head's output, like InfoNCE).

    Attributes:
        padding_rows: ``M`` artificial N(0, 1) rows appended to both views (Table 2: 0, 100, 300, 704).
        bt_weight: weight of the Barlow Twins term (1.0: Barlow Twins' own summed scale; SimCSE++
            does not state its weight).
        offdiag_weight: Barlow Twins' ``lambda`` for the off-diagonal terms (5e-3, their default).
        correlation: ``centred`` (default, Barlow Twins' code: batch-normalised views, rank at most
            ``B + M - 1``) or ``uncentred`` (SimCSE++ Eq. 4 as printed: no centring, rank at most
            ``B + M``, so the logged rank matches the paper's "64" at B = 64 without padding).
        rank_every: compute ``corr_rank`` on step 1 and every ``rank_every`` steps (0 = never). The
            rank is an SVD of a d x d matrix: on a GPU at bert-base size it costs more than the
            training step itself, so it is sampled; the loop logs the mean of the sampled values.
    """

    padding_rows: int = 0
    bt_weight: float = 1.0
    offdiag_weight: float = 5e-3
    correlation: Literal["centred", "uncentred"] = switch(
        "centred", "centred: batch-normalised (rank <= B+M-1); uncentred: Eq. 4 as printed (<= B+M)"
    )
    rank_every: int = 10

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if self.padding_rows < 0:
            raise ConfigError(f"padding_rows must be >= 0, got {self.padding_rows}")
        check_non_negative(self.bt_weight, "bt_weight")
        check_non_negative(self.offdiag_weight, "offdiag_weight")
        if self.rank_every < 0:
            raise ConfigError(f"rank_every must be >= 0, got {self.rank_every}")


class BarlowProbe(ContrastiveMethod[BarlowProbeParams]):
    """``InfoNCE(z1, z2) + bt_weight * BarlowTwins([z1; P], [z2; P])``.

    ``P`` is ``[M, d]`` drawn fresh from N(0, 1) every step and appended to BOTH views (the same rows:
    each artificial row is a perfectly aligned pair), before the batch normalisation of the
    cross-correlation. ``metrics["corr_rank"]`` is the rank of the ``d x d`` correlation matrix
    (at most ``B + M - 1`` centred, ``B + M`` uncentred; the probe shows the rank bottleneck
    ``rank <= B`` without padding).
    """

    name = "barlow_probe"
    description = (
        "SimCSE++ Table 2 probe: SimCSE plus a Barlow Twins term whose views are padded with M "
        "artificial N(0, 1) rows."
    )
    citation = SIMCSEPP_CITATION
    smoke_params = ({"padding_rows": 320},)

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        views = self.head(self.encode_views(encode, batch, 2))
        z1, z2 = views[:, 0], views[:, 1]
        nce = info_nce(z1, z2, p.temperature)
        padding = None
        if p.padding_rows > 0:
            padding = torch.randn(p.padding_rows, z1.shape[1], dtype=z1.dtype, device=z1.device)
        c = cross_correlation(z1, z2, padding, centre=p.correlation == "centred")
        bt = barlow_twins_objective(c, p.offdiag_weight)
        metrics: dict[str, Metric] = {"loss_infonce": nce.detach(), "loss_bt": bt.detach()}
        if p.rank_every and (step <= 1 or step % p.rank_every == 0):
            metrics["corr_rank"] = float(correlation_rank(c))
        return LossOutput(nce + p.bt_weight * bt, metrics)
