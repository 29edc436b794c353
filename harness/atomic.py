"""One atomic file write: a temporary file beside the target, flushed and fsynced, then
:func:`os.replace`; on any failure the temporary file is removed and the target is left as it was.

Readers (a table reporter, another Ray trial, a resumed run) therefore see either the old file or the
whole new one, never half of it. Used by the run store, the training checkpoint and the probe cache.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal


@contextlib.contextmanager
def atomic_write(
    target: str | os.PathLike[str], mode: Literal["w", "wb"] = "w", *, prefix: str | None = None
) -> Iterator[IO[Any]]:
    """Write ``target`` through the handle this yields; it replaces ``target`` when the block ends.

    Args:
        target: the file to write (its folder is created).
        mode: ``"w"`` (UTF-8 text) or ``"wb"`` (bytes, e.g. for :func:`torch.save`).
        prefix: the temporary file's name prefix (default ``.<target stem>.``); it ends in ``.tmp``.

    An exception inside the block (or while writing) removes the temporary file and propagates.
    """
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["atomic_write"]
