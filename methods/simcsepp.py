"""SimCSE++: off-dropout negatives with a positive weight ``m``, plus dimension-wise contrast (DCL).

Xu et al., "SimCSE++: Improving Contrastive Learning for Sentence Embeddings from Two Perspectives",
EMNLP 2023 (METHODS.md Sec. 3).

One training step:

1. ``z1, z2 = MLP(two dropout views)`` from ONE encoder call on the doubled batch.
2. If ``infonce``: with ``off_dropout``, a SECOND encoder call on the ``B`` sentences with every
   dropout off (model otherwise in training mode), WITH gradient, MLP applied, gives ``z0``; the
   negatives are ``s(z0_i, z0_j)``. Without ``off_dropout`` the negatives are SimCSE's
   ``s(z1_i, z2_j)``. ``L_nce`` = :func:`~methods.losses.off_dropout_nce` with weight ``m`` placed
   as ``m_placement`` says (``released``: ``m`` scales the positive logit; ``paper``: ``m`` scales the
   negative sum).
3. If ``lambda_dcl > 0``: ``L_dcl`` = :func:`~methods.losses.dcl_loss` on ``(z1, z2)``.

``loss = [infonce] * L_nce + lambda_dcl * L_dcl``. ``infonce=False`` makes DCL the only objective
(SimCSE++ Table 4; no dropout-off pass is made then). ``m = 1, lambda_dcl = 0, off_dropout = False``
is SimCSE exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Metric
from methods.losses import dcl_loss, off_dropout_nce
from methods.params import ContrastiveParams, check_non_negative, check_positive, check_temperature, switch
from methods.simcse import ContrastiveMethod

SIMCSEPP_CITATION = (
    "Xu et al., SimCSE++: Improving Contrastive Learning for Sentence Embeddings from Two "
    "Perspectives, EMNLP 2023"
)


@dataclass(frozen=True)
class SimCSEppParams(ContrastiveParams):
    """Hyper-parameters of SimCSE++ (grid keys), besides the shared ``temperature`` and ``mlp``.

    Attributes:
        off_dropout: negatives from a dropout-off encoder pass ``z0`` (with gradient, MLP applied).
        m: the positive weight (Table 5 searches {0.5, 0.8, 0.9, 1, 1.1, 1.2}; best 0.9); ``> 0``.
        m_placement: ``released`` (``m`` multiplies the positive logit, default) or ``paper``
            (Eq. 3: ``m`` multiplies the negative sum).
        lambda_dcl: weight of DCL (0.1; 0 disables it).
        tau_dcl: DCL temperature (5; 0.001 to 1000).
        dcl_reduction: ``mean`` over dimensions (released code) or ``sum`` (paper Eq. 5).
        infonce: include the (off-dropout) InfoNCE term; ``False`` = DCL only (needs lambda_dcl > 0).
    """

    off_dropout: bool = True
    m: float = 0.9
    m_placement: Literal["released", "paper"] = switch(
        "released", "released: m scales the positive logit; paper: m scales the negatives (Eq. 3)"
    )
    lambda_dcl: float = 0.1
    tau_dcl: float = 5.0
    dcl_reduction: Literal["mean", "sum"] = switch(
        "mean", "mean over dimensions (released code, lambda tuned so); sum (Eq. 5)"
    )
    infonce: bool = True

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        check_temperature(self.tau_dcl, "tau_dcl")
        check_positive(self.m, "m")
        check_non_negative(self.lambda_dcl, "lambda_dcl")
        if not self.infonce and self.lambda_dcl == 0:
            raise ConfigError("lambda_dcl must be > 0 when infonce=False (DCL is then the only objective)")


class SimCSEpp(ContrastiveMethod[SimCSEppParams]):
    """Off-dropout InfoNCE with weight m, plus lambda * DCL (see the module docstring)."""

    name = "simcsepp"
    description = (
        "SimCSE++: negatives from a dropout-off pass, positive weight m, plus dimension-wise "
        "contrastive learning (DCL)."
    )
    citation = SIMCSEPP_CITATION

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        views = self.head(self.encode_views(encode, batch, 2))
        z1, z2 = views[:, 0], views[:, 1]
        metrics: dict[str, Metric] = {}
        loss = z1.new_zeros(())
        if p.infonce:
            z0 = self.head(encode(batch, dropout=False)) if p.off_dropout else None
            nce = off_dropout_nce(z1, z2, z0, p.temperature, p.m, p.m_placement)
            loss = loss + nce
            metrics["loss_infonce"] = nce.detach()
        if p.lambda_dcl > 0:
            dcl = dcl_loss(z1, z2, p.tau_dcl, p.dcl_reduction)
            loss = loss + p.lambda_dcl * dcl
            metrics["loss_dcl"] = dcl.detach()
        return LossOutput(loss, metrics)
