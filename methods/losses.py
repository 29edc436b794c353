"""Pure loss functions on embedding tensors (no encoder, no training loop).

Each function is pinned in ``tests/methods`` to a slow reference written from the paper's equation.
Notation: ``B`` rows (sentences), ``d`` channels, ``s(a, b) = cos(a, b) / tau``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F


def cosine_logits(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """``s(a_i, b_j) = cos(a_i, b_j) / tau`` for all pairs: ``[n, d] x [m, d] -> [n, m]``."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / temperature


def info_nce(anchor: torch.Tensor, positive: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """InfoNCE with in-batch negatives (SimCSE, Eq. 1).

    Args:
        anchor: ``[B, d]`` first views ``z1``.
        positive: ``[B, d]`` second views ``z2``; row ``i`` is the positive of ``anchor[i]`` and every
            other row a negative.
        temperature: ``tau > 0``.

    Returns:
        Scalar mean over the batch of ``-log softmax_j(s(z1_i, z2_j))[i]``.
    """
    logits = cosine_logits(anchor, positive, temperature)
    target = torch.arange(logits.shape[0], device=logits.device)
    return F.cross_entropy(logits, target)


# -- WhitenedCSE: several positives per anchor ------------------------------------------------------


def _positive_weights(
    weights: Sequence[float] | torch.Tensor | None, num: int, like: torch.Tensor
) -> torch.Tensor:
    """``weights`` (``num`` values: a method's were checked by its parameters) in ``like``'s dtype and
    on its device; ``None`` or empty: ``num`` ones. A tensor already made (a method's buffer) is only
    cast, to the numbers a list of the same values would give."""
    if weights is None or len(weights) == 0:
        return torch.ones(num, dtype=like.dtype, device=like.device)
    return torch.as_tensor(weights, dtype=like.dtype, device=like.device)


def info_nce_terms(anchor: torch.Tensor, positives: torch.Tensor, temperature: float) -> torch.Tensor:
    """One InfoNCE per positive, each with its own in-batch negatives.

    Args:
        anchor: ``[B, d]`` anchors ``h_i`` (view 1).
        positives: ``[B, P, d]``; ``positives[:, p]`` are the views ``h_{., p}``.
        temperature: ``tau``.

    Returns:
        ``[P]``: term ``p`` is ``mean_i -log softmax_j(s(h_i, h_{j,p}))[i]``.
    """
    b, p, _ = positives.shape
    a = F.normalize(anchor, dim=-1)
    pos = F.normalize(positives, dim=-1)
    logits = torch.einsum("id,jpd->pij", a, pos) / temperature  # [P, B, B]
    target = torch.arange(b, device=anchor.device).repeat(p)
    per_row = F.cross_entropy(logits.reshape(p * b, b), target, reduction="none")
    return per_row.view(p, b).mean(dim=1)


def multi_positive_l1(
    anchor: torch.Tensor,
    positives: torch.Tensor,
    temperature: float = 0.05,
    weights: Sequence[float] | torch.Tensor | None = None,
) -> torch.Tensor:
    """WhitenedCSE's L1 (Eq. 7): ``sum_p lambda_p InfoNCE(h_i vs h_{j,p})``.

    Args:
        anchor: ``[B, d]``; positives: ``[B, P, d]`` (``P = m - 1``); temperature: ``tau``.
        weights: ``lambda_p``, ``P`` values; ``None`` or empty = all 1.0 (the released code).

    Returns:
        Scalar ``sum_p lambda_p * info_nce_terms(...)[p]`` (a sum over positives, a mean over rows).
    """
    terms = info_nce_terms(anchor, positives, temperature)
    return (_positive_weights(weights, terms.shape[0], terms) * terms).sum()


def multi_positive_l2(
    anchor: torch.Tensor,
    positives: torch.Tensor,
    temperature: float = 0.05,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    form: Literal["softmax", "printed"] = "softmax",
) -> torch.Tensor:
    """WhitenedCSE's L2 (Eq. 8): the positives inside the log.

    ``form="softmax"`` (default):
    ``l_i = -log sum_p lambda_p * exp(s(h_i, h_{i,p})) / sum_j exp(s(h_i, h_{j,p}))``: each positive's
    softmax probability against its own in-batch negatives, summed (weighted) inside one ``-log``.
    This is also the form of the released code's commented-out variant
    (``-log(softmax_1 + 0.8 softmax_2)`` taken at the target). With one positive and weight 1 it is
    InfoNCE.

    ``form="printed"``: Eq. 8 exactly as the paper prints it, with ``exp`` of MINUS the positive
    similarity in the numerator:
    ``l_i = -log sum_p lambda_p * exp(-s(h_i, h_{i,p})) / sum_j exp(s(h_i, h_{j,p}))``.
    Minimising it pushes positives apart as well as negatives, so it is offered to test the printed
    equation, not as a training objective one would choose.

    Args:
        anchor: ``[B, d]``; positives: ``[B, P, d]``; temperature: ``tau``.
        weights: ``lambda_p`` (``P`` values, ``None``/empty = all 1.0).
        form: ``softmax`` or ``printed`` (see above).

    Returns:
        Scalar mean over rows ``i`` of ``l_i``.
    """
    b, p, _ = positives.shape
    a = F.normalize(anchor, dim=-1)
    pos = F.normalize(positives, dim=-1)
    logits = torch.einsum("id,jpd->pij", a, pos) / temperature  # [P, B, B]
    idx = torch.arange(b, device=anchor.device)
    positive = -logits[:, idx, idx] if form == "printed" else logits[:, idx, idx]
    log_prob = positive - torch.logsumexp(logits, dim=-1)  # [P, B]
    w = _positive_weights(weights, p, log_prob)
    return -torch.logsumexp(log_prob + torch.log(w)[:, None], dim=0).mean()


# -- SimCSE++: positives and negatives from different representations -------------------------------


def split_info_nce(
    pos_a: torch.Tensor,
    pos_b: torch.Tensor,
    neg_a: torch.Tensor,
    neg_b: torch.Tensor,
    temperature: float = 0.05,
    m: float = 1.0,
    m_placement: Literal["released", "paper"] = "released",
) -> torch.Tensor:
    """InfoNCE whose positive and negative pairs come from different representations.

    With ``s_i = s(pos_a_i, pos_b_i)`` and ``n_ij = s(neg_a_i, neg_b_j)`` for ``j != i``:

    * ``released`` (SimCSE++ code): ``l_i = -m s_i + log(exp(m s_i) + sum_{j != i} exp(n_ij))``;
    * ``paper`` (SimCSE++ Eq. 3): ``l_i = -s_i + log(exp(s_i) + m sum_{j != i} exp(n_ij))``.

    With ``neg = pos`` and ``m = 1`` this is :func:`info_nce`. The SimCSE++ off-dropout loss is
    ``pos = (z1, z2)``, ``neg = (z0, z0)``; the noise probes put noisy or averaged views on one side.

    Args:
        pos_a, pos_b: ``[B, d]`` the two sides of the positive pairs.
        neg_a, neg_b: ``[B, d]`` the representations whose off-diagonal pairs are the negatives.
        temperature: ``tau > 0``.
        m: the SimCSE++ weight (``m > 0``).
        m_placement: where ``m`` goes (see above).

    Returns:
        Scalar mean over rows of ``l_i``.
    """
    pos = F.cosine_similarity(pos_a, pos_b, dim=-1) / temperature  # [B]
    neg = cosine_logits(neg_a, neg_b, temperature)  # [B, B]
    eye = torch.eye(neg.shape[0], dtype=torch.bool, device=neg.device)
    if m_placement == "paper":
        neg = neg + math.log(m)
    else:
        pos = m * pos
    neg = neg.masked_fill(eye, float("-inf"))
    logits = torch.cat([pos[:, None], neg], dim=1)
    return (torch.logsumexp(logits, dim=1) - pos).mean()


def off_dropout_nce(
    z1: torch.Tensor,
    z2: torch.Tensor,
    z0: torch.Tensor | None,
    temperature: float = 0.05,
    m: float = 1.0,
    m_placement: Literal["released", "paper"] = "released",
) -> torch.Tensor:
    """SimCSE++ off-dropout InfoNCE: positives ``s(z1_i, z2_i)``, negatives ``s(z0_i, z0_j)``.

    Args:
        z1, z2: ``[B, d]`` the two dropout-on views (after the head).
        z0: ``[B, d]`` the dropout-off view, or ``None`` for SimCSE's negatives ``s(z1_i, z2_j)``.
        temperature, m, m_placement: see :func:`split_info_nce`.
    """
    if z0 is None:
        return split_info_nce(z1, z2, z1, z2, temperature, m, m_placement)
    return split_info_nce(z1, z2, z0, z0, temperature, m, m_placement)


def batch_standardise(z: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Batch normalisation without affine: ``(z - mean) / sqrt(var + eps)`` per channel.

    ``z: [N, d] -> [N, d]``; mean and biased variance over the ``N`` rows (``BatchNorm1d(d,
    affine=False)`` in training mode).
    """
    return F.batch_norm(z, None, None, training=True, eps=eps)


def dcl_loss(
    z1: torch.Tensor,
    z2: torch.Tensor,
    tau_dcl: float = 5.0,
    reduction: Literal["mean", "sum"] = "mean",
    eps: float = 1e-5,
) -> torch.Tensor:
    """SimCSE++ dimension-wise contrastive learning (DCL, Eq. 5).

    ``C = BN(z1)^T BN(z2) / B / tau_DCL`` is ``[d, d]``; row ``k`` is a softmax over dimensions with
    target ``k``: ``loss = reduce_k -log softmax(C_k)[k]``.

    The divisor: BN uses the biased batch variance (over ``B``), so ``BN(z1)^T BN(z2) / B`` is the
    exact Pearson correlation matrix (diagonal entries in [-1, 1]) and ``1 / tau_DCL`` is the largest
    logit scale. Eq. 5 as printed normalises by the batch without saying which estimator; with the
    unbiased variance (a ``B - 1`` divisor, as ``torch.std`` defaults to) every logit would be
    ``B / (B - 1)`` larger (1.6 % at B = 64), i.e. the same loss at ``tau_DCL * (B - 1) / B``. The
    released code's BatchNorm1d gives the form here.

    Args:
        z1, z2: ``[B, d]`` the two dropout-on views after the head.
        tau_dcl: DCL temperature (paper: 5).
        reduction: ``"mean"`` over the ``d`` dimensions (released code, default) or ``"sum"``
            (the paper's Eq. 5).
        eps: batch-norm epsilon.

    Returns:
        Scalar.
    """
    b = z1.shape[0]
    c = batch_standardise(z1, eps).T @ batch_standardise(z2, eps) / b / tau_dcl
    target = torch.arange(c.shape[0], device=c.device)
    return F.cross_entropy(c, target, reduction=reduction)


# -- Barlow Twins probe -----------------------------------------------------------------------------


def cross_correlation(
    z1: torch.Tensor,
    z2: torch.Tensor,
    padding: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    centre: bool = True,
) -> torch.Tensor:
    """Barlow Twins' ``d x d`` cross-correlation of two views, optionally padded.

    Args:
        z1, z2: ``[B, d]``.
        padding: ``[M, d]`` artificial rows appended to BOTH views (the SimCSE++ Table 2 probe), or
            ``None``.
        eps: batch-norm epsilon (centred form) or norm floor (uncentred form).
        centre: ``True`` (default, Barlow Twins' code): ``C = BN(z1')^T BN(z2') / N``, each dimension
            centred and scaled over the ``N = B + M`` rows, so ``rank(C) <= N - 1`` (the centred rows
            sum to zero). ``False``: SimCSE++ Eq. 4 as printed (and Barlow Twins' Eq. 2),
            ``C_kl = sum_b z1'_bk z2'_bl / (||z1'_.k|| ||z2'_.l||)`` without centring, so
            ``rank(C) <= N``: at B = 64 without padding the rank bound is 64, the paper's number.

    Returns:
        ``C``: ``[d, d]``.
    """
    if padding is not None and padding.shape[0] > 0:
        z1 = torch.cat([z1, padding], dim=0)
        z2 = torch.cat([z2, padding], dim=0)
    if centre:
        return batch_standardise(z1, eps).T @ batch_standardise(z2, eps) / z1.shape[0]
    n1 = z1 / z1.norm(dim=0, keepdim=True).clamp_min(eps)
    n2 = z2 / z2.norm(dim=0, keepdim=True).clamp_min(eps)
    return n1.T @ n2


def correlation_rank(c: torch.Tensor) -> int:
    """The rank of a cross-correlation matrix (the SimCSE++ Table 2 probe's logged number), computed
    in float32: under CUDA's bf16 autocast ``c`` is bf16, which ``torch.linalg.matrix_rank`` refuses."""
    return int(torch.linalg.matrix_rank(c.detach().float()))


def barlow_twins_objective(c: torch.Tensor, offdiag_weight: float = 5e-3) -> torch.Tensor:
    """``sum_k (1 - C_kk)^2 + lambda * sum_{k != l} C_kl^2`` for a ``[d, d]`` correlation ``C``."""
    diag = torch.diagonal(c)
    on = (1.0 - diag).pow(2).sum()
    off = c.pow(2).sum() - diag.pow(2).sum()
    return on + offdiag_weight * off


def barlow_twins_loss(
    z1: torch.Tensor,
    z2: torch.Tensor,
    offdiag_weight: float = 5e-3,
    padding: torch.Tensor | None = None,
) -> torch.Tensor:
    """Barlow Twins (Zbontar et al., ICML 2021, https://arxiv.org/abs/2103.03230, Eq. 1).

    ``L = sum_k (1 - C_kk)^2 + lambda * sum_{k != l} C_kl^2`` with ``C`` the
    :func:`cross_correlation` of the (padded) views.

    Args:
        z1, z2: ``[B, d]``; padding: ``[M, d]`` rows appended to both views, or ``None``.
        offdiag_weight: ``lambda`` (Barlow Twins: 5e-3).

    Returns:
        Scalar (a sum over the ``d x d`` entries, Barlow Twins' own scale).
    """
    return barlow_twins_objective(cross_correlation(z1, z2, padding), offdiag_weight)
