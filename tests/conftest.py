"""Shared fixtures: the real data root, and a small copy of the SentEval STS files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config.paths import resolve_data_root
from harness.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[1]

MINI_LINES = 60
"""Lines kept per STS file in :func:`mini_data_root` (SICK: plus its header)."""


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The data root as the CLI finds it from the repository root ($HARNESS_DATA, ./data, ../shared/data).

    Tests that need the real data skip cleanly when none is found.
    """
    previous = Path.cwd()
    os.chdir(REPO_ROOT)
    try:
        return resolve_data_root(None)
    except DataError as exc:
        pytest.skip(f"no data root: {exc}")
    finally:
        os.chdir(previous)


@pytest.fixture(scope="session")
def mini_data_root(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding the first :data:`MINI_LINES` lines of every STS, STS-B and SICK file.

    Read-only by convention (session-scoped): copy it before changing a file.
    """
    root = tmp_path_factory.mktemp("mini_data")
    source = data_root / "senteval"
    for folder in ("STS", "SICK"):
        for path in sorted((source / folder).rglob("*")):
            if not path.is_file() or path.suffix not in (".txt", ".csv"):
                continue
            target = root / "senteval" / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            keep = MINI_LINES + (1 if folder == "SICK" else 0)
            with path.open("rb") as src:
                head = b"".join(line for _, line in zip(range(keep), src))
            target.write_bytes(head)
    return root
