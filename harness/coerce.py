"""Turning command-line strings and TOML values into declared field types.

Shared by method parameter records (``methods.base``) and run configs (``harness.config``), so a
``--set``, a ``--max-steps`` and a grid value are read by the same rules and fail with the same kind
of message (a :class:`~harness.errors.ConfigError` naming the field).
"""

from __future__ import annotations

import typing
from typing import Any

from harness.errors import ConfigError


def coerce_value(name: str, value: Any, annotation: Any) -> Any:
    """Turn a command-line string (or a TOML value) into the field's declared type."""
    target = annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        text = value if not isinstance(value, str) else value.strip()
        if text not in choices:
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(map(repr, choices))}")
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
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if target is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if target is str:
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {value!r} is not a valid {getattr(target, '__name__', target)}") from None
    return value
