"""One grid per runs folder: the lock file that says which grid holds it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.atomic import WriteError, failed_write
from harness.errors import GridLockedError
from harness.removal import Shape, remove_owned
from harness.store.provenance import now_iso

LOCK_NAME = "grid.lock"
LOCK_SHAPE = Shape("grid lock", re.escape(LOCK_NAME))
_HELD: list[GridLock] = []
"""The locks this process holds (released by :func:`release_held_locks` when the process must end at
once: the Ray head was lost)."""


class GridLock:
    """One grid per runs folder: an exclusive lock file holding the holder's pid, host and start time.

    The lock is an ``flock`` on ``<runs>/grid.lock`` (released by the kernel when the holder dies)
    plus the holder's identity written inside it, for the message. A lock file left by a process
    that is gone (a killed grid on this host) is stale: it is taken over with a message. A lock
    written by another host cannot be checked from here and is refused, naming the holder.
    """

    def __init__(self, path: Path, log: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.log = log or (lambda _line: None)
        self._fd: int | None = None

    @classmethod
    def of(cls, runs_dir: str | os.PathLike[str], log: Callable[[str], None] | None = None) -> GridLock:
        """The grid lock of a runs folder (use as a context manager)."""
        return cls(Path(runs_dir) / LOCK_NAME, log=log)

    def holder(self) -> dict[str, Any] | None:
        """The identity written in the lock file, or None."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "null")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def is_held(self) -> bool:
        """Whether a live grid holds the lock (a lock of another host counts as held); changes nothing."""

        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        holder = self.holder()
        return holder is not None and holder.get("host") != socket.gethostname()

    def describe(self) -> str:
        """Who holds (or last held) the lock, for messages."""
        return self._describe(self.holder())

    def _describe(self, info: dict[str, Any] | None) -> str:
        if not info:
            return f"another grid (lock file {self.path})"
        return (
            f"grid pid {info.get('pid')} on host {info.get('host')} since {info.get('started_at')} "
            f"(lock file {self.path})"
        )

    def acquire(self) -> None:
        """Take the lock, or raise :class:`GridLockedError` naming the holder.

        Raises:
            WriteError: the lock file cannot be made (it is a folder, the runs folder is read-only,
                the disk is full): one line naming it.
        """
        if self.path.is_dir() or (self.path.exists() and not self.path.is_file()):
            raise WriteError(
                f"the grid lock {self.path} is a folder, not a file: remove it (a grid keeps its lock "
                "in a file there)",
                self.path,
                errno.EISDIR,
            )
        try:
            self._acquire()
        except OSError as exc:
            raise failed_write(self.path, exc) from None

    def _acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise GridLockedError(
                    f"runs folder {self.path.parent} is in use by {self._describe(self.holder())}; "
                    "wait for that grid to finish or use another --runs-dir"
                ) from None
            try:
                same_file = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same_file = False
            if not same_file:  # the holder removed the file between our open and flock: retry
                os.close(fd)
                continue
            previous = self.holder()
            if previous:
                if previous.get("host") != socket.gethostname():
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
                    raise GridLockedError(
                        f"runs folder {self.path.parent} is in use by {self._describe(previous)}; that "
                        "host cannot be checked from here: if that grid is no longer running, delete "
                        "the lock file"
                    )
                self.log(
                    f"note: taking over a stale grid lock of pid {previous.get('pid')} (started "
                    f"{previous.get('started_at')}): that process is no longer running"
                )
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": now_iso()}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
                os.fsync(fd)
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
            _HELD.append(self)
            return
        raise GridLockedError(f"could not lock {self.path}: it keeps being replaced")

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(ValueError):
            _HELD.remove(self)
        try:  # the lock file this grid made, unless another process put another in its place
            remove_owned(self.path, [self.path.parent], LOCK_SHAPE, made=os.fstat(fd))
        finally:
            os.close(fd)  # closing releases the flock

    def __enter__(self) -> GridLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def release_held_locks() -> None:
    """Release every grid lock this process holds (a process about to end without unwinding)."""
    for lock in list(_HELD):
        lock.release()
