"""The arithmetic of a forward and backward pass, one word per setting (``precision``, ``eval_precision``).

- ``fp32``: float32 throughout; on a GPU, matrix products in full fp32 (TF32 off, PyTorch's default).
- ``tf32``: float32 weights and activations; on an Ampere or newer GPU, matrix products take their
  inputs in TF32 (fp32's range, fp16's 10-bit mantissa) and accumulate in fp32. A CPU has no TF32:
  there the arithmetic is fp32's.
- ``bf16``: autocast to bfloat16 (fp32 master weights; autocast keeps softmax, norms and reductions
  that need it in fp32).
- ``fp16``: autocast to float16 with a gradient scaler (the loss scaled so that small gradients
  survive fp16's range): the ``--fp16`` mixed precision that the released SimCSE, WhitenedCSE and
  SimCSE++ training scripts pass (docs/correctness.md, "Arithmetic").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

AUTOCAST_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}
"""The precisions that autocast, and to what."""


@contextlib.contextmanager
def arithmetic(precision: str, device_type: str) -> Iterator[None]:
    """A forward pass in ``precision``'s arithmetic on ``device_type`` (``cpu``, ``cuda``): autocast for
    ``bf16``/``fp16``, and :func:`matmul_arithmetic`."""
    dtype = AUTOCAST_DTYPES.get(precision)
    with contextlib.ExitStack() as stack:
        stack.enter_context(matmul_arithmetic(precision, device_type))
        if dtype is not None:
            stack.enter_context(torch.autocast(device_type=device_type, dtype=dtype))
        yield


@contextlib.contextmanager
def matmul_arithmetic(precision: str, device_type: str) -> Iterator[None]:
    """fp32 matrix products on CUDA in TF32 for ``tf32``, in full fp32 otherwise, restored afterwards;
    nothing elsewhere. A backward pass runs in this alone (autocast covers the forward pass only)."""
    if device_type != "cuda":
        yield
        return
    with _cuda_matmul_precision("tf32" if precision == "tf32" else "ieee"):
        yield


@contextlib.contextmanager
def _cuda_matmul_precision(value: str) -> Iterator[None]:
    # PyTorch's newer per-backend setting only: mixing it with the older allow_tf32 flag is an error
    matmul = torch.backends.cuda.matmul
    saved = matmul.fp32_precision
    matmul.fp32_precision = value
    try:
        yield
    finally:
        matmul.fp32_precision = saved


def grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler | None:
    """The loss scaler an ``fp16`` step needs (None otherwise), with PyTorch's defaults (initial
    scale 2**16, halved on an overflow, doubled after 2,000 clean steps), as the papers' trainer."""
    return torch.amp.GradScaler(device_type) if precision == "fp16" else None


def describe(precision: str, device_type: str) -> str:
    """What ``precision`` computes on ``device_type``, in words (a record's ``arithmetic``)."""
    if precision == "fp32":
        return "fp32" + (" (TF32 off)" if device_type == "cuda" else "")
    if precision == "tf32":
        if device_type == "cuda":
            return "fp32 with TF32 matrix products"
        return f"fp32 (TF32 is a GPU mode: on {device_type} the arithmetic is fp32's)"
    if precision == "bf16":
        return "bf16 autocast, fp32 weights"
    if precision == "fp16":
        return "fp16 autocast with loss scaling, fp32 weights"
    raise ValueError(f"unknown precision {precision!r}")


__all__ = ["AUTOCAST_DTYPES", "arithmetic", "describe", "grad_scaler", "matmul_arithmetic"]
