"""The run-setting flags (``--max-steps``, ``--lr``, ...) and ``--override KEY=VALUE``.

The flags are generated from the fields of :class:`harness.config.settings.RunSettings`: the name
gives the flag, the type its metavar (the value stays text: the settings read and bound it, one rule
per setting), a ``Literal`` its choices (shown in the usage; the settings check them, so a bad one is
one error line), and the class docstring's ``Attributes:`` entry its help. A new setting is a new
flag of ``harness train`` and of the grid-like commands with no change here.
"""

from __future__ import annotations

import argparse
import re
import typing
from collections.abc import Iterable
from typing import Any

from harness.commands.flags import closed_choice, parse_key_values
from harness.config.settings import AUTO_SETTINGS, OVERRIDABLE, RunSettings


def setting_help() -> dict[str, str]:
    """Each run setting's help text: its entry under ``Attributes:`` in the RunSettings docstring."""
    out: dict[str, str] = {}
    name = ""
    in_attributes = False
    for line in (RunSettings.__doc__ or "").splitlines():
        text = line.strip()
        if text == "Attributes:":
            in_attributes = True
            continue
        entry = re.match(r"(\w+): (.*)", text)
        if in_attributes and entry and len(line) - len(line.lstrip()) == 8:
            name = entry.group(1)
            out[name] = entry.group(2)
        elif in_attributes and name and text:
            out[name] += " " + text
    return {k: _plain(v) for k, v in out.items()}


def _plain(doc: str) -> str:
    """Docstring markup as plain help text (argparse %-formats help, so ``%`` is escaped)."""
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", doc).replace("``", "")
    return text.replace("%", "%%")


def add_setting_flags(parser: Any, names: Iterable[str] = OVERRIDABLE) -> None:
    """One ``--<name>`` flag per run setting in ``names`` (dest ``setting_<name>``, default None)."""
    hints = typing.get_type_hints(RunSettings)
    docs = setting_help()
    for name in names:
        hint = hints[name]
        args = typing.get_args(hint)
        choices: list[str] | None = None
        if typing.get_origin(hint) is typing.Literal:
            choices = [*args, "auto"] if name in AUTO_SETTINGS else list(args)
            kind, metavar = closed_choice(name, choices), "{" + ",".join(choices) + "}"
        elif type(None) in args:  # optional: the text "none" is accepted, the settings coerce it
            kind, metavar = str, "N|none"
        else:  # the settings coerce and bound every value, typed or not (one rule per setting)
            kind, metavar = str, {int: "N", float: "X"}.get(hint, "TEXT")
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=f"setting_{name}",
            type=kind,
            default=None,
            choices=choices,
            metavar=metavar,
            help=docs.get(name),
        )


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The run settings the generated flags were given (only those given)."""
    out: dict[str, Any] = {}
    for name in OVERRIDABLE:
        value = getattr(args, f"setting_{name}", None)
        if value is not None:
            out[name] = value
    return out


def add_override_arguments(parser: argparse.ArgumentParser) -> None:
    """Run-setting overrides shared by grid, check, tables, claims, plots and report (they are part
    of the run ids): every setting but the seed (the grid's ``--seeds``), plus ``--override``."""
    group = parser.add_argument_group(
        "run overrides", "applied to every run; a row's own settings win; give tables/plots the same ones"
    )
    add_setting_flags(group, [n for n in OVERRIDABLE if n != "seed"])
    group.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any run setting as KEY=VALUE, e.g. --override warmup_steps=10 (repeatable)",
    )


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The override dict the flags describe (``--override`` items last: they win)."""
    return {**settings_from_args(args), **parse_key_values(getattr(args, "override", []) or [], "--override")}
