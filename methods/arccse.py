"""ArcCSE: an additive angular margin on the positive pair, plus the ordering of masked triplets.

Zhang, Zhu, Wang, Xu, Li and Zhao, "A Contrastive Framework for Learning Sentence Representations
from Pairwise and Triple-wise Perspective in Angular Space", ACL 2022. No official code was found
(docs/baselines.md, "ArcCSE": what the values rest on).

One training step on the B sentences of the batch:

1. ``z1, z2 = head(two dropout views)`` from ONE encoder call on the doubled batch (as SimCSE).
2. ArcCon (:func:`arc_con_loss`): InfoNCE over ``cos(z1_i, z2_j) / tau`` in which the positive
   logit ``cos(theta_ii) / tau`` becomes ``cos(theta_ii + m) / tau``: the positive must win by an
   angle ``m``.
3. If ``triplet_weight > 0``: every sentence ``x`` gives ``x'`` (a contiguous span of its tokens
   replaced by the tokenizer's [MASK] id, ``mask_ratios[0]`` of its tokens) and ``x''`` (a longer
   span containing that one, ``mask_ratios[1]``), so that ``x`` entails ``x'`` entails ``x''``. ONE
   encoder call on the 3B rows ``(x, x', x'')`` with dropout off and with gradient, head applied,
   gives ``(t0, t1, t2)``; :func:`triplet_order_loss` asks ``cos(t0, t1) >= cos(t0, t2) + margin``.

``loss = L_arc + triplet_weight * L_tri``. ``margin = 0, triplet_weight = 0`` is SimCSE exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, ModelLoader
from methods.params import ContrastiveParams, check_non_negative, switch
from methods.simcse import ContrastiveMethod

ARCCSE_CITATION = (
    "Zhang et al., A Contrastive Framework for Learning Sentence Representations from Pairwise and "
    "Triple-wise Perspective in Angular Space (ArcCSE), ACL 2022"
)


def arc_con_loss(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float,
    margin: float,
    form: Literal["paper", "easy"] = "paper",
) -> torch.Tensor:
    """ArcCon: InfoNCE whose positive logit is ``cos(theta_ii + margin) / tau``.

    Args:
        z1, z2: ``[B, d]`` the two views; ``z2_i`` is the positive of ``z1_i``, every other row of
            ``z2`` a negative.
        temperature: ``tau``.
        margin: the additive angle ``m`` in radians.
        form: ``paper``: ``cos(theta + m)`` for every positive; ``easy``: only where
            ``cos(theta) > 0`` (else ``cos(theta)``), ArcFace's "easy margin".

    Returns:
        Scalar mean over the batch of ``-log(e^{cos(theta_ii+m)/tau} / (e^{cos(theta_ii+m)/tau} +
        sum_{j != i} e^{cos(theta_ij)/tau}))``.
    """
    cos = F.normalize(z1, dim=-1) @ F.normalize(z2, dim=-1).T
    c = cos.diagonal()
    # sin(theta) from cos(theta); the floor keeps the gradient finite at theta = 0
    sin = torch.sqrt((1.0 - c * c).clamp(min=1e-12))
    shifted = c * math.cos(margin) - sin * math.sin(margin)  # cos(theta + m)
    if form == "easy":
        shifted = torch.where(c > 0, shifted, c)
    eye = torch.eye(cos.shape[0], dtype=torch.bool, device=cos.device)
    logits = torch.where(eye, torch.diag_embed(shifted), cos) / temperature
    target = torch.arange(cos.shape[0], device=cos.device)
    return F.cross_entropy(logits, target)


def triplet_order_loss(t0: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor, margin: float) -> torch.Tensor:
    """``mean_i max(0, cos(t0_i, t2_i) - cos(t0_i, t1_i) + margin)``: the less masked ``t1`` closer."""
    near = F.cosine_similarity(t0, t1, dim=-1)
    far = F.cosine_similarity(t0, t2, dim=-1)
    return torch.clamp(far - near + margin, min=0.0).mean()


def span_masks(
    maskable: torch.Tensor, ratios: tuple[float, float], generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two nested contiguous spans per row, over the row's maskable positions.

    Args:
        maskable: ``[B, L]`` bool, the positions that may be masked (real tokens, no special
            tokens); for each row they are contiguous (``[CLS] tokens [SEP] pad``).
        ratios: ``(r1, r2)`` with ``r1 <= r2``: the spans cover ``max(1, round(r * n))`` of the
            row's ``n`` maskable tokens (a row without any masks nothing).
        generator: a torch generator on ``maskable``'s device for the span positions (default:
            torch's global one of that device).

    Returns:
        ``(short, long)`` ``[B, L]`` bool masks; ``short`` lies inside ``long``.

    In tensor operations, without reading the rows back (a GPU step never waits): each row's long
    span starts uniformly among its ``n - len_long + 1`` places and the short one uniformly among
    the ``len_long - len_short + 1`` places inside it (a 62-bit draw modulo the count).
    """
    n = maskable.sum(dim=1)  # [B]
    len_long = torch.minimum(n, torch.round(ratios[1] * n.double()).long().clamp(min=1))
    len_short = torch.minimum(len_long, torch.round(ratios[0] * n.double()).long().clamp(min=1))
    draws = torch.randint(2**62, (2, maskable.shape[0]), device=maskable.device, generator=generator)
    start = draws[0] % (n - len_long + 1).clamp(min=1)
    inner = start + draws[1] % (len_long - len_short + 1)
    rank = torch.cumsum(maskable.long(), dim=1) - 1  # a maskable position's index among the row's
    long = maskable & (rank >= start[:, None]) & (rank < (start + len_long)[:, None])
    short = maskable & (rank >= inner[:, None]) & (rank < (inner + len_short)[:, None])
    return short, long


@dataclass(frozen=True)
class ArcCSEParams(ContrastiveParams):
    """Hyper-parameters of ArcCSE (grid keys), besides the shared ``temperature`` (tau of ArcCon) and
    ``mlp``.

    Attributes:
        margin: the additive angular margin ``m`` on the positive, in DEGREES (10).
        margin_form: ``paper`` (``cos(theta + m)`` on every positive) or ``easy`` (only where
            ``cos(theta) > 0``, as the TensorFlow reimplementation read for docs/baselines.md does).
        triplet_weight: weight ``lambda`` of the triplet term (0.1; 0 switches the masked pass off).
        triplet_margin: the cosine margin of the triplet hinge (0).
        mask_ratios: ``"r1,r2"``, the shares of a sentence's tokens masked in ``x'`` and ``x''``
            (``0 < r1 <= r2 <= 1``).
    """

    margin: float = 10.0
    margin_form: Literal["paper", "easy"] = switch(
        "paper",
        "paper: cos(theta + m) on every positive; easy: only where cos(theta) > 0 (TF reimplementation)",
    )
    triplet_weight: float = 0.1
    triplet_margin: float = 0.0
    mask_ratios: str = "0.1,0.2"

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        check_non_negative(self.margin, "margin")
        if self.margin >= 180:
            raise ConfigError(f"margin is in degrees and must be < 180, got {self.margin}")
        check_non_negative(self.triplet_weight, "triplet_weight")
        self.ratios()

    def ratios(self) -> tuple[float, float]:
        """``mask_ratios`` parsed; ConfigError naming the field unless ``0 < r1 <= r2 <= 1``."""
        try:
            values = tuple(float(v) for v in self.mask_ratios.split(","))
        except ValueError:
            raise ConfigError(f"mask_ratios must be two numbers 'r1,r2', got {self.mask_ratios!r}") from None
        if len(values) != 2 or not 0 < values[0] <= values[1] <= 1:
            raise ConfigError(f"mask_ratios must be 'r1,r2' with 0 < r1 <= r2 <= 1, got {self.mask_ratios!r}")
        return values[0], values[1]


class ArcCSE(ContrastiveMethod[ArcCSEParams]):
    """ArcCon on two dropout views, plus lambda * the masked-triplet ordering (module docstring)."""

    name = "arccse"
    description = (
        "ArcCSE: InfoNCE with an additive angular margin on the positive (ArcCon), plus the ordering "
        "of a sentence and two nested masked copies (triplet hinge)."
    )
    citation = ARCCSE_CITATION
    smoke_params = ({}, {"margin_form": "easy", "triplet_weight": 0.0})

    def __init__(self, params: ArcCSEParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.mask_id: int | None = None
        self.special_ids: list[int] = []

    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        super().bind(encoder, load)
        tokenizer = getattr(encoder, "tokenizer", None)
        mask_id = getattr(tokenizer, "mask_token_id", None)
        if self.params.triplet_weight > 0 and mask_id is None:
            raise ConfigError("arccse: the encoder's tokenizer has no [MASK] token; set triplet_weight=0")
        self.mask_id = None if mask_id is None else int(mask_id)
        self.special_ids = [int(i) for i in getattr(tokenizer, "all_special_ids", [])]

    def masked_triplets(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Rows ``(x_i, x'_i, x''_i)`` for every sentence, sentence-major (3B rows)."""
        if self.mask_id is None:
            raise RuntimeError("arccse: no [MASK] id (the method was not attached to an encoder)")
        ids, attention = batch["input_ids"], batch["attention_mask"]
        special = torch.tensor(self.special_ids, dtype=ids.dtype, device=ids.device)
        maskable = attention.bool() & ~torch.isin(ids, special)
        short, long = span_masks(maskable, self.params.ratios())
        triplet = {k: v.repeat_interleave(3, dim=0) for k, v in batch.items()}
        masked = triplet["input_ids"].view(ids.shape[0], 3, -1)
        masked = torch.stack(
            [
                masked[:, 0],
                masked[:, 1].masked_fill(short, self.mask_id),
                masked[:, 2].masked_fill(long, self.mask_id),
            ],
            dim=1,
        )
        triplet["input_ids"] = masked.view(-1, ids.shape[1])
        return triplet

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        views = self.head(self.encode_views(encode, batch, 2))
        arc = arc_con_loss(views[:, 0], views[:, 1], p.temperature, math.radians(p.margin), p.margin_form)
        loss = arc
        metrics = {"loss_arc": arc.detach()}
        if p.triplet_weight > 0:
            b = batch["input_ids"].shape[0]
            t = self.head(encode(self.masked_triplets(batch), dropout=False)).view(b, 3, -1)
            tri = triplet_order_loss(t[:, 0], t[:, 1], t[:, 2], p.triplet_margin)
            loss = loss + p.triplet_weight * tri
            metrics["loss_tri"] = tri.detach()
        return LossOutput(loss, metrics)
