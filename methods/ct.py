"""Contrastive Tension (CT): two copies of the encoder, a sigmoid on the dot product of their features.

Carlsson, Gyllensten, Gogoulou, Hellqvist and Sahlgren, "Semantic Re-Tuning with Contrastive
Tension", ICLR 2021; official code: FreddeFrallan/Contrastive-Tension (TensorFlow).

Two models start from the same checkpoint and are both trained. Model 2 is the run's encoder (the
one the loop evaluates); model 1 is a trainable copy this method owns (``self.model1``, made in
:meth:`ContrastiveTension.bind`). One training step on the B sentences of the batch:

1. ``z1 = model1(x)``, ``z2 = model2(x)``: mean-pooled features (the run's training pooler; the
   specs set ``avg``, the code's pooling), both with gradient, dropout off by default (the code
   calls both models with ``training=False``).
2. Positive pairs: ``(z1_i, z2_i)``, the same sentence through both models, label 1. Negative
   pairs: ``K`` per positive, each ``(z1_a, z2_b)`` with ``a != b`` drawn at random from the batch
   (model 1's side and model 2's side independently, as the code draws independent random sentences
   for each model), label 0.
3. ``loss = mean over the B (K + 1) pairs of BCE(sigmoid(z1 . z2), label)``: a raw dot product,
   no normalisation, no temperature, no head.

The copy is a normal sub-module (not :meth:`~methods.base.Method.register_frozen`): the optimiser
steps it with the encoder, best-state snapshots and resume checkpoints carry it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Method, ModelLoader
from methods.params import ContrastiveParams

CT_CITATION = (
    "Carlsson et al., Semantic Re-Tuning with Contrastive Tension, ICLR 2021 "
    "(code: FreddeFrallan/Contrastive-Tension)"
)


def ct_loss(
    z1: torch.Tensor, z2: torch.Tensor, neg_a: torch.Tensor, neg_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CT's binary cross-entropy on dot products.

    Args:
        z1: ``[B, d]`` model 1's features.
        z2: ``[B, d]`` model 2's features; ``(z1_i, z2_i)`` are the B positive pairs.
        neg_a, neg_b: ``[N]`` row indices; ``(z1[neg_a[n]], z2[neg_b[n]])`` is negative pair ``n``.

    Returns:
        ``(loss, positive part, negative part)``: the loss is the mean over all ``B + N`` pairs of
        ``-log sigmoid(p)`` (positives) and ``-log(1 - sigmoid(n))`` (negatives); the parts are the
        sums of each kind divided by the same ``B + N`` (they add up to the loss).
    """
    pos_logits = (z1 * z2).sum(-1)
    neg_logits = (z1[neg_a] * z2[neg_b]).sum(-1)
    pairs = pos_logits.shape[0] + neg_logits.shape[0]
    pos = F.softplus(-pos_logits).sum() / pairs  # -log sigmoid(x) = softplus(-x)
    neg = F.softplus(neg_logits).sum() / pairs  # -log(1 - sigmoid(x)) = softplus(x)
    return pos + neg, pos, neg


def draw_negative_pairs(
    batch_size: int, negatives: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size * negatives`` random ordered pairs ``(a, b)`` of distinct rows (torch's generator)."""
    n = batch_size * negatives
    a = torch.randint(batch_size, (n,), device=device)
    b = (a + torch.randint(1, batch_size, (n,), device=device)) % batch_size  # uniform over b != a
    return a, b


@dataclass(frozen=True)
class CTParams(ContrastiveParams):
    """Hyper-parameters of Contrastive Tension. The shared ``temperature`` and ``mlp`` are NOT used:
    CT's logits are raw dot products and it trains no head (both are kept only because every
    method's record has them; ``describe`` says so in the run record).

    Attributes:
        negatives: K, negative pairs per positive pair (code: ``negative_k = 7``, a batch of 16
            pairs = 2 positives + 14 negatives).
        dropout: run both models with dropout; False (default) as the code, which calls both models
            with ``training=False`` in its update step.
    """

    negatives: int = 7
    dropout: bool = False

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if self.negatives < 1:
            raise ConfigError(f"negatives must be >= 1, got {self.negatives}")

    def describe(self, hidden_size: int) -> dict[str, str]:
        return {"unused": "temperature and mlp (CT: raw dot products, no head)"}


class ContrastiveTension(Method[CTParams]):
    """Model 1 (a trainable copy) and model 2 (the run's encoder), BCE on dot products."""

    name = "ct"
    description = (
        "Contrastive Tension (CT-BERT): two trained copies of the encoder, binary cross-entropy on "
        "dot products of same-sentence (positive) and random-pair (negative) features."
    )
    citation = CT_CITATION
    smoke_params = ({}, {"negatives": 2, "dropout": True})
    model1: nn.Module

    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        """Model 1: a trainable copy of the encoder (a normal sub-module: optimised and snapshotted)."""
        super().bind(encoder, load)
        self.add_module("model1", copy.deepcopy(encoder))

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        dropout = self.params.dropout
        z2 = encode(batch, dropout=dropout)  # model 2: the run's encoder, the one evaluated
        z1 = encode(batch, dropout=dropout, encoder=self.model1)
        b = z2.shape[0]
        neg_a, neg_b = draw_negative_pairs(b, self.params.negatives, z2.device)
        loss, pos, neg = ct_loss(z1, z2, neg_a, neg_b)
        metrics = {"loss_ct": loss, "ct_pos": pos, "ct_neg": neg}
        return LossOutput(loss, {k: v.detach() for k, v in metrics.items()})
