"""Flag helpers every command shares: closed choices and numbers as one error line, the profile and
data folder flags, ``KEY=VALUE`` lists, ``--compile``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from harness.coerce import read_number
from harness.config.profiles import PROFILES
from harness.errors import ConfigError, did_you_mean


def closed_choice(what: str, choices: Sequence[str]) -> Any:
    """An argparse ``type`` for a flag with a closed set of values: a value outside ``choices`` is
    ``unknown <what> 'x' (did you mean 'y'?); choose one of a, b, c``, one error line (exit 2).

    Given with ``choices=`` too, so that the usage and ``--help`` list the values."""

    def check(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {value!r}{did_you_mean(value, choices)}; choose one of {', '.join(choices)}"
            )
        return value

    check.__name__ = what  # argparse names the type in its own messages
    return check


def number(kind: type[int] | type[float]) -> Any:
    """An argparse ``type`` reading a count (``int``) or a number (``float``) in ASCII digits
    (:func:`harness.coerce.read_number`; argparse's ``int`` reads ``١٢``); ranges are the options'."""

    def read(text: str) -> int | float:
        try:
            return read_number(text, kind)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what} in ASCII digits, got {text!r}") from None

    read.__name__ = kind.__name__
    return read


def add_profile(parser: argparse.ArgumentParser, default: str | None = None, shown: str = "cpu") -> None:
    """``--profile``, closed to :data:`~harness.config.profiles.PROFILES`."""
    parser.add_argument(
        "--profile",
        default=default,
        type=closed_choice("profile", tuple(PROFILES)),
        choices=tuple(PROFILES),
        metavar="PROFILE",
        help=profile_help(shown),
    )


def profile_help(default: str = "cpu") -> str:
    """The ``--profile`` help: every profile (:data:`harness.config.profiles.PROFILES`), the default
    marked."""
    return "profile: " + " | ".join(f"{p} (default)" if p == default else p for p in PROFILES)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root laid out like shared/data (senteval/, corpus/); default: $HARNESS_DATA, "
        "then ./data, then ../shared/data",
    )


def parse_key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}`` (``--set``, ``--override``); a malformed item raises
    :class:`ConfigError` naming ``flag``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


COMPILE_CHOICES = ("auto", "on", "off")


def add_compile_argument(parser: argparse.ArgumentParser | Any) -> None:
    """``--compile auto|on|off``: the compiled training forward (auto: on a GPU only)."""
    parser.add_argument(
        "--compile",
        default="auto",
        choices=COMPILE_CHOICES,
        help="compile the training forward with torch.compile (CUDA graphs on a GPU): auto = on a GPU only, "
        "where it is faster; not part of the run id",
    )


def compile_choice(value: str) -> bool | None:
    """``auto`` -> None (decided by the device), ``on`` -> True, ``off`` -> False."""
    return None if value == "auto" else value == "on"
