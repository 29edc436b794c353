"""``harness methods``: the registered methods, their parameters (defaults as ``--set`` takes them,
choices, switches) and citations."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from methods.params import MethodParams

HELP = "list registered methods with their parameters, choices, defaults and citations"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one method, its switches described")


def run(args: argparse.Namespace) -> int:
    from methods import REGISTRY, get_method

    names = [args.name] if args.name else list(REGISTRY)
    for index, name in enumerate(names):
        cls = get_method(name)
        if index:
            print()
        print(f"{name}: {cls.description}")
        print(f"    cite: {cls.citation}")
        print("\n".join(parameter_lines(cls.params_cls, switches=bool(args.name))))
    return 0


def parameter_lines(params_cls: type[MethodParams], *, switches: bool) -> list[str]:
    """One line per parameter: ``--set name=default`` in the syntax ``--set`` accepts, then what it
    takes (choices, a type), switches marked; with ``switches``, a line under each switch saying
    what it chooses between."""
    hints = typing.get_type_hints(params_cls)
    described = params_cls.switches()
    fields = dataclasses.fields(params_cls)
    setting = [f"--set {f.name}={as_typed(f.default)}" for f in fields]
    width = max((len(s) for s in setting), default=0)
    lines = []
    for f, text in zip(fields, setting):
        mark = "  (switch)" if f.name in described else ""
        lines.append(f"    {text.ljust(width)}  {takes(hints[f.name])}{mark}")
        if switches and f.name in described:
            lines.append(f"    {'':{width}}    {described[f.name]}")
    return lines


def as_typed(value: Any) -> str:
    """A value as a user types it after ``--set name=``: ``true``, ``sgw``, ``0.5,1`` or ``""``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(as_typed(v) for v in value) or '""'
    return str(value)


def takes(annotation: Any) -> str:
    """What a parameter of this type accepts, in words."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + " | ".join(map(str, typing.get_args(annotation)))
    if origin is tuple:
        inner = typing.get_args(annotation)
        return f'comma-separated {takes(inner[0]) if inner else "number"}s, e.g. 1,0.5 ("" for none)'
    return {bool: "true | false", int: "integer", float: "number", str: "text"}.get(
        annotation, str(annotation)
    )
