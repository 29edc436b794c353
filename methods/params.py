"""A method's hyper-parameters: the typed record every method's parameters subclass, the range checks
methods share, and the switches between a paper's reading and its released code's."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.coerce import coerce_value
from harness.errors import ConfigError, did_you_mean

P = TypeVar("P", bound="MethodParams")


SWITCH = "switch"
"""Field-metadata key marking a parameter that chooses between a paper's and its released code's
reading (its value is a one-line description). Reporters state every switch of a run."""


def switch(default: Any, description: str) -> Any:
    """A dataclass field that chooses between two readings of a method (paper vs released code)."""
    return field(default=default, metadata={SWITCH: description})


@dataclass(frozen=True)
class MethodParams:
    """Base of every method's typed hyper-parameters.

    ``__post_init__`` coerces every field to its declared type, once, whatever built the record
    (:func:`harness.coerce.coerce_value`: ``Literal`` fields hold one of their choices, numbers are
    finite, command-line text becomes numbers). :meth:`validate` adds the method's own range checks
    (and those that need the encoder's hidden size).
    """

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, coerce_value(f.name, getattr(self, f.name), hints[f.name]))

    def validate(self, hidden_size: int | None = None) -> None:
        """Raise :class:`ConfigError` naming the field when a value is out of range.

        ``hidden_size=None`` checks what is wrong under every encoder (a table spec, when loaded);
        a width adds the checks that depend on it (:func:`harness.store.run_config.resolve_run`).
        """

    def describe(self, hidden_size: int) -> dict[str, str]:
        """What the parameters resolve to on an encoder of this width (kept in the run record)."""
        return {}

    def models(self) -> tuple[str, ...]:
        """The encoders besides the run's own that the method loads (``load(name)`` in its ``bind``):
        the checks before a run read them as they read the run's model."""
        return ()

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def switches(cls) -> dict[str, str]:
        """The paper-vs-released-code switches of this record: ``{field: description}``."""
        return {f.name: str(f.metadata[SWITCH]) for f in dataclasses.fields(cls) if SWITCH in f.metadata}

    @classmethod
    def from_overrides(
        cls: type[P], overrides: Mapping[str, Any] | None = None, method: str = "", where: str = ""
    ) -> P:
        """Defaults updated by ``overrides``; unknown keys and badly typed values raise ConfigError
        (a value's error names it ``<where> <key>``: ``where`` is the flag it came from, e.g. ``--set``)."""
        overrides = dict(overrides or {})
        known = {f.name for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        for key in overrides:
            if key not in known:
                hint = did_you_mean(key, known)
                valid = ", ".join(sorted(known)) or "none"
                who = f"method {method!r}" if method else cls.__name__
                raise ConfigError(f"unknown parameter {key!r} for {who}{hint}; valid keys: {valid}")
            if where:
                overrides[key] = coerce_value(f"{where} {key}", overrides[key], hints[key])
        return cls(**overrides)  # __post_init__ coerces the values

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form (tuples become lists): only for the store and process boundaries."""
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def check_positive(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value > 0`` (a record's numbers are finite already:
    :meth:`MethodParams.__post_init__` coerced them)."""
    if not value > 0:
        raise ConfigError(f"{name} must be finite and > 0, got {value}")


TEMPERATURE_RANGE = (1e-3, 1e3)
"""What a softmax temperature may be: 1/tau scales cosines in [-1, 1], so a smaller tau overflows the
logits (1e-320 gives inf, then a NaN loss) and a larger one flattens them to nothing; the papers use
0.05 and SimCSE++'s DCL 0.05 to 50."""


def check_temperature(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value`` lies in :data:`TEMPERATURE_RANGE`."""
    low, high = TEMPERATURE_RANGE
    if not low <= value <= high:
        raise ConfigError(f"{name} must be from {low:g} to {high:g} (a softmax temperature), got {value}")


def check_non_negative(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value >= 0`` (finite: see :func:`check_positive`)."""
    if not value >= 0:
        raise ConfigError(f"{name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class ContrastiveParams(MethodParams):
    """The fields every method here shares (declared once).

    Attributes:
        temperature: tau of the InfoNCE softmax (paper: 0.05; 0.001 to 1000).
        mlp: apply the training-only MLP head (Linear + Tanh) to the pooled feature.
    """

    temperature: float = 0.05
    mlp: bool = True

    def validate(self, hidden_size: int | None = None) -> None:
        check_temperature(self.temperature, "temperature")
