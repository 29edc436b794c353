"""``harness methods``: list the registered methods, their parameters and citations."""

from __future__ import annotations

import argparse
import dataclasses

HELP = "list registered methods with their parameters, defaults and citations"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one method in full")


def run(args: argparse.Namespace) -> int:
    from methods import REGISTRY, get_method

    names = [args.name] if args.name else list(REGISTRY)
    for name in names:
        cls = get_method(name)
        print(f"{name}: {cls.description}")
        print(f"    cite: {cls.citation}")
        if args.name:
            switches = cls.params_cls.switches()
            for f in dataclasses.fields(cls.params_cls):
                note = f"    (switch: {switches[f.name]})" if f.name in switches else ""
                print(f"    --set {f.name}={f.default!r}{note}")
    return 0
