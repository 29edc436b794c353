"""Every removal the harness does goes through here: it deletes only what it made.

A path is removed only when it lies inside one of the folders the caller names (the runs folder,
Tune's storage, the harness's own temporary folders) and has the shape the harness writes there
(:class:`Shape`: its name, file or folder, what a folder holds, the bytes a file carries). Anything
else is left alone with one warning line naming it (a :class:`RuntimeWarning`, which the command
line prints as ``warning: ...``): a runs folder copied from elsewhere or edited by hand never costs a
user a folder of their own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MARK_BYTES = 1 << 16
"""How much of a file's start and end :attr:`Shape.mark` is looked for in."""


@dataclass(frozen=True)
class Shape:
    """What the harness writes at a path it may remove.

    Attributes:
        what: what it is, for the warning (``resume checkpoint``, ``grid lock``, ...).
        name: a regular expression the whole name matches.
        folder: a folder (removed with what it holds) rather than a file.
        holds: for a folder, regular expressions one of which every entry's whole name matches
            (empty: anything).
        needs: for a folder, the names it must hold.
        empty: for a folder, removed only while it is empty (a folder holding anything is kept
            without a warning: others still use it).
        mark: for a file, bytes its first or last :data:`MARK_BYTES` must contain.
    """

    what: str
    name: str
    folder: bool = False
    holds: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    empty: bool = False
    mark: bytes | None = None

    def problem(self, name: str, kind: str, entries: Sequence[str] = (), head: bytes = b"") -> str | None:
        """Why ``name`` (of ``kind`` ``file``, ``folder`` or another word; a folder with ``entries``,
        a file whose start and end are ``head``) is not this shape, or None."""
        if not re.fullmatch(self.name, name):
            return f"its name is not that of a {self.what}"
        want = "folder" if self.folder else "file"
        if kind != want:
            said = f"a {kind}" if kind in ("file", "folder") else kind
            return f"it is {said}, not the {want} of a {self.what}"
        if self.folder:
            missing = [n for n in self.needs if n not in entries]
            if missing:
                return f"it lacks {missing[0]}, which a {self.what} holds"
            foreign = [e for e in entries if self.holds and not any(re.fullmatch(h, e) for h in self.holds)]
            if foreign:
                return f"it holds {sorted(foreign)[0]}, which a {self.what} does not"
        elif self.mark is not None and self.mark not in head:
            return f"its content is not that of a {self.what}"
        return None


def inside(path: str, roots: Sequence[str], sep: str = "/") -> bool:
    """Whether ``path`` lies strictly inside one of ``roots`` (paths as text, already resolved)."""
    return any(path.startswith(root.rstrip(sep) + sep) and path != root for root in roots if root)


def left_alone(path: str | os.PathLike[str], why: str) -> None:
    """The one warning line of a path the harness does not remove."""
    warnings.warn(f"left {path} alone (not removed): {why}", RuntimeWarning, stacklevel=2)


def owned(
    path: str | os.PathLike[str],
    within: Sequence[str | os.PathLike[str]],
    shape: Shape,
    *,
    made: os.stat_result | None = None,
) -> bool:
    """Whether ``path`` may be removed (:func:`why_not`). A path that may not is named in one warning
    line; a missing path, or a folder that must be empty and is not, is not, without a word."""
    why = why_not(path, within, shape, made=made)
    if why:
        left_alone(path, why)
    return why is None


def why_not(
    path: str | os.PathLike[str],
    within: Sequence[str | os.PathLike[str]],
    shape: Shape,
    *,
    made: os.stat_result | None = None,
) -> str | None:
    """Why ``path`` may not be removed, or None when it may: it lies inside one of ``within`` and has
    ``shape`` (and, with ``made``, is still that very file: same device and inode). A missing path, or
    a folder that must be empty and is not, gives ``""`` (nothing to remove, nothing to say)."""
    target = Path(path)
    try:
        info = target.lstat()
    except OSError:
        return ""
    # the folder it lies in resolved, its own name not: a link is judged as a link, never followed
    where = os.path.join(os.path.realpath(target.parent), target.name)
    roots = [os.path.realpath(r) for r in within if str(r)]  # never "": that is the working folder
    if not inside(where, roots, os.sep):
        return f"it is not inside {' or '.join(map(str, within))}"
    kind = _kind(info)
    entries: list[str] = []
    head = b""
    if kind == "folder":
        with contextlib.suppress(OSError):
            entries = sorted(os.listdir(target))
        if shape.empty and entries:
            return ""
    elif kind == "file" and shape.mark is not None:
        head = _ends(target, info.st_size)
    why = shape.problem(target.name, kind, entries, head)
    if why is None and made is not None and (info.st_dev, info.st_ino) != (made.st_dev, made.st_ino):
        why = f"it is not the {shape.what} this process made (another process replaced it)"
    return why


def remove_owned(
    path: str | os.PathLike[str],
    within: Sequence[str | os.PathLike[str]],
    shape: Shape,
    *,
    made: os.stat_result | None = None,
) -> bool:
    """Remove ``path`` (a file, or a folder with what it holds) when :func:`owned` says it may be;
    else leave it (named in one warning line). Returns whether it was removed (a failed removal is
    ignored: it is cleaning up)."""
    if not owned(path, within, shape, made=made):
        return False
    target = Path(path)
    with contextlib.suppress(OSError):
        if not target.is_dir():
            target.unlink()
        elif shape.empty:
            target.rmdir()
        else:  # as much as can go (a file still held open elsewhere), as before
            shutil.rmtree(target, ignore_errors=True)
    return not target.exists()


def _kind(info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "a link"
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    if stat.S_ISREG(info.st_mode):
        return "file"
    return "neither a file nor a folder"


def _ends(path: Path, size: int) -> bytes:
    """A file's first and last :data:`MARK_BYTES` (where a mark such as a PDF's producer sits)."""
    try:
        with path.open("rb") as handle:
            start = handle.read(MARK_BYTES)
            if size > 2 * MARK_BYTES:
                handle.seek(size - MARK_BYTES)
            return start + handle.read(MARK_BYTES)
    except OSError:
        return b""


__all__ = ["MARK_BYTES", "Shape", "inside", "left_alone", "owned", "remove_owned", "why_not"]
