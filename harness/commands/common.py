"""Arguments shared by several subcommands."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.resources import check_resource_request as check_resource_request  # check_cmd's import


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root laid out like shared/data (senteval/, corpus/); default: $HARNESS_DATA, "
        "then ./data, then ../shared/data",
    )


def check_writable_dir(path: str | os.PathLike[str], what: str) -> Path:
    """Create ``path`` if needed and prove a file can be written in it, before any work is done.

    Raises:
        ConfigError: naming ``what`` and the path when it is a file or cannot be created or written.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{what} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{what} {folder} cannot be written: {exc.strerror or exc}") from None
    return folder


def check_writable_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """Prove ``path`` can be written (its folder is created; an existing file is left as it is)."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{what} {target} is a folder, not a file")
    check_writable_dir(target.parent if str(target.parent) else Path("."), f"the folder of {what}")
    if target.exists() and not os.access(target, os.W_OK):
        raise ConfigError(f"{what} {target} cannot be written: permission denied")
    return target


def check_finite_overrides(values: dict[str, Any], where: str) -> None:
    """Reject ``inf``/``nan`` (as numbers or as text) in run settings or method parameters.

    JSON records cannot hold them and no setting means anything at infinity, so the value is refused
    at the command line, naming the key: ``temperature must be finite, got 'nan'``.
    """
    for key, value in values.items():
        bad = False
        if isinstance(value, float):
            bad = not math.isfinite(value)
        elif isinstance(value, str):
            try:
                bad = not math.isfinite(float(value))
            except ValueError:
                bad = False
        if bad:
            raise ConfigError(f"{where} {key} must be finite, got {value!r}")


SEED_MAX = 2**32 - 1
"""NumPy's seeds are 32-bit."""


def check_seed(seed: Any) -> None:
    """A seed must be an integer in 0..2**32-1 (NumPy's range)."""
    if seed is None:
        return
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"--seed must be an integer from 0 to {SEED_MAX} (NumPy's range), got {seed!r}")


def check_threads(threads: int | str | None) -> None:
    """``--threads`` must be a positive count (``none`` = torch's default is left to the config)."""
    if threads is None:
        return
    try:
        count = int(threads)
    except (TypeError, ValueError):
        return  # "none" or a typo: the run settings say what is accepted
    if count <= 0:
        raise ConfigError(f"--threads must be >= 1, got {count}")


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


def check_finite_configs(configs: list[Any]) -> None:
    """No resolved run setting or method parameter may be inf or nan (e.g. from a spec's TOML)."""
    for config in configs:
        data = config.to_dict()
        params = data.get("params") or {}
        settings = {k: v for k, v in data.items() if k != "params"}
        check_finite_overrides(settings, f"run {config.run_id()}:")
        where = f"run {config.run_id()}: {config.method}"
        check_finite_overrides(params if isinstance(params, dict) else {}, where)
