"""Pure loss functions on embedding tensors (no encoder, no training loop).

Each function is pinned in ``tests/methods`` to a slow reference written from the paper's equation.
"""

from __future__ import annotations

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
