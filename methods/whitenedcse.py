"""WhitenedCSE: shuffled group whitening before the MLP head, and several positives per sentence.

Zhuo, Sun, Wang, Zhu and Yang, "WhitenedCSE: Whitening-based Contrastive Learning of Sentence
Embeddings", ACL 2023. https://arxiv.org/abs/2305.17746 (METHODS.md Sec. 2).

One training step:

1. Raw views ``[B, m, d]`` (pooled features, before any head). ``positive_source="dropout"``
   (default, the released code): ``m`` dropout views from ONE encoder call on the ``m``-times
   repeated batch. ``positive_source="sgw"`` (the paper's "little extra cost" wording): one call with
   2 dropout views; view 1 is the anchor and the ``m - 1`` positives are independent SGW draws
   (fresh permutations) on dropout view 2, so ``m = 2`` is the dropout source exactly.
2. Whitening of each view (before the MLP):

   * ``none``: identity;
   * ``sgw``: shuffled group whitening with ``num_groups`` groups; ``shuffle=False`` turns the
     shuffle off. ``group`` is plain group whitening and is EXACTLY ``sgw`` with ``shuffle=False``
     (``shuffle`` is read only by ``sgw``);
   * ``zca`` / ``pca``: whitening over all ``d`` channels with running mean and covariance
     (momentum ``momentum``), updated once per step from all ``B * m`` rows; every view gets the same
     matrix (see :class:`~methods.whitening.RunningWhitening`).

   For ``sgw``/``group`` the statistics and permutation are per block. ``reading="paper"``
   (default): each view is its own block (``B`` rows, its own permutation).
   ``reading="released"``: the sentence-major rows ``[s0v0, s0v1, ..., s1v0, ...]`` are cut into ``m``
   contiguous blocks of ``B`` rows, each with its own permutation, so a sentence's views share one.
3. ``z = MLP(whitened)``; anchor ``z[:, 0]``, positives ``z[:, 1:]``; loss ``l1`` (Eq. 7, default)
   or ``l2`` (Eq. 8) from :mod:`methods.losses`, weighted by ``positive_weights``.

Evaluation uses the raw [CLS] vector (no whitening, no MLP), as the harness does for every method.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Metric
from methods.losses import info_nce_terms, multi_positive_l1, multi_positive_l2
from methods.params import ContrastiveParams, check_non_negative, switch
from methods.simcse import ContrastiveMethod
from methods.whitening import (
    GroupSplit,
    RunningWhitening,
    describe_groups,
    group_split,
    random_permutations,
    whiten_groups,
)

PAPER_HIDDEN_SIZE = 768
"""The width at which the paper states its group counts (bert-base: 384 groups = 2 channels each)."""


@dataclass(frozen=True)
class WhitenedCSEParams(ContrastiveParams):
    """Hyper-parameters of WhitenedCSE (grid keys), besides the shared ``temperature`` and ``mlp``.

    Attributes:
        whitening: ``sgw`` (default) | ``group`` (= ``sgw`` without shuffle) | ``zca`` | ``pca`` |
            ``none`` (WhitenedCSE Table 3).
        num_groups: the NUMBER of channel groups as the paper states it (384 for bert-base, 256 for
            roberta). Read only by ``sgw`` and ``group``; how it maps to another encoder's width is
            ``group_scaling``.
        group_scaling: ``channels`` (default): keep the channels per group that ``num_groups`` has at
            d = 768, i.e. ``round(num_groups * d / 768)`` groups (384 -> 192 at d = 384, 32 at the
            smoke encoder's d = 64), so the paper's grid means the same group shape on every profile;
            ``count``: use ``num_groups`` as is (the paper's own choice on BERT-large: 384 groups on
            1024 channels). Either way a count that does not divide d is split as evenly as possible,
            and the run record states the split.
        shuffle: draw a fresh channel permutation per block (``sgw`` only; ``False`` = plain group
            whitening, Table 4 "w/o shuffled").
        num_positives: ``m >= 2`` views per sentence: the anchor and ``m - 1`` positives (Table 5).
        positive_source: ``dropout`` (m dropout views, released code) or ``sgw`` (extra SGW draws on
            one dropout view; needs ``whitening="sgw"``, ``shuffle=True``, ``reading="paper"``).
        reading: ``paper`` (each view its own permutation and statistics) or ``released``
            (sentence-major row blocks; a sentence's views share a permutation).
        loss: ``l1`` (Eq. 7, sum of per-positive InfoNCE) or ``l2`` (Eq. 8, positives inside the log).
        l2_form: ``softmax`` (default: each positive's softmax probability inside the log, the released
            code's commented variant) or ``printed`` (Eq. 8 exactly as printed: ``exp`` of MINUS the
            positive similarity in the numerator; see :func:`~methods.losses.multi_positive_l2`).
        positive_weights: ``lambda_p`` for the ``m - 1`` positives; empty = all 1.0.
        eps: ridge ``eps * I`` added to every whitening covariance (1e-5; the released code has 0).
        whitening_grad: ``stop`` (W constant, released code) or ``full``.
        momentum: beta of the running mean/covariance of ``pca``/``zca``.
        running_stats: ``current`` (default: whiten with the running estimate that includes this
            batch) or ``previous`` (Eq. 13 as printed: whiten with the estimate of the batches before).
    """

    whitening: Literal["sgw", "group", "zca", "pca", "none"] = "sgw"
    num_groups: int = 384
    group_scaling: Literal["channels", "count"] = "channels"
    shuffle: bool = True
    num_positives: int = 3
    positive_source: Literal["dropout", "sgw"] = switch(
        "dropout", "dropout: m dropout views (released code); sgw: extra SGW draws (paper wording)"
    )
    reading: Literal["paper", "released"] = switch(
        "paper", "paper: per-view permutation; released: sentence-major row blocks"
    )
    loss: Literal["l1", "l2"] = "l1"
    l2_form: Literal["softmax", "printed"] = switch(
        "softmax", "softmax: probabilities inside the log; printed: Eq. 8 with exp(-s_pos)"
    )
    positive_weights: tuple[float, ...] = ()
    eps: float = 1e-5
    whitening_grad: Literal["stop", "full"] = switch(
        "stop", "stop: W constant (released code); full: gradient through W"
    )
    momentum: float = 0.9
    running_stats: Literal["current", "previous"] = switch(
        "current", "current: this batch mixed in first; previous: Eq. 13 as printed"
    )

    @property
    def shuffled(self) -> bool:
        """Whether channel permutations are drawn (only ``sgw`` with ``shuffle=True``)."""
        return self.whitening == "sgw" and self.shuffle

    @property
    def grouped(self) -> bool:
        return self.whitening in ("sgw", "group")

    def effective_groups(self, hidden_size: int) -> int:
        """The number of groups used at width ``hidden_size`` (see ``group_scaling``)."""
        if self.group_scaling == "count":
            return self.num_groups
        return max(1, round(self.num_groups * hidden_size / PAPER_HIDDEN_SIZE))

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if self.num_groups < 1:
            raise ConfigError(f"num_groups must be >= 1, got {self.num_groups}")
        if self.grouped and hidden_size is not None:
            groups = self.effective_groups(hidden_size)
            if groups > hidden_size:
                raise ConfigError(
                    f"num_groups={self.num_groups} gives {groups} groups, more than the hidden size "
                    f"d={hidden_size} has channels (num_groups is the NUMBER of groups; "
                    f"group_scaling={self.group_scaling!r})"
                )
        if self.num_positives < 2:
            raise ConfigError(f"num_positives must be >= 2 (anchor + positives), got {self.num_positives}")
        if self.positive_weights:
            if len(self.positive_weights) != self.num_positives - 1:
                raise ConfigError(
                    f"positive_weights needs num_positives - 1 = {self.num_positives - 1} values, "
                    f"got {len(self.positive_weights)}"
                )
            if any(w < 0 for w in self.positive_weights) or not any(w > 0 for w in self.positive_weights):
                raise ConfigError(f"positive_weights must be >= 0 and not all 0, got {self.positive_weights}")
        check_non_negative(self.eps, "eps")
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.positive_source == "sgw" and not (self.shuffled and self.reading == "paper"):
            raise ConfigError(
                "positive_source='sgw' draws positives by re-shuffling one dropout view, so it needs "
                "whitening='sgw', shuffle=True and reading='paper' (otherwise the positives are copies)"
            )

    def describe(self, hidden_size: int) -> dict[str, str]:
        """What the parameters resolve to at this width (stored in the run record)."""
        if not self.grouped:
            return {}
        return {
            "groups": f"{describe_groups(hidden_size, self.effective_groups(hidden_size))} at d={hidden_size}"
        }


class WhitenedCSE(ContrastiveMethod[WhitenedCSEParams]):
    """Whitening of every view before the MLP, then L1/L2 over the anchor and ``m - 1`` positives."""

    positive_weight: torch.Tensor

    name = "whitenedcse"
    description = (
        "WhitenedCSE: shuffled group whitening before the MLP head and m positives per sentence "
        "(multi-positive InfoNCE)."
    )
    citation = (
        "Zhuo et al., WhitenedCSE: Whitening-based Contrastive Learning of Sentence Embeddings, ACL 2023"
    )
    smoke_params = ({"num_groups": 128}, {"whitening": "zca", "num_positives": 2})

    def __init__(self, params: WhitenedCSEParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.running: RunningWhitening | None = None
        if params.whitening in ("zca", "pca"):
            self.running = RunningWhitening(
                hidden_size,
                params.whitening,
                params.momentum,
                params.eps,
                params.whitening_grad,
                params.running_stats,
            )
        self.split: GroupSplit | None = None
        if params.grouped:  # validate() checked the count against this width: split once, here
            self.split = group_split(hidden_size, params.effective_groups(hidden_size))
        weights = params.positive_weights or (1.0,) * (params.num_positives - 1)
        # lambda_p made once (float64: cast to the loss's dtype it equals a list of the same values);
        # not persistent: it is a parameter, not state, so checkpoints stay as they are
        self.register_buffer("positive_weight", torch.tensor(weights, dtype=torch.float64), persistent=False)
        self.multi_positive_loss: Callable[..., torch.Tensor] = multi_positive_l1
        if params.loss == "l2":
            self.multi_positive_loss = functools.partial(multi_positive_l2, form=params.l2_form)

    # -- step 1: raw views ------------------------------------------------------------------------
    def raw_views(self, encode: EncodeFn, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Raw pooled views ``[B, m, d]`` from the configured positive source."""
        m = self.params.num_positives
        if self.params.positive_source == "dropout":
            return self.encode_views(encode, batch, m)
        two = self.encode_views(encode, batch, 2)
        b, _, d = two.shape
        return torch.cat([two[:, :1], two[:, 1:2].expand(b, m - 1, d)], dim=1)

    # -- step 2: whitening ------------------------------------------------------------------------
    def whiten(self, views: torch.Tensor, step: int) -> tuple[torch.Tensor, dict[str, Metric]]:
        """Whiten raw views ``[B, m, d]`` as configured; return ``([B, m, d], metrics)``."""
        p = self.params
        b, m, d = views.shape
        if self.split is None:  # zca / pca (a running whitening) or none
            if self.running is None:
                return views, {}
            out, evals = self.running(views.reshape(b * m, d), step)
            return out.view(b, m, d), {"whiten_min_eig": evals.min().detach()}
        # paper: view k is block k ([m, B, d]); released: the sentence-major [B*m, d] rows cut into
        # m contiguous blocks of B rows.
        blocks = views.transpose(0, 1) if p.reading == "paper" else views.reshape(m, b, d)
        perm = random_permutations(m, d, views.device) if p.shuffled else None
        out, evals = whiten_groups(blocks, self.split, p.eps, perm=perm, grad=p.whitening_grad, step=step)
        out = out.transpose(0, 1) if p.reading == "paper" else out.reshape(b, m, d)
        return out, {"whiten_min_eig": evals.min().detach()}

    # -- step 3: loss -----------------------------------------------------------------------------
    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        white, metrics = self.whiten(self.raw_views(encode, batch), step)
        z = self.head(white)
        anchor, positives = z[:, 0], z[:, 1:]
        loss = self.multi_positive_loss(anchor, positives, p.temperature, self.positive_weight)
        with torch.no_grad():
            terms = info_nce_terms(anchor, positives, p.temperature)
        metrics.update({f"loss_pos{k + 2}": t for k, t in enumerate(terms)})
        metrics[f"loss_{p.loss}"] = loss.detach()
        return LossOutput(loss, metrics)
