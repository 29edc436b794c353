"""Dropout keep masks exactly as PyTorch's CPU ``bernoulli_`` draws them, in less time.

On the CPU, ``tensor.bernoulli_(p)`` takes one 64-bit number from the generator for every element
(two Mersenne Twister outputs), turns its low 53 bits into a double ``u`` in [0, 1) and keeps the
element where ``u < p``. ``random_()`` on an int64 tensor takes the same 64-bit number for every
element (reduced modulo 2**63, which leaves those 53 bits alone) and stops there; comparing the
low 53 bits, as integers, with ``ceil(p * 2**53)`` is the same test as ``u < p``. So drawing
int64 numbers and comparing them gives the same mask from the same generator, which then ends in
the same state, at about 60 % of the time: the generator is the serial part of a mask, and the
conversion to a double is what this skips (measured in docs/speed.md).

That this PyTorch build draws so is a fact about its kernels, not a documented promise, so
:func:`fast_draw_matches` checks it once per process on private generators (masks and the
generators' states, for probabilities above and below one half); where it does not hold, or off
the CPU, :func:`draw_keep_masks` calls ``bernoulli_`` itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

_LOW_53 = (1 << 53) - 1
_MATCHES: bool | None = None


def _threshold(keep: float) -> int:
    """The integer ``t`` with ``m < t`` exactly when ``m * 2**-53 < keep``, for ``0 <= m < 2**53``
    (``keep * 2**53`` is exact: a power-of-two scaling)."""
    return math.ceil(keep * float(1 << 53))


def _fast(out: torch.Tensor, keep: float, scratch: torch.Tensor, generator: torch.Generator | None) -> None:
    numbers = scratch[: out.numel()].random_(generator=generator)
    torch.lt(numbers.bitwise_and_(_LOW_53), _threshold(keep), out=out.view(-1))


def fast_draw_matches() -> bool:
    """Whether this build's ``random_`` and ``bernoulli_`` draw as the module docstring says
    (checked once per process, on private generators; the global one is not touched)."""
    global _MATCHES
    if _MATCHES is None:
        _MATCHES = True
        for keep in (0.9, 0.5, 0.37, 1.0 - 0.1, 1.0 - 0.6):
            reference, fast = torch.Generator().manual_seed(20261126), torch.Generator().manual_seed(20261126)
            expected = torch.empty(4099, dtype=torch.bool).bernoulli_(keep, generator=reference)
            got = torch.empty(4099, dtype=torch.bool)
            _fast(got, keep, torch.empty(4099, dtype=torch.int64), fast)
            if not torch.equal(expected, got) or not torch.equal(reference.get_state(), fast.get_state()):
                _MATCHES = False
                break
    return _MATCHES


def draw_keep_masks(
    shapes: Sequence[tuple[tuple[int, ...], float]], device: torch.device
) -> list[torch.Tensor | None]:
    """Keep masks (bool) for ``(shape, keep probability)`` in order from the global generator, each
    what ``torch.empty(shape, dtype=torch.bool).bernoulli_(keep)`` would draw at that point of the
    stream; None where ``keep`` is 1 (dropout off draws nothing)."""
    out: list[torch.Tensor | None] = []
    sizes = [math.prod(shape) for shape, keep in shapes if keep < 1.0]
    fast = device.type == "cpu" and bool(sizes) and fast_draw_matches()
    scratch = torch.empty(max(sizes), dtype=torch.int64) if fast else None
    for shape, keep in shapes:
        if keep >= 1.0:
            out.append(None)
            continue
        mask = torch.empty(shape, dtype=torch.bool, device=device)
        if scratch is not None:
            _fast(mask, keep, scratch, None)
        else:
            mask.bernoulli_(keep)
        out.append(mask)
    return out
