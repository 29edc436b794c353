"""The run store: one JSON record per run, written atomically.

Layout under the store root (``./runs`` by default)::

    records/<run_id>.json        the run record (schema below)
    checkpoints/<run_id>/        the best encoder, when a run was asked to save it

The record's typed shape and schema version live in :mod:`harness.record` (``RunRecord``).

Records are written to a temporary file in the same folder and moved into place with
:func:`os.replace`, so a reader (a table reporter, another Ray trial) never sees half a record.
Reading never crashes on a bad file: it is skipped with a warning.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import subprocess
import tempfile
import warnings
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.record import SCHEMA_VERSION, STATUSES, new_record

_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class RunStore:
    """A folder of run records.

    Args:
        root: the store folder; created on the first write.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    def path(self, run_id: str) -> Path:
        """Where the record of ``run_id`` lives (whether or not it exists)."""
        if not _ID_PATTERN.match(run_id):
            raise ConfigError(f"invalid run id {run_id!r}")
        return self.records_dir / f"{run_id}.json"

    def checkpoint_dir(self, run_id: str) -> Path:
        """Where a run's best encoder is saved (``save_pretrained`` layout)."""
        self.path(run_id)  # validates the id
        return self.root / "checkpoints" / run_id

    def save(self, record: Mapping[str, Any]) -> Path:
        """Write ``record`` atomically (temporary file + ``os.replace``); return its path."""
        run_id = record.get("run_id")
        if not isinstance(run_id, str):
            raise ConfigError("a run record needs a string 'run_id'")
        target = self.path(run_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(_finite(record), indent=2, sort_keys=False, allow_nan=False)
        fd, tmp = tempfile.mkstemp(prefix=f".{run_id}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return target

    def load(self, run_id: str) -> dict[str, Any] | None:
        """The record of ``run_id``, or None when there is none (or it is unreadable: warned)."""
        path = self.path(run_id)
        if not path.exists():
            return None
        return _read(path)

    def records(self) -> list[dict[str, Any]]:
        """Every readable record, sorted by file name; unreadable files are skipped with a warning."""
        if not self.records_dir.is_dir():
            return []
        out = []
        for path in sorted(self.records_dir.glob("*.json")):
            record = _read(path)
            if record is not None:
                out.append(record)
        return out

    def finished_ids(self) -> set[str]:
        """Ids of the runs whose record says ``finished``."""
        return {r["run_id"] for r in self.records() if r.get("status") == "finished"}


def now_iso() -> str:
    """The current UTC time, ISO 8601, seconds precision."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def code_version() -> str:
    """``git describe`` of the source tree (``-dirty`` when modified), else the package version."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        _CODE_VERSION = _git_describe() or _package_version()
    return _CODE_VERSION


_CODE_VERSION: str | None = None


def _git_describe() -> str | None:
    repo = Path(__file__).resolve().parent.parent
    if not (repo / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.strip()
    return f"git:{text}" if done.returncode == 0 and text else None


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"cse-harness {version('cse-harness')}"
    except PackageNotFoundError:
        return "unknown"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        warnings.warn(f"skipping unreadable run record {path}: {exc}", RuntimeWarning, stacklevel=3)
        return None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        warnings.warn(
            f"skipping run record {path}: not a run record (no run_id)", RuntimeWarning, stacklevel=3
        )
        return None
    return data


def _finite(value: Any) -> Any:
    """Replace NaN and infinities by None so the record stays strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return _finite(value.item())
        except (TypeError, ValueError):
            return value
    return value


__all__ = ["SCHEMA_VERSION", "STATUSES", "RunStore", "code_version", "new_record", "now_iso"]
