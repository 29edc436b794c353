"""CPU kernels: fp32 linear layers through oneDNN where that is faster than the default BLAS."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch has oneDNN's fused linear operator (``torch.ops.mkldnn._linear_pointwise``)
    and it computes a small fp32 product (with and without the fused GELU) as ``F.linear`` does."""
    try:
        if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
            return False
        gen = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*shape, generator=gen) for shape in ((5, 3, 16), (8, 16), (8,)))
        with torch.no_grad():
            plain = nn.functional.linear(x, w, b)
            fused = torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu", [], "none")
            ok = torch.allclose(torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], ""), plain, atol=1e-4)
            return bool(ok and torch.allclose(fused, nn.functional.gelu(plain), atol=1e-4))
    except Exception:  # an operator that cannot load or run on this CPU counts as absent
        return False


def _onednn_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """fp32 on the CPU, outside autocast (which has its own bf16 path)."""
    return (
        x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.device.type == "cpu"
        and not torch.is_autocast_enabled("cpu")
    )


class _OneDNNLinear(torch.autograd.Function):
    """``x @ W^T + b`` with oneDNN, forward and backward (the operator itself has no backward):
    ``dx = g W`` and ``dW = g^T x``, both as oneDNN products; ``db`` sums ``g`` over rows."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        op = torch.ops.mkldnn._linear_pointwise
        rows = grad.reshape(-1, grad.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = op(rows, weight.t().contiguous(), None, "none", [], "").reshape(x.shape)
        if ctx.needs_input_grad[1]:
            inputs = x.reshape(-1, x.shape[-1])
            dw = op(rows.t().contiguous(), inputs.t().contiguous(), None, "none", [], "")
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = rows.sum(0)
        return dx, dw, db


@contextlib.contextmanager
def onednn_linears(model: nn.Module) -> Iterator[None]:
    """Within the block, the model's fp32 linear layers on the CPU compute with oneDNN.

    PyTorch's CPU wheel sends an fp32 ``nn.Linear`` to MKL's sgemm, which on some processors is far
    slower than oneDNN (``bench_sts_eval.py --also-blas`` and ``bench_train_step.py`` print both;
    the measurements per processor: docs/speed.md). The same product in
    fp32 either way (outputs differ by float rounding, ~3e-6 on unit-scale values); with gradients the
    backward products run in oneDNN too (:class:`_OneDNNLinear`), and without, a BERT feed-forward's
    exact (erf) GELU is fused into its first linear layer. Autocast, other dtypes and other devices
    take the usual path, as does every layer when this PyTorch lacks the operator.
    """
    if not onednn_available():
        yield
        return
    op = torch.ops.mkldnn._linear_pointwise
    patched: list[nn.Module] = []

    def linear_forward(layer: nn.Linear) -> Any:
        def forward(x: torch.Tensor) -> torch.Tensor:
            if not _onednn_applies(x, layer.weight):
                return nn.functional.linear(x, layer.weight, layer.bias)
            if torch.is_grad_enabled():
                trained: torch.Tensor = _OneDNNLinear.apply(x, layer.weight, layer.bias)
                return trained
            out: torch.Tensor = op(x, layer.weight, layer.bias, "none", [], "")
            return out

        return forward

    def gelu_forward(block: nn.Module, dense: nn.Linear) -> Any:
        act: Any = getattr(block, "intermediate_act_fn")  # noqa: B009

        def forward(hidden_states: torch.Tensor) -> torch.Tensor:
            if _onednn_applies(hidden_states, dense.weight) and not torch.is_grad_enabled():
                out: torch.Tensor = op(hidden_states, dense.weight, dense.bias, "gelu", [], "none")
                return out
            result: torch.Tensor = act(dense(hidden_states))
            return result

        return forward

    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.forward = linear_forward(module)  # type: ignore[method-assign]
            patched.append(module)
        dense = getattr(module, "dense", None)
        if _exact_gelu(getattr(module, "intermediate_act_fn", None)) and isinstance(dense, nn.Linear):
            module.forward = gelu_forward(module, dense)
            patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward  # back to the class's forward


def _exact_gelu(fn: Any) -> bool:
    """Whether ``fn`` is the exact (erf) GELU: Hugging Face's ``GELUActivation`` or ``F.gelu``."""
    if fn is nn.functional.gelu or (isinstance(fn, nn.GELU) and fn.approximate == "none"):
        return True
    return type(fn).__name__ == "GELUActivation" and getattr(fn, "act", None) is nn.functional.gelu
