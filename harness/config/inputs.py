"""Checks of the values a user types (seeds, threads, devices, overrides, folders), each one error line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from harness.coerce import check_finite
from harness.errors import ConfigError


def check_finite_overrides(values: dict[str, Any], where: str) -> None:
    """:func:`harness.coerce.check_finite` of each value, named ``<where> <key>`` (the flag it came
    from): ``--set temperature must be finite, got 'nan'``, before anything is resolved."""
    for key, value in values.items():
        check_finite(f"{where} {key}".strip(), value)


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


def check_runs_dir(path: str | os.PathLike[str]) -> Path:
    """The runs folder a report reads (tables, claims, plots, report) must exist: a misspelt
    ``--runs-dir`` is one error line, not a report of ``--`` cells written over the last one. A
    folder without records is said on stderr (one line) and reported as it is."""

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
