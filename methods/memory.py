"""Reusable state for methods that keep some: a FIFO negative queue and momentum (EMA) updates.

Neither is used by the papers' methods; they exist so that MoCo-style or ESimCSE-style methods
(a momentum encoder and a queue of past keys) are a method file, not a change to the training loop.
See the lifecycle in :mod:`methods.base`.
"""

from __future__ import annotations

import torch
from torch import nn


class HostCount:
    """The host's copy of a 0-d integer buffer a method keeps up to date itself (a queue's fill and
    pointer, an update count), so a step reads the copy, never the device.

    The buffer is read again only when something else wrote it (a state load, ``.to()``, a test's
    ``fill_``), which its identity and version counter tell without a read.
    """

    def __init__(self) -> None:
        self._tensor: torch.Tensor | None = None
        self._version = -1
        self._value = 0

    def get(self, buffer: torch.Tensor) -> int:
        if buffer is not self._tensor or buffer._version != self._version:
            self._value = int(buffer)
            self._tensor, self._version = buffer, buffer._version
        return self._value

    def set(self, buffer: torch.Tensor, value: int) -> None:
        """``buffer.fill_(value)``, remembered on the host."""
        buffer.fill_(value)
        self._tensor, self._version, self._value = buffer, buffer._version, value


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
        self._filled, self._pointer = HostCount(), HostCount()

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])

    def contents(self) -> torch.Tensor:
        """The rows enqueued so far (oldest first once the queue has wrapped), ``[n, dim]``."""
        n = self._filled.get(self.filled)
        if n < self.size:
            return self.rows[:n]
        p = self._pointer.get(self.pointer)
        return torch.cat([self.rows[p:], self.rows[:p]])

    @torch.no_grad()
    def push(self, batch: torch.Tensor) -> None:
        """Enqueue ``batch: [b, dim]`` (detached), overwriting the oldest rows."""
        batch = batch.detach().to(self.rows.dtype)[-self.size :]
        p, b = self._pointer.get(self.pointer), batch.shape[0]
        slots = (p + torch.arange(b, device=self.rows.device)) % self.size  # distinct: b <= size
        self.rows[slots] = batch
        self._pointer.set(self.pointer, (p + b) % self.size)
        self._filled.set(self.filled, min(self.size, self._filled.get(self.filled) + b))


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """``target = momentum * target + (1 - momentum) * online``, parameter by parameter.

    ``momentum`` in [0, 1]: a method's decay, which its parameters bound (MoCoSE's ``momentum`` in
    [0, 1), its cosine schedule towards 1); a step does not check it again.
    """
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.mul_(momentum).add_(o.detach(), alpha=1.0 - momentum)


__all__ = ["HostCount", "NegativeQueue", "ema_update"]
