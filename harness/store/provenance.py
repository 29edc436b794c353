"""Where a record comes from: the clock, the code version and git (imported by record and store).

Nothing here imports another harness module, so :mod:`harness.store.record` and :mod:`harness.store` can
both use it without importing each other in a circle.
"""

from __future__ import annotations

import functools
import subprocess
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def now_iso() -> str:
    """The current UTC time, ISO 8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def code_version() -> str:
    """``git describe`` of the source tree (``-dirty`` when modified), else the package version."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        _CODE_VERSION = _git_describe() or _package_version()
    return _CODE_VERSION


_CODE_VERSION: str | None = None


def _git_describe() -> str | None:
    text = (git_output("describe", "--always", "--dirty", "--abbrev=12") or "").strip()
    return f"git:{text}" if text else None


def _package_version() -> str:
    try:
        return f"cse-harness {version('cse-harness')}"
    except PackageNotFoundError:
        return "unknown"


def git_output(*args: str) -> str | None:
    """Stdout of ``git ARGS`` in the source tree, or None outside a checkout or on any failure."""
    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.cache
def code_dirty() -> bool | None:
    """Whether the source tree has uncommitted changes (None outside a git checkout)."""
    out = git_output("status", "--porcelain", "--untracked-files=no")
    return None if out is None else bool(out.strip())


__all__ = ["code_dirty", "code_version", "git_output", "now_iso"]
