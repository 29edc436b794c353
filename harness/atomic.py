"""Every file the harness writes goes through here: a temporary file (or folder) beside the target,
then :func:`os.replace` (or a rename); on any failure the temporary one is removed and the target is
left as it was.

Readers (a table reporter, another Ray trial, a resumed run) therefore see either the old file or the
whole new one, never half of it, and a full disk never costs a user the file that was there before.
A target that is a symlink is written through: the file (or folder) it points to is replaced and
the link stays, as the user asked by giving the link.
Used by the run store, the training checkpoint, the dev cache, ``harness eval --output``, the
tables, claims, plots and report, and ``harness export`` (a whole folder, :func:`atomic_folder`).

A write that fails for a reason of the machine (a full disk, a read-only folder, a path under a
file) raises :class:`WriteError`: a :class:`~harness.errors.HarnessError` (one line on the command
line) that is still an :class:`OSError` (callers that tolerate a failed write keep doing so).
:func:`check_output_dir` and :func:`check_output_file` prove a path writable before work starts.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from harness.errors import HarnessError
from harness.removal import Shape, why_not

FULL_DISK_BYTES = 1 << 20
"""Below this much free space on its disk an output folder counts as full before any work starts."""

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: the process's umask, for the permissions of new files

_CAUSES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
}


class WriteError(HarnessError, OSError):
    """A file or folder that could not be written: one line naming the path and the cause.

    A :class:`~harness.errors.HarnessError` (the command line prints it as one line) that is still an
    :class:`OSError` (callers that tolerate a failed write, such as the dev cache, keep doing so).

    Args:
        message: the whole line.
        path: what could not be written.
        code: the ``errno`` behind it.
    """

    def __init__(self, message: str, path: str | os.PathLike[str], code: int = errno.EIO) -> None:
        super().__init__(code, message, str(path))
        self.message = message
        self.path = Path(path)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:  # pickled by Ray from a trial to the driver
        return (type(self), (self.message, str(self.path), self.errno))


def cause_of(exc: OSError) -> str:
    """An OSError's cause in words (``no space left on the device``, ``read-only file system``, ...)."""
    return _CAUSES.get(exc.errno or 0) or exc.strerror or str(exc)


def failed_write(path: str | os.PathLike[str], exc: OSError) -> WriteError:
    """``cannot write <path>: <cause>`` (plus ``; <path> is unchanged`` when it exists)."""
    target = Path(path)
    kept = f"; {target} is unchanged" if target.exists() else ""
    return WriteError(f"cannot write {target}: {cause_of(exc)}{kept}", target, exc.errno or errno.EIO)


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)
"""Errors that only a write gives (a block that also reads can fail with others that are no write's)."""


def _os_error_behind(exc: BaseException) -> OSError | None:
    """The :class:`OSError` ``exc`` is, or (a RuntimeError: torch's checkpoint writer reports a failed
    write as one, raised while handling the OSError) the one in its cause/context chain."""
    if isinstance(exc, OSError):
        return exc
    if not isinstance(exc, RuntimeError):
        return None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _as_write_error(path: Path, exc: BaseException, only: tuple[int, ...] | None = None) -> WriteError | None:
    """``exc`` as a :class:`WriteError` on ``path`` when a write failed for a reason of the machine
    (with ``only``: when its errno is one of those)."""
    if isinstance(exc, WriteError):
        return exc
    cause = _os_error_behind(exc)
    if cause is None and isinstance(exc, RuntimeError) and "enforce fail at inline_container" in str(exc):
        # torch.save to a path (not a handle) hides the OSError: a full disk is the usual reason
        full = free_bytes(path.parent) == 0
        cause = OSError(errno.ENOSPC if full else errno.EIO, " ".join(str(exc).split()))
    if cause is None or (only is not None and cause.errno not in only):
        return None
    return failed_write(path, cause)


_writing = 0
"""How many writes of this process's main thread are under way (nested: a write inside a write)."""
_held: BaseException | None = None
"""An interrupt that came during a write, raised once the write is whole."""


def raise_or_hold(exc: BaseException) -> None:
    """For a signal handler (:mod:`harness.grid.signals`): raise ``exc`` now, or, while the main thread
    writes a file, once that write is whole: an interrupt never tears a write (torch's checkpoint
    writer would turn it into an error that reads like a failed disk)."""
    global _held
    if _writing and threading.current_thread() is threading.main_thread():
        _held = _held or exc
        return
    raise exc


@contextlib.contextmanager
def _whole() -> Iterator[None]:
    """The block runs with interrupts held (:func:`raise_or_hold`); a held one is raised at its end."""
    global _writing, _held
    main = threading.current_thread() is threading.main_thread()
    if main:
        _writing += 1
    try:
        yield
    finally:
        if main:
            _writing -= 1
            if not _writing and _held is not None:
                held, _held = _held, None
                raise held


@contextlib.contextmanager
def atomic_write(
    target: str | os.PathLike[str], mode: Literal["w", "wb"] = "w", *, prefix: str | None = None
) -> Iterator[IO[Any]]:
    """Write ``target`` through the handle this yields; it replaces ``target`` when the block ends.

    Args:
        target: the file to write (its folder is created).
        mode: ``"w"`` (UTF-8 text) or ``"wb"`` (bytes, e.g. for :func:`torch.save`).
        prefix: the temporary file's name prefix (default ``.<target stem>.``); it ends in ``.tmp``.

    Raises:
        WriteError: the folder or the file could not be written (full disk, read-only, a path under
            a file, ...; also torch's checkpoint writer failing on a full disk): ``target`` is as it was.

    Any other exception inside the block removes the temporary file and propagates. An interrupt
    (Ctrl-C, SIGTERM through :mod:`harness.grid.signals`) waits until the file is whole.
    """
    with _whole(), _atomic_write(Path(target), mode, prefix) as handle:
        yield handle


def _through_link(path: Path) -> Path:
    """Where a write to ``path`` goes: a symlink's target (followed to its end), as a shell's ``>``
    writes, so that the rename at the end replaces the file the user named, not the link itself."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def _atomic_write(path: Path, mode: Literal["w", "wb"], prefix: str | None) -> Iterator[IO[Any]]:
    path = _through_link(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.stem}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _mode_for(path, 0o666))
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        failure = _as_write_error(path, exc)
        if failure is not None and failure is not exc:
            raise failure from exc
        raise


def write_text(target: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically; return the path."""
    with atomic_write(target) as handle:
        handle.write(text)
    return Path(target)


def write_json(target: str | os.PathLike[str], data: Any, **dumps: Any) -> Path:
    """Write ``json.dumps(data, **dumps)`` and a newline to ``target`` atomically; return the path.

    The text is made before the file is opened, so data JSON cannot encode leaves the target alone.
    Non-finite numbers are written as null (:func:`strict_json`): the file is always strict JSON.
    """
    return write_text(target, json.dumps(strict_json(data), allow_nan=False, **dumps) + "\n")


def strict_json(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None, so that it is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return strict_json(value.item())
        except (TypeError, ValueError):
            return value
    return value


def save_figure(fig: Any, target: str | os.PathLike[str], **savefig: Any) -> Path:
    """``fig.savefig`` into ``target`` atomically (the format is the suffix: png, pdf, ...)."""
    path = Path(target)
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format=path.suffix.lstrip(".") or None, **savefig)
    return path


@contextlib.contextmanager
def atomic_folder(target: str | os.PathLike[str], *, replace: Shape | None = None) -> Iterator[Path]:
    """Build a folder under a temporary sibling name (yielded) and rename it to ``target`` at the end.

    ``target`` must not exist or be an empty folder, unless ``replace``: then an existing folder in
    that shape (what the harness writes there, :mod:`harness.removal`) is replaced (moved aside, the
    new one renamed in, the old one removed); a folder of another shape is left as it is and a
    :class:`WriteError` names it before any work. On any failure the temporary folder is removed and
    ``target`` is as it was; failures of the machine raise :class:`WriteError`. An interrupt waits
    until the folder is in place (:func:`raise_or_hold`).
    """
    with _whole(), _atomic_folder(Path(target), replace) as building:
        yield building


@contextlib.contextmanager
def _atomic_folder(path: Path, replace: Shape | None) -> Iterator[Path]:
    path = _through_link(path)
    tmp: Path | None = None
    building = False
    if replace is not None:
        _check_replaced(path, replace)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        tmp.chmod(_mode_for(path, 0o777))
        building = True
        yield tmp
        building = False
        if replace is not None and path.is_dir() and any(path.iterdir()):
            _check_replaced(path, replace)
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old)  # onto the empty folder just made
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)  # replaces an empty folder
        tmp = None
    except BaseException as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        # inside the block only a full or read-only disk is a failed write (it also reads files)
        failure = _as_write_error(path, exc, _DISK_FULL if building else None)
        if failure is not None and failure is not exc:
            raise failure from exc
        raise


def _check_replaced(path: Path, shape: Shape) -> None:
    """Raise :class:`WriteError` when ``path`` holds something that is not a ``shape`` (the user's)."""
    if not (path.is_dir() and not path.is_symlink() and not any(path.iterdir())):
        why = why_not(path, [path.parent], shape)
        if why:
            raise WriteError(
                f"{path} is not a {shape.what} the harness wrote ({why}): it is left as it is; move it "
                "away or choose another folder",
                path,
                errno.EEXIST,
            )


def _mode_for(path: Path, default: int) -> int:
    """The permissions a new ``path`` gets: those of the file it replaces, else ``default`` less the
    umask (as :func:`open` would give; a temporary file is created private)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return default & ~_UMASK


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Bytes an ordinary user may still write on the disk holding ``folder`` (its nearest existing
    parent), or None when that cannot be asked."""
    here = Path(folder).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        stat = os.statvfs(here)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def check_output_dir(folder: str | os.PathLike[str], what: str, *, need_bytes: int = FULL_DISK_BYTES) -> Path:
    """Create ``folder`` if needed and prove a file can be written in it, before any work is done.

    Raises:
        WriteError: naming ``what`` and the folder when it is a file, lies under a file, cannot be
            created or written, or its disk has less than ``need_bytes`` free.
    """
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise WriteError(f"{what} {path} is a file, not a folder", path, errno.ENOTDIR)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, test_file = tempfile.mkstemp(prefix=".write-test-", dir=path)
        os.close(fd)
        os.unlink(test_file)
    except OSError as exc:
        raise WriteError(f"{what} {path} cannot be written: {cause_of(exc)}", path, exc.errno or 0) from None
    free = free_bytes(path)
    if free is not None and free < need_bytes:
        raise WriteError(
            f"{what} {path} cannot be written: the disk is full ({_size(free)} free, {_size(need_bytes)} "
            "needed)",
            path,
            errno.ENOSPC,
        )
    return path


def check_output_file(
    target: str | os.PathLike[str], what: str, *, need_bytes: int = FULL_DISK_BYTES
) -> Path:
    """Prove ``target`` can be written (its folder is created; an existing file is left as it is). A
    symlink is judged by its target, where :func:`atomic_write` writes.

    Raises:
        WriteError: ``target`` is a folder or a read-only file, or its folder fails
            :func:`check_output_dir`.
    """
    path = _through_link(Path(target))
    if path.is_dir():
        raise WriteError(f"{what} {path} is a folder, not a file", path, errno.EISDIR)
    check_output_dir(path.parent, f"the folder of {what}", need_bytes=need_bytes)
    if path.exists() and not os.access(path, os.W_OK):
        raise WriteError(f"{what} {path} cannot be written: permission denied", path, errno.EACCES)
    return path


def _size(n: int) -> str:
    """``512 bytes``, ``3.0 KiB``, ``1.5 MiB``, ``2.0 GiB``."""
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


__all__ = [
    "FULL_DISK_BYTES",
    "WriteError",
    "atomic_folder",
    "atomic_write",
    "cause_of",
    "check_output_dir",
    "check_output_file",
    "failed_write",
    "free_bytes",
    "save_figure",
    "strict_json",
    "write_json",
    "write_text",
]
