"""The Ray head's death, seen by the driver before Ray ends the driver's process for it.

When the head node (its GCS) is gone, Ray's own driver code retries for a minute, then ends the
process from C++ (``Failed to connect to GCS ...``): no Python code runs, so the records it left
``running`` and the grid lock would stay. :class:`HeadWatch` probes the head's GCS port from a thread
of its own; once it has not answered for :data:`HEAD_LOST_S` the grid's ``on_lost`` runs there: it
marks the runs ``interrupted``, releases the lock, says so in one line and ends the process.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

HEAD_LOST_S = 20.0
"""Seconds without an answer from the head's GCS port after which the head counts as lost (Ray itself
gives up after 60 s, so this must be well below that)."""
PROBE_EVERY_S = 2.0
"""Seconds between two probes of the head."""


def answers(address: str, timeout_s: float = 2.0) -> bool:
    """Whether ``HOST:PORT`` accepts a TCP connection within ``timeout_s``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


class HeadWatch(threading.Thread):
    """Probes ``address`` every ``every_s`` seconds; calls ``on_lost(seconds)`` (in this thread) once
    it has not answered for ``lost_after_s`` seconds, then stops."""

    def __init__(
        self,
        address: str,
        on_lost: Callable[[float], None],
        lost_after_s: float = HEAD_LOST_S,
        every_s: float = PROBE_EVERY_S,
    ) -> None:
        super().__init__(name="harness-head-watch", daemon=True)
        self.address = address
        self.on_lost = on_lost
        self.lost_after_s = lost_after_s
        self.every_s = every_s
        self.done = threading.Event()

    def run(self) -> None:
        silent_since: float | None = None
        while not self.done.wait(self.every_s):
            if answers(self.address, timeout_s=min(self.every_s, 2.0)):
                silent_since = None
                continue
            now = time.monotonic()
            silent_since = now if silent_since is None else silent_since
            if now - silent_since >= self.lost_after_s and not self.done.is_set():
                self.on_lost(now - silent_since)
                return


@contextlib.contextmanager
def watching_head(
    address: str | None, on_lost: Callable[[float], None], lost_after_s: float = HEAD_LOST_S
) -> Iterator[HeadWatch | None]:
    """A :class:`HeadWatch` on ``address`` (none when it is None) for the duration of the block."""
    if not address:
        yield None
        return
    watch = HeadWatch(address, on_lost, lost_after_s)
    watch.start()
    try:
        yield watch
    finally:
        watch.done.set()
