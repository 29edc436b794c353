"""Turning command-line strings and TOML values into declared field types.

Shared by typed method parameters (``methods.base``) and run configs (``harness.config``), so a
``--set``, a ``--max-steps`` and a grid value are read by the same rules and fail with the same kind
of message (a :class:`~harness.errors.ConfigError` naming the value). :func:`check_finite` is the one
place a non-finite number (``inf``, ``nan``, as a number or as text) is refused: coercion calls it
for every numeric field, typed: a text field takes any text. The ``name`` a coercion is given is how
its message names the value: the field, or where a user's value came from (``--set temperature``,
``--max-steps``, ``override lr``). A number given as text is ASCII: ``int()`` and ``float()`` would
also read other scripts' digits.
"""

from __future__ import annotations

import math
import re
import typing
from typing import Any

from harness.errors import ConfigError, did_you_mean


def check_finite(name: str, value: Any) -> None:
    """Raise ``ConfigError("<name> must be finite, got <value>")`` for inf/nan, as numbers or text.

    JSON records cannot hold them and no setting or parameter means anything at infinity. Anything
    that is not a number (or text of one) passes: its type is checked elsewhere.
    """
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        bad = not math.isfinite(value)
    elif isinstance(value, str):
        try:
            bad = not math.isfinite(float(value))
        except ValueError:
            bad = False
    else:
        bad = False
    if bad:
        raise ConfigError(f"{name} must be finite, got {value!r}")


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def read_number(text: str, kind: type[int] | type[float]) -> int | float:
    """``text`` as a count (``int``) or a number (``float``): ASCII digits, surrounding spaces allowed.

    Python's own ``int()`` and ``float()`` also read ``١٢`` (other scripts' digits) and ``1_000``;
    nothing the harness reads does. Whether the number is finite and in range is the caller's rule.

    Raises:
        ValueError: not such a number.
    """
    text = text.strip()
    if not (_INT_TEXT if kind is int else _FLOAT_TEXT).fullmatch(text):
        raise ValueError(text)
    return kind(text)


def coerce_value(name: str, value: Any, annotation: Any) -> Any:
    """Turn a command-line string (or a TOML value) into the field's declared type; an error names the
    value ``name`` (the field, or the flag or override it came from)."""
    target = annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        text = value if not isinstance(value, str) else value.strip()
        if text not in choices:
            hint = did_you_mean(value, choices)
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(map(repr, choices))}{hint}")
        return text
    if origin is tuple:
        if isinstance(value, str):
            parts = [p for p in value.replace("(", "").replace(")", "").split(",") if p.strip()]
        elif isinstance(value, list | tuple):
            parts = list(value)
        else:
            parts = [value]
        inner = typing.get_args(annotation)[0] if typing.get_args(annotation) else float
        return tuple(coerce_value(name, p, inner) for p in parts)
    if target in (int, float):
        check_finite(name, value)
    try:
        if target is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if target is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return read_number(value, int) if isinstance(value, str) else int(value)
        if target is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return read_number(value, float) if isinstance(value, str) else float(value)
        if target is str:
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {value!r} is not a valid {getattr(target, '__name__', target)}") from None
    return value


__all__ = ["check_finite", "coerce_value", "read_number"]
