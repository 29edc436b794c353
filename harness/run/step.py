"""One optimiser step: tokenise, the method's loss, backward, clip, AdamW, schedule."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile

from harness.encoder.loading import loader_beside
from harness.encoder.precision import arithmetic, grad_scaler, matmul_arithmetic
from harness.encoder.training_encode import TrainingEncode
from harness.store.run_config import RunConfig
from methods.checks import Check, deferred_checks

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
    detached tensors and keeps the method's checks (:func:`~methods.checks.device_check`) in
    :attr:`checks`, which the run reads at its evaluation points
    (:class:`~harness.run.trajectory.PendingSteps`, where a non-finite loss or a failed check fails
    the run). :func:`host_reads` counts what a step reads back all the same.

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
        self.checks: list[Check] = []  # the last step's device checks
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
        with deferred_checks() as checks:
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
        self.checks = checks
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


HOST_READ = "aten::_local_scalar_dense"
"""The operator behind every read of a tensor's value by the host (``.item()``, ``bool``, ``int`` and
``float`` of a tensor, a tensor in an ``if``, the error checks of ``torch.linalg``): on a GPU each
waits for the device to finish."""

_REPO = Path(__file__).resolve().parents[2]


def host_reads(run: Callable[[], object]) -> list[str]:
    """The host reads ``run()`` makes, each named by the repository function that made it (see
    :func:`read_sites`). Device-agnostic: on the CPU they cost nothing, but they are the calls that
    make a GPU step wait."""
    with profile(activities=[ProfilerActivity.CPU], **STACKS) as prof:
        run()
    return read_sites(prof.events())


STACKS: dict[str, Any] = {"with_stack": True, "experimental_config": _ExperimentalConfig(verbose=True)}
"""Profiler options that keep each operator's Python stack (:func:`read_sites` names reads by it)."""


def read_sites(events: Iterable[Any]) -> list[str]:
    """The :data:`HOST_READ` events of a profile taken with :data:`STACKS`, each as the innermost
    repository frame above it (``methods/whitening.py(150): _checked_blocks``). Reads by the
    optimiser are left out: the fused AdamW reads its own step counters, which live on the host."""
    sites: list[str] = []
    for event in events:
        if event.name != HOST_READ:
            continue
        stack: list[str] = []
        parent, fused = event, False
        while parent is not None:
            fused = fused or parent.name.startswith("aten::_fused_adam")
            stack = stack or list(parent.stack or [])
            parent = parent.cpu_parent
        if fused or any(f"{Path('torch', 'optim')}" in frame for frame in stack):
            continue
        inside = [site for site in map(_in_repo, stack) if site is not None]
        sites.append(inside[0] if inside else "outside the repository")
    return sites


def _in_repo(frame: str) -> str | None:
    """``frame`` (``path(line): name``) with its path relative to the repository, or None when it is
    not a repository file (the profiler writes some paths relative, some absolute)."""
    path = Path(frame.split("(", 1)[0])
    if path.is_absolute():
        if ".venv" in path.parts or not path.is_relative_to(_REPO):
            return None
        return str(path.relative_to(_REPO)) + frame[len(str(path)) :]
    return frame if path.parts and (_REPO / path).is_file() else None
