"""SIGTERM on the grid driver and every command: ``kill PID`` stops them as Ctrl-C does, and Ray does
not undo that.

:func:`sigterm_as_interrupt` (the command line, around every command; ``harness grid`` again around
its trials) turns SIGTERM into :class:`KeyboardInterrupt`, so a grid marks the runs left
``interrupted`` and exits with status 130, ``harness train`` marks its record so; neither signal
tears a file being written (:func:`harness.atomic.raise_or_hold`). :func:`keep_sigterm_handler`
(around ``ray.init``, which installs its own handler that exits) puts the caller's handler back.
Signal handlers belong to the main thread: elsewhere both do nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from harness.atomic import raise_or_hold


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, frame: Any) -> None:
    """Raise :class:`KeyboardInterrupt`, once the file being written (if any) is whole."""
    raise_or_hold(KeyboardInterrupt(f"signal {signum}"))


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`KeyboardInterrupt`, as SIGINT (Ctrl-C) does; neither
    tears a file being written (:func:`harness.atomic.raise_or_hold`). The previous handlers come
    back after."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    before = signal.getsignal(signal.SIGINT)
    if before is signal.default_int_handler:  # Ctrl-C as before, but a write finishes first
        signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if before is signal.default_int_handler:
            signal.signal(signal.SIGINT, before)


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
