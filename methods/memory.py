"""Reusable state for methods that keep some: a FIFO negative queue and momentum (EMA) updates.

Neither is used by the papers' methods; they exist so that MoCo-style or ESimCSE-style methods
(a momentum encoder and a queue of past keys) are a method file, not a change to the training loop.
See the lifecycle in :mod:`methods.base`.
"""

from __future__ import annotations

import torch
from torch import nn


class NegativeQueue(nn.Module):
    """A fixed-size FIFO of past (detached) embeddings, kept as buffers.

    Args:
        size: how many rows the queue holds.
        dim: the embedding width.
    """

    rows: torch.Tensor
    filled: torch.Tensor
    pointer: torch.Tensor

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        if size < 1 or dim < 1:
            raise ValueError(f"queue size and dim must be >= 1, got {size} and {dim}")
        self.register_buffer("rows", torch.zeros(size, dim))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])

    def contents(self) -> torch.Tensor:
        """The rows enqueued so far (oldest first once the queue has wrapped), ``[n, dim]``."""
        n = int(self.filled)
        if n < self.size:
            return self.rows[:n]
        p = int(self.pointer)
        return torch.cat([self.rows[p:], self.rows[:p]])

    @torch.no_grad()
    def push(self, batch: torch.Tensor) -> None:
        """Enqueue ``batch: [b, dim]`` (detached), overwriting the oldest rows."""
        batch = batch.detach().to(self.rows.dtype)[-self.size :]
        for row in batch:
            self.rows[int(self.pointer)] = row
            self.pointer.fill_((int(self.pointer) + 1) % self.size)
        self.filled.fill_(min(self.size, int(self.filled) + batch.shape[0]))


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """``target = momentum * target + (1 - momentum) * online``, parameter by parameter."""
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"momentum must be in [0, 1], got {momentum}")
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.mul_(momentum).add_(o.detach(), alpha=1.0 - momentum)


__all__ = ["NegativeQueue", "ema_update"]
