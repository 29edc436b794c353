"""One optimiser step: tokenise, the method's loss, backward, clip, AdamW, schedule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from harness.config.run_config import RunConfig
from harness.encoder.loading import loader_beside
from harness.encoder.precision import arithmetic, grad_scaler, matmul_arithmetic
from harness.encoder.training_encode import TrainingEncode

if TYPE_CHECKING:
    from harness.encoder.model import SentenceEncoder
    from methods.base import Method, Metric


def linear_schedule(total: int, warmup: int = 0) -> Callable[[int], float]:
    """Hugging Face's linear schedule: warm-up from 0, then linear decay to 0 at ``total`` steps."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


class TrainStep:
    """Tokenise, compute the method's loss, back-propagate, clip, step: one optimiser step.

    Shared by :func:`~harness.run.training.train_run` and the benchmarks, so they time exactly the
    loop's step. A step never waits for the device: it returns the loss and the method's metrics as
    detached tensors, which the run reads at its evaluation points
    (:class:`~harness.run.trajectory.PendingSteps`, where a non-finite loss fails the run).

    Args:
        encoder: the sentence encoder (put in train mode here).
        method: the method module (its parameters are optimised with the encoder's); bound to the
            encoder here.
        config: the run configuration (lr, weight decay, clipping, max length, precision, pooler).
        total: the run's number of steps (for the learning-rate schedule).
        compile: compile the encoder's training forward (``torch.compile``; on a GPU with CUDA
            graphs) and pad every batch to ``max_length``, so each encoder call has one shape.
    """

    def __init__(
        self,
        encoder: SentenceEncoder,
        method: Method,
        config: RunConfig,
        total: int,
        *,
        compile: bool = False,
    ) -> None:
        self.encoder = encoder
        self.method = method
        self.config = config
        self.encode = TrainingEncode(encoder, config.train_pooler, config.length_buckets)
        method.bind(encoder, loader_beside(encoder))
        seen: set[int] = set()
        self.parameters: list[nn.Parameter] = []
        for p in [*encoder.parameters(), *method.trainable_parameters()]:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self.parameters.append(p)
        self.optimizer = make_adamw(self.parameters, config.lr, config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, linear_schedule(max(total, 1), config.warmup_steps)
        )
        self.device_type = encoder.device.type
        self.scaler = grad_scaler(config.precision, self.device_type)
        self.compiled = compile
        if compile:  # after bind: a method's copies of the encoder stay eager
            encoder.compile_training("reduce-overhead" if self.device_type == "cuda" else None)
        self.train()

    def train(self) -> None:
        self.encoder.train()
        self.method.train()

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def __call__(self, sentences: Sequence[str], step: int) -> tuple[torch.Tensor, dict[str, Metric]]:
        """Run step ``step`` (1-based) on ``sentences``; return the loss and the method's metrics
        (its ``after_step`` hook's merged in), detached, as the device left them."""
        batch = self.encoder.tokenize(sentences, self.config.max_length, full_width=self.compiled)
        self.optimizer.zero_grad(set_to_none=True)
        with arithmetic(self.config.precision, self.device_type):
            out = self.method.compute_loss(self.encode, batch, step)
        loss = out.loss
        with matmul_arithmetic(self.config.precision, self.device_type):
            if self.scaler is None:
                loss.backward()
            else:
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.optimizer)  # clipping sees the true gradients
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.config.grad_clip)
        if self.scaler is None:
            self.optimizer.step()
        else:  # skips the update where a gradient overflowed, and adapts the scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.scheduler.step()
        metrics = dict(out.metrics)
        metrics.update(self.method.after_step(step))
        return loss.detach(), metrics


def make_adamw(parameters: list[nn.Parameter], lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW (betas 0.9/0.999, eps 1e-8), fused where PyTorch has a fused kernel for the parameters'
    device and dtype: one kernel over all tensors instead of a loop of element-wise operations per
    tensor (several times faster on the CPU: docs/speed.md, "Where the code's constants come
    from"); the same update up to float rounding. Elsewhere the default implementation."""
    kwargs: dict[str, Any] = {"lr": lr, "weight_decay": weight_decay, "betas": (0.9, 0.999), "eps": 1e-8}
    devices = {p.device.type for p in parameters}
    if parameters and devices <= {"cpu", "cuda"} and all(p.dtype == torch.float32 for p in parameters):
        try:
            return torch.optim.AdamW(parameters, fused=True, **kwargs)
        except (RuntimeError, ValueError):  # no fused kernel in this build: the default below
            pass
    return torch.optim.AdamW(parameters, **kwargs)
