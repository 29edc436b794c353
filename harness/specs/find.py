"""Where the specs are: names in the ``tables/`` and ``plots/`` folders, or paths.

The folders are found in this order:

1. ``$HARNESS_SPECS``: a folder holding ``tables/`` (and ``plots/``), e.g. a user's own specs;
2. the checkout this package runs from (``tables/`` beside ``pyproject.toml``), so an edit of a spec
   is seen at once;
3. the copies shipped inside the installed package (``harness/specs/shipped/``, put there by the
   wheel build: ``[tool.setuptools.package-dir]`` in ``pyproject.toml``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness.errors import ConfigError, did_you_mean
from harness.specs.model import PlotSpec, TableSpec
from harness.specs.parse import load_plot_spec, load_table_spec

SPECS_ENV = "HARNESS_SPECS"
"""The environment variable naming a folder with ``tables/`` and ``plots/`` to use instead."""
_CHECKOUT = Path(__file__).resolve().parents[2]
_SHIPPED = Path(__file__).resolve().parent / "shipped"


def spec_root() -> Path:
    """The folder holding ``tables/`` and ``plots/`` (see the module docstring for the order).

    Raises:
        ConfigError: ``$HARNESS_SPECS`` names no folder with ``tables/`` in it, or no specs are
            found at all (an install without its package data).
    """
    chosen = os.environ.get(SPECS_ENV, "").strip()
    if chosen:
        root = Path(chosen).expanduser()
        if not (root / "tables").is_dir():
            raise ConfigError(f"{SPECS_ENV}={chosen}: no tables/ folder there")
        return root
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "tables").is_dir():
        return _CHECKOUT
    if (_SHIPPED / "tables").is_dir():
        return _SHIPPED
    raise ConfigError(
        f"no table specs found (looked in {_CHECKOUT / 'tables'} and {_SHIPPED / 'tables'}); "
        f"set {SPECS_ENV} to a folder with tables/ and plots/"
    )


def tables_dir() -> Path:
    """The folder of the table specs."""
    return spec_root() / "tables"


def plots_dir() -> Path:
    """The folder of the plot specs."""
    return spec_root() / "plots"


def _resolve(name: str, directory: Path, what: str) -> Path:
    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        if not path.exists():
            raise ConfigError(f"{what} spec file not found: {path}")
        return path  # a folder, a FIFO, ...: the spec reader says what it is
    candidate = directory / f"{name}.toml"
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in directory.glob("*.toml"))
    hint = did_you_mean(name, known)
    raise ConfigError(f"unknown {what} spec {name!r}{hint}; known: {', '.join(known)} (or a path, or 'all')")


def table_spec_paths(names: Sequence[str] = (), directory: Path | None = None) -> list[Path]:
    """Spec files for names (a path, a name in ``tables/``, or ``all``); no names = all."""
    directory = directory or tables_dir()
    if not names or "all" in names:
        return sorted(directory.glob("*.toml"))
    return [_resolve(n, directory, "table") for n in names]


def load_table_specs(names: Sequence[str] = (), directory: Path | None = None) -> list[TableSpec]:
    """Load table specs by name or path (``all`` or nothing = every spec in ``tables/``); one file
    named twice is loaded once, two files of one name are refused (:func:`distinct_paths`)."""
    directory = directory or tables_dir()
    specs = [load_table_spec(p) for p in distinct_paths(table_spec_paths(names, directory), "table")]
    if not specs:
        raise ConfigError(f"no table specs found in {directory}")
    return specs


def load_plot_specs(names: Sequence[str] = (), directory: Path | None = None) -> list[PlotSpec]:
    """Load plot specs by name or path (``all`` or nothing = every spec in ``plots/``); names as for
    :func:`load_table_specs`."""
    directory = directory or plots_dir()
    if not names or "all" in names:
        paths = sorted(directory.glob("*.toml"))
    else:
        paths = [_resolve(n, directory, "plot") for n in names]
    return [load_plot_spec(p) for p in distinct_paths(paths, "plot")]


_OUTPUTS = {
    "table": "{name}.tex, its claims and its section of the report",
    "plot": "{name}.png and {name}.pdf",
}


def distinct_paths(paths: Sequence[Path], what: str) -> list[Path]:
    """``paths`` with a file named twice kept once; two files whose names differ only by their folder
    (or letter case) are refused before anything is read or written.

    A spec's file name is its name everywhere: its table, claims, plot files and report section
    (``<name>.tex``, ``<name>.png``, ...), and its cells in a grid's plan, so two specs of one name
    would overwrite each other's outputs.

    Raises:
        ConfigError: naming both files.
    """
    seen: dict[str, Path] = {}
    out: list[Path] = []
    for path in paths:
        key = path.stem.casefold()
        first = seen.get(key)
        if first is None:
            seen[key] = path
            out.append(path)
        elif first.resolve() != path.resolve():
            outputs = _OUTPUTS[what].format(name=path.stem)
            raise ConfigError(
                f"{what} specs {first} and {path} share the name {path.stem!r}: their outputs ({outputs}) "
                "would overwrite each other; rename one (nothing was written)"
            )
    return out
