"""One optimiser step: tokenise, the method's loss, backward, clip, AdamW, schedule."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from harness.config.run_config import RunConfig
from harness.encoder.loading import loader_beside
from harness.encoder.training_encode import TrainingEncode
from harness.errors import TrainingError

if TYPE_CHECKING:
    from harness.encoder.model import SentenceEncoder
    from methods.base import Method


def linear_schedule(total: int, warmup: int = 0) -> Callable[[int], float]:
    """Hugging Face's linear schedule: warm-up from 0, then linear decay to 0 at ``total`` steps."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


# -- one optimiser step ---------------------------------------------------------------------------
LOSS_LIMIT = float(torch.finfo(torch.float16).max)
"""The largest loss a step accepts (float16's largest number, 65504). The methods' losses stay far
below it (InfoNCE is about log(batch); the Barlow terms are bounded by d and d**2 x their weights),
so a larger loss means overflowing logits (e.g. ``--set temperature=1e-30``: logits up to 1e30, a
loss of 3e28): the run fails at that step instead of training to meaningless numbers."""


def overflow_message(loss: float, step: int, config: RunConfig) -> str:
    """One line: the loss, the limit, and the temperature when the run's method has one."""
    text = f"loss {loss:.3g} at step {step} is beyond {LOSS_LIMIT:g} (float16's range): the logits overflow"
    temperature = getattr(config.params, "temperature", None)
    if isinstance(temperature, int | float) and temperature > 0:
        text += f" (temperature {temperature:g} scales cosines up to {1 / temperature:.3g})"
    return text + "; the run's numbers would mean nothing"


class TrainStep:
    """Tokenise, compute the method's loss, back-propagate, clip, step: one optimiser step.

    Shared by :func:`train_run` and the training-speed benchmark, so the benchmark times exactly the
    loop's step.

    Args:
        encoder: the sentence encoder (put in train mode here).
        method: the method module (its parameters are optimised with the encoder's).
        config: the run configuration (lr, weight decay, clipping, max length, precision, pooler).
        total: the run's number of steps (for the learning-rate schedule).
    """

    def __init__(self, encoder: SentenceEncoder, method: Method, config: RunConfig, total: int) -> None:
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
        self.train()

    def train(self) -> None:
        self.encoder.train()
        self.method.train()

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.config.precision == "bf16":
            return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def __call__(self, sentences: Sequence[str], step: int) -> tuple[float, dict[str, float]]:
        """Run step ``step`` (1-based) on ``sentences``; return the loss and the method's metrics.

        The method's ``after_step`` hook runs after the optimiser step; its metrics are merged in.

        Raises:
            TrainingError: the loss is NaN or infinite, or beyond :data:`LOSS_LIMIT` (nothing is
                updated).
        """
        batch = self.encoder.tokenize(sentences, self.config.max_length)
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            out = self.method.compute_loss(self.encode, batch, step)
        loss = out.loss
        value = float(loss.detach().float().item())
        if not math.isfinite(value):
            raise TrainingError(f"non-finite loss ({value}) at step {step}")
        if abs(value) > LOSS_LIMIT:
            raise TrainingError(overflow_message(value, step, self.config))
        loss.backward()
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.config.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        metrics = {k: float(v) for k, v in out.metrics.items()}
        metrics.update({k: float(v) for k, v in self.method.after_step(step).items()})
        return value, metrics


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
