"""The contract between the training loop and a method.

The loop knows nothing method-specific. Each step it tokenises B sentences (truncated to the
profile's max length) and calls ``method.compute_loss(encode, batch, step)``. The method decides how
many encoder calls it makes and on which rows (m dropout views in ONE call on a repeated batch, a
dropout-free pass, K samples, ...), applies its own trainable head, and returns a scalar loss plus
any scalar metrics worth logging (per-term losses, correlation rank, ...).

A method is an ``nn.Module``: its trainable head (the SimCSE MLP) is a sub-module, and the loop
optimises ``encoder.parameters()`` and ``method.parameters()`` together.

Hyper-parameters are a frozen dataclass subclassing :class:`MethodParams`. Its fields are the grid
keys that exist for the method: a misspelt ``--set`` key or grid key fails in
:meth:`MethodParams.from_overrides` before anything trains, and :meth:`MethodParams.validate` checks
values (against the encoder's hidden size too) and raises :class:`~harness.errors.ConfigError`
naming the field.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

import torch
from torch import nn

from harness.coerce import coerce_value
from harness.errors import ConfigError

P = TypeVar("P", bound="MethodParams")


@dataclass(frozen=True)
class MethodParams:
    """Base of every method's hyper-parameter record."""

    def validate(self, hidden_size: int | None = None) -> None:
        """Raise :class:`ConfigError` naming the field when a value is out of range."""

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_overrides(cls: type[P], overrides: Mapping[str, Any] | None = None, method: str = "") -> P:
        """Defaults updated by ``overrides``; unknown keys and badly typed values raise ConfigError."""
        overrides = dict(overrides or {})
        known = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                valid = ", ".join(sorted(known)) or "none"
                who = f"method {method!r}" if method else cls.__name__
                raise ConfigError(f"unknown parameter {key!r} for {who}{hint}; valid keys: {valid}")
            values[key] = coerce_value(key, value, hints[key])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


class EncodeFn(Protocol):
    """What the loop hands a method: one encoder call on a tokenised batch.

    Returns the pooled training feature ``[n, d]`` (before any head), with gradient. With
    ``dropout=False`` every dropout module is off for this call only (the model otherwise stays in
    training mode) and is back on afterwards.
    """

    hidden_size: int

    def __call__(self, batch: dict[str, torch.Tensor], *, dropout: bool = True) -> torch.Tensor: ...


@dataclass
class LossOutput:
    """A scalar loss and scalar metrics to log (floats, already detached)."""

    loss: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


def repeat_rows(batch: Mapping[str, torch.Tensor], n: int) -> dict[str, torch.Tensor]:
    """Repeat each sentence ``n`` times, sentence-major: rows ``[s0, s0, ..., s1, s1, ...]``.

    One encoder call on the result gives ``n`` dropout views per sentence; reshape the ``[B*n, d]``
    output to ``[B, n, d]`` to get them as ``views[:, k]``.
    """
    return {k: v.repeat_interleave(n, dim=0) for k, v in batch.items()}


class MLPHead(nn.Module):
    """SimCSE's training head: ``Linear(d, d)`` + Tanh, initialised normal(0, 0.02), zero bias.

    Freshly initialised (not the checkpoint's own pooler), used in training only.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        nn.init.normal_(self.dense.weight, mean=0.0, std=0.02)
        nn.init.zeros_(self.dense.bias)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class Method(nn.Module):
    """Base class of every registered method.

    Subclasses set the class attributes and implement :meth:`compute_loss`.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    citation: ClassVar[str]
    params_cls: ClassVar[type[MethodParams]]

    def __init__(self, params: MethodParams, hidden_size: int) -> None:
        super().__init__()
        if not isinstance(params, self.params_cls):
            raise ConfigError(
                f"{self.name}: expected {self.params_cls.__name__}, got {type(params).__name__}"
            )
        params.validate(hidden_size)
        self.params = params
        self.hidden_size = hidden_size

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        raise NotImplementedError

    def export_head(self) -> nn.Linear | None:
        """The trained ``Linear`` of the head, if any, for the ``cls`` evaluation pooler."""
        head = getattr(self, "mlp", None)
        return head.dense if isinstance(head, MLPHead) else None
