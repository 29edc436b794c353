"""SCD: self-contrast of two dropout views at different rates, plus Barlow-Twins decorrelation of
their projections.

Klein and Nabi, "SCD: Self-Contrastive Decorrelation of Sentence Embeddings", ACL 2022.
https://arxiv.org/abs/2203.07847; official code:
https://github.com/SAP-samples/acl2022-self-contrastive-decorrelation (``scd/models.py``
``cl_init``/``cl_forward``, ``train.py``, the README's training command, the patched
``modeling_bert.py``). docs/baselines.md lists where each value comes from.

One training step:

1. Two views of every sentence: ``z1`` with every dropout of the encoder at ``dropout_low`` and
   ``z2`` at ``dropout_high`` (two encoder calls with ``encode(batch, dropout=rate)``; the released
   code gets both in one forward by patching every dropout of BERT to alternate the two rates over
   the rows, which draws the same distribution). ``head`` (the shared ``mlp``) is applied if on; the
   released code trains with the ``cls_before_pooler`` pooler, where it applies no MLP, so the
   spec rows set ``mlp = false``.
2. Self-contrast: ``L_S = mean_i cos(z1_i, z2_i) / tau``, MINIMISED (the two views of a sentence
   are pushed apart; there are no negatives).
3. Decorrelation: ``p = projector(z)`` (Linear with bias, BatchNorm, ReLU, then Linear without bias,
   BatchNorm, ReLU per further hidden size, then a last Linear without bias) applied to each view;
   ``C = BN(p1)^T BN(p2) / B`` (affine-free batch norm) and
   ``L_C = sum_k (1 - C_kk)^2 + lambda sum_{k != l} C_kl^2`` (Barlow Twins:
   :func:`methods.losses.barlow_twins_loss`).
4. ``loss = alpha * L_S + beta * L_C``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput
from methods.losses import barlow_twins_loss
from methods.params import ContrastiveParams, check_non_negative
from methods.simcse import ContrastiveMethod


def self_contrast(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """SCD's self-contrast term ``mean_i cos(z1_i, z2_i) / tau`` (to be minimised)."""
    return (F.cosine_similarity(z1, z2, dim=-1) / temperature).mean()


def build_projector(in_size: int, sizes: tuple[int, ...]) -> nn.Sequential:
    """SCD's projector: ``Linear(in, s1)``, then for each further size BatchNorm + ReLU and a
    bias-free Linear. As in the released ``cl_init``, only the first of two or more Linears has a
    bias (a one-size projector is one bias-free Linear); weights normal(0, 0.02), biases 0 (BERT's
    initialisation, which the released code's ``init_weights`` applies)."""
    dims = [in_size, *sizes]
    layers: list[nn.Module] = []
    for i in range(len(dims) - 1):
        if i > 0:
            layers += [nn.BatchNorm1d(dims[i]), nn.ReLU()]
        linear = nn.Linear(dims[i], dims[i + 1], bias=i == 0 and len(sizes) > 1)
        nn.init.normal_(linear.weight, mean=0.0, std=0.02)
        if linear.bias is not None:
            nn.init.zeros_(linear.bias)
        layers.append(linear)
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class SCDParams(ContrastiveParams):
    """Hyper-parameters of SCD (grid keys), besides the shared ``temperature`` and ``mlp``.

    Attributes:
        dropout_low: dropout rate of view 1, every dropout of the encoder (README command
            ``--hidden_dropout_prob=0.05``; attention dropout follows it in train.py).
        dropout_high: dropout rate of view 2 (README ``--hidden_dropout_prob_noise=0.155``).
        alpha: weight of the self-contrast term (README ``--task_alpha=1``).
        beta: weight of the decorrelation term (README ``--task_beta=0.005225``).
        offdiag_weight: ``lambda`` on the off-diagonal correlations (README ``--task_lambda=0.012``;
            train.py's default 0.011).
        projector: the projector's layer sizes after the encoder width (train.py default
            ``4096-4096-4096``).
    """

    dropout_low: float = 0.05
    dropout_high: float = 0.155
    alpha: float = 1.0
    beta: float = 0.005225
    offdiag_weight: float = 0.012
    projector: tuple[int, ...] = (4096, 4096, 4096)

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        for name in ("dropout_low", "dropout_high"):
            rate = getattr(self, name)
            if not 0.0 <= rate < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {rate}")
        for name in ("alpha", "beta", "offdiag_weight"):
            check_non_negative(getattr(self, name), name)
        if not self.projector or any(s < 1 for s in self.projector):
            raise ConfigError(f"projector needs one or more layer sizes >= 1, got {list(self.projector)}")


class SCD(ContrastiveMethod[SCDParams]):
    """Two views at two dropout rates; minimise their cosine and decorrelate their projections."""

    name = "scd"
    description = (
        "SCD: self-contrast of two dropout views at different rates plus Barlow-Twins decorrelation "
        "of their projections."
    )
    citation = (
        "Klein and Nabi, SCD: Self-Contrastive Decorrelation of Sentence Embeddings, ACL 2022 "
        "(github.com/SAP-samples/acl2022-self-contrastive-decorrelation)"
    )
    smoke_params = ({"mlp": False, "projector": (256, 256)},)

    def __init__(self, params: SCDParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.projector = build_projector(hidden_size, params.projector)

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        z1 = self.head(encode(batch, dropout=p.dropout_low))
        z2 = self.head(encode(batch, dropout=p.dropout_high))
        contrast = self_contrast(z1, z2, p.temperature)
        decorrelation = barlow_twins_loss(self.projector(z1), self.projector(z2), p.offdiag_weight)
        loss = p.alpha * contrast + p.beta * decorrelation
        return LossOutput(
            loss,
            {
                "loss_self_contrast": contrast.detach(),
                "loss_decorrelation": decorrelation.detach(),
            },
        )
