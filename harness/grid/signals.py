"""SIGTERM on the grid driver: ``kill PID`` stops a grid as Ctrl-C does, and Ray does not undo that.

:func:`sigterm_as_interrupt` (``harness grid``) turns SIGTERM into :class:`KeyboardInterrupt` while
the trials run, so the runs left are marked ``interrupted`` and the grid exits with status 130;
:func:`keep_sigterm_handler` (around ``ray.init``, which installs its own handler that exits)
puts the caller's handler back. Signal handlers belong to the main thread: elsewhere both do nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`KeyboardInterrupt`; the previous handler comes back after."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def keep_sigterm_handler() -> Iterator[None]:
    """After the block, the SIGTERM handler the block found is back if it was a Python function (the
    grid's, from :func:`sigterm_as_interrupt`); the default and ignore dispositions are left to the block."""
    handler = signal.getsignal(signal.SIGTERM) if _in_main_thread() else None
    try:
        yield
    finally:
        if callable(handler):
            signal.signal(signal.SIGTERM, handler)


__all__ = ["keep_sigterm_handler", "sigterm_as_interrupt"]
