"""Arguments shared by several subcommands.

The run-setting flags (``--max-steps``, ``--lr``, ...) are generated from the fields of
:class:`harness.config.RunSettings`: the name gives the flag, the type its argparse type, a
``Literal`` its choices (shown in the usage; the settings check them, so a bad one is one error
line), and the class docstring's ``Attributes:`` entry its help. A new setting is a new flag of
``harness train`` and of the grid-like commands with no change here.
"""

from __future__ import annotations

import argparse
import os
import re
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import check_output_dir, check_output_file
from harness.coerce import check_finite
from harness.config import AUTO_SETTINGS, OVERRIDABLE, PROFILES, RunSettings
from harness.errors import ConfigError
from harness.resources import check_resource_request as check_resource_request  # check_cmd's import


def profile_help(default: str = "cpu") -> str:
    """The ``--profile`` help: every profile of :data:`harness.config.PROFILES`, the default marked."""
    return "profile: " + " | ".join(f"{p} (default)" if p == default else p for p in PROFILES)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root laid out like shared/data (senteval/, corpus/); default: $HARNESS_DATA, "
        "then ./data, then ../shared/data",
    )


def check_writable_dir(path: str | os.PathLike[str], what: str) -> Path:
    """Create ``path`` if needed and prove a file can be written in it and its disk is not full,
    before any work is done (:func:`harness.atomic.check_output_dir`).

    Raises:
        WriteError: naming ``what`` and the path when it is a file, cannot be created or written, or
            its disk is full.
    """
    return check_output_dir(path, what)


def check_writable_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """Prove ``path`` can be written (:func:`harness.atomic.check_output_file`; its folder is
    created, an existing file is left as it is)."""
    return check_output_file(Path(path), what)


def check_finite_overrides(values: dict[str, Any], where: str) -> None:
    """:func:`harness.coerce.check_finite` of each value, named ``<where> <key>`` (the flag it came
    from): ``--set temperature must be finite, got 'nan'``, before anything is resolved."""
    for key, value in values.items():
        check_finite(f"{where} {key}".strip(), value)


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
        if typing.get_origin(hint) is typing.Literal:
            choices = [*args, "auto"] if name in AUTO_SETTINGS else list(args)
            kind, metavar = str, "{" + ",".join(choices) + "}"
        elif type(None) in args:  # optional: the text "none" is accepted, the settings coerce it
            kind, metavar = str, "N|none"
        else:
            kind, metavar = hint, {int: "N", float: "X"}.get(hint, "TEXT")
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=f"setting_{name}",
            type=kind,
            default=None,
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


SEED_MAX = 2**32 - 1
"""NumPy's seeds are 32-bit."""


def check_seed(seed: Any) -> None:
    """A seed must be an integer in 0..2**32-1 (NumPy's range)."""
    if seed is None:
        return
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"--seed must be an integer from 0 to {SEED_MAX} (NumPy's range), got {seed!r}")


THREADS_MAX = 1024
"""More torch threads than this is a typo (a trial's threads are its CPUs: --cpus-per-trial)."""


def check_threads(threads: int | str | None) -> None:
    """``--threads`` must be a count in 1..:data:`THREADS_MAX` (``none`` = torch's default is left
    to the config)."""
    if threads is None:
        return
    try:
        count = int(threads)
    except (TypeError, ValueError):
        return  # "none" or a typo: the run settings say what is accepted
    if count <= 0:
        raise ConfigError(f"--threads must be >= 1, got {count}")
    if count > THREADS_MAX:
        raise ConfigError(f"--threads must be at most {THREADS_MAX} (torch threads of one run), got {count}")


def check_environment() -> None:
    """The ``HARNESS_*`` settings read from the environment, checked before any work (one line
    naming the variable): the data root is checked where it is resolved; the checkpoint interval
    here (:func:`harness.checkpoint.every_from_env`)."""
    from harness.checkpoint import every_from_env

    every_from_env(strict=True)


def check_runs_dir(path: str | os.PathLike[str]) -> Path:
    """The runs folder a report reads (tables, claims, plots, report) must exist: a misspelt
    ``--runs-dir`` is one error line, not a report of ``--`` cells written over the last one. A
    folder without records is said on stderr (one line) and reported as it is."""
    import sys

    folder = Path(path)
    if not folder.exists():
        raise ConfigError(
            f"runs folder {folder} does not exist (is --runs-dir spelt right?): nothing written"
        )
    if not folder.is_dir():
        raise ConfigError(f"runs folder {folder} is a file, not a folder")
    records = folder / "records"
    if not records.is_dir() or not any(records.glob("*.json")):
        print(f"warning: runs folder {folder} holds no run records: every cell shows --", file=sys.stderr)
    return folder


def check_device(device: str | None) -> None:
    """``--device`` must name a torch device this machine has (cpu, cuda, cuda:N, mps)."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device {device!r} is not a torch device (cpu, cuda, cuda:N, mps)") from None
    if dev.type == "cpu":
        return
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"--device {device}: no CUDA GPU is available here (use --device cpu)")
        if dev.index is not None and dev.index >= count:
            raise ConfigError(
                f"--device {device}: this machine has {count} CUDA GPU(s) (cuda:0..cuda:{count - 1})"
            )
        return
    if dev.type == "mps":
        backend = getattr(torch.backends, "mps", None)
        if backend is None or not backend.is_available():
            raise ConfigError(f"--device {device}: MPS is not available here (use --device cpu)")
        return
    raise ConfigError(f"--device {device}: unsupported device type {dev.type!r} (cpu, cuda, cuda:N, mps)")


def check_spec_paths(names: list[str]) -> None:
    """A spec given as a path must be a UTF-8 file (a folder or other bytes: one line naming it)."""
    for name in names:
        path = Path(name)
        if not path.exists():
            continue  # a name in tables/ or a missing file: the spec loader says which
        if path.is_dir():
            raise ConfigError(f"table spec {path} is a folder, not a .toml file")
        try:
            path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise ConfigError(f"table spec {path} cannot be read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"table spec {path} is not valid UTF-8 (byte {exc.start})") from None
