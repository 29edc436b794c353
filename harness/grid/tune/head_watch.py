"""The Ray head's health, seen by the driver: a head that is gone or does not answer ends the grid in
bounded time.

Ray's driver code blocks in calls to the head's GCS: a killed head ends the process from C++ after a
minute (``Failed to connect to GCS ...``), a stopped (SIGSTOP) or wedged head, which still accepts
TCP connections, blocks it for minutes, and Ctrl-C's Python handler never runs meanwhile. Either way
the records it left ``running`` and the grid lock would stay. :class:`HeadWatch` asks the head a
question from a thread of its own (:func:`gcs_question`: Ray's ``CheckAlive`` RPC with a deadline,
which a stopped head cannot answer) and, once the head has not answered for the grid's
``--lost-node-wait`` (a head whose port refuses connections: :data:`HEAD_GONE_S` at most, before
Ray's own minute), calls the grid's ``on_lost`` there; while it waits it says so every
:data:`~harness.grid.capacity.WAIT_LINE_S`, and a SIGINT or SIGTERM that arrives (seen through
:func:`signal.set_wakeup_fd`, which works while the main thread is blocked) calls ``on_signal``.
Both mark the runs ``interrupted``, release the lock and end the process.
"""

from __future__ import annotations

import contextlib
import enum
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from harness.grid.capacity import DEFAULT_LOST_NODE_WAIT_S, WAIT_LINE_S

HEAD_GONE_S = 20.0
"""Seconds after which a head whose GCS port refuses connections counts as lost (Ray itself ends the
driver after 60 s, so this must be well below that)."""
ASK_EVERY_S = 2.0
"""Seconds between two questions to the head."""
ANSWER_S = 5.0
"""The deadline of one question: a live head answers in milliseconds."""


class Answer(enum.Enum):
    """What one question to the head got."""

    YES = "answers"
    SILENT = "accepts connections but does not answer"
    GONE = "refuses connections"


def accepts(address: str, timeout_s: float = 2.0) -> bool:
    """Whether ``HOST:PORT`` accepts a TCP connection within ``timeout_s`` (a stopped process's
    listening socket still does: the kernel accepts for it)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def gcs_question(
    address: str, cluster_id: str | None = None, timeout_s: float = ANSWER_S
) -> Callable[[], Answer]:
    """A question to the GCS at ``address``: Ray's ``CheckAlive`` RPC with a deadline of ``timeout_s``
    (it releases the GIL while it waits). The client is made at the first question and kept; an
    authentication error is an answer too (the head is there; ``ray.init`` says what is wrong)."""
    from ray._raylet import InnerGcsClient  # type: ignore[attr-defined]  # not in Ray's stubs
    from ray.exceptions import AuthenticationError

    client: list[Any] = []

    def ask() -> Answer:
        try:
            if not client:
                client.append(InnerGcsClient.standalone(address, cluster_id, int(timeout_s * 1000)))
            client[0].check_alive([], timeout_s)
            return Answer.YES
        except AuthenticationError:
            return Answer.YES
        except Exception:  # a deadline passed, or no connection: which one, the port says
            return Answer.SILENT if accepts(address, timeout_s=min(timeout_s, 2.0)) else Answer.GONE

    return ask


class HeadWatch(threading.Thread):
    """Asks the head (``ask``) every ``every_s`` seconds; once it has not answered for ``wait_s``
    seconds (``gone_after_s`` at most while its port refuses connections) calls ``on_lost(reason)``
    in this thread and stops. While the head does not answer: a line through ``say`` at once and
    every :data:`WAIT_LINE_S`, and a signal number read from ``signals`` (the read end of the
    process's wakeup fd) calls ``on_signal(signum)``; a signal read while the head answers is the
    main thread's to handle, and counts only if the head stops answering before the process ends."""

    def __init__(
        self,
        address: str,
        ask: Callable[[], Answer],
        on_lost: Callable[[str], None],
        *,
        wait_s: float = DEFAULT_LOST_NODE_WAIT_S,
        say: Callable[[str], None] = lambda _line: None,
        on_signal: Callable[[int], None] | None = None,
        signals: socket.socket | None = None,
        gone_after_s: float = HEAD_GONE_S,
        every_s: float = ASK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="harness-head-watch", daemon=True)
        self.address = address
        self.ask = ask
        self.on_lost = on_lost
        self.wait_s = wait_s
        self.say = say
        self.on_signal = on_signal
        self.signals = signals
        self.gone_after_s = gone_after_s
        self.every_s = every_s
        self.clock = clock
        self.done = threading.Event()
        self.signalled: int | None = None

    def stop(self) -> None:
        self.done.set()

    def _pause(self) -> None:
        """Wait ``every_s`` seconds (less when a signal arrives or the watch is stopped)."""
        if self.signals is None:
            self.done.wait(self.every_s)
            return
        ready, _, _ = select.select([self.signals], [], [], self.every_s)
        if ready:
            with contextlib.suppress(OSError):
                for signum in self.signals.recv(64):
                    if signum in (signal.SIGINT, signal.SIGTERM):
                        self.signalled = signum

    def run(self) -> None:
        silent_since: float | None = None
        said = 0.0
        while not self.done.is_set():
            self._pause()
            if self.done.is_set():
                return
            if silent_since is not None and self.signalled is not None and self.on_signal is not None:
                self.on_signal(self.signalled)  # the head said nothing last time: no need to ask again
                return
            answer = self.ask()
            if self.done.is_set():
                return
            now = self.clock()
            if answer is Answer.YES:
                if silent_since is not None:
                    self.say(f"the Ray head at {self.address} answers again: the grid goes on")
                silent_since = None
                continue
            limit = min(self.wait_s, self.gone_after_s) if answer is Answer.GONE else self.wait_s
            if silent_since is None:
                silent_since, said = now, now
                self.say(
                    f"the Ray head at {self.address} {answer.value}: waiting up to {limit:.0f} s "
                    "(--lost-node-wait) for it to answer again; Ctrl-C stops the grid"
                )
            if self.signalled is not None and self.on_signal is not None:
                self.on_signal(self.signalled)
                return
            silent_s = now - silent_since
            if silent_s >= limit:
                self.on_lost(self._reason(answer, silent_s))
                return
            if now - said >= WAIT_LINE_S:
                said = now
                self.say(
                    f"waiting for the Ray head at {self.address} to answer, {silent_s:.0f} s of {limit:.0f} s"
                )

    def _reason(self, answer: Answer, silent_s: float) -> str:
        if answer is Answer.GONE:
            return (
                f"the Ray head at {self.address} stopped answering ({silent_s:.0f} s): the head node "
                "stopped or was lost"
            )
        return (
            f"the Ray head at {self.address} has not answered for {silent_s:.0f} s (--lost-node-wait "
            f"{self.wait_s:.0f} s; it accepts connections): the head node is stopped, hung or overloaded"
        )


@contextlib.contextmanager
def signal_pipe() -> Iterator[tuple[socket.socket, socket.socket] | None]:
    """A socket pair whose write end is the process's wakeup fd (:func:`signal.set_wakeup_fd`: the C
    handler writes the number of every signal the process catches to it, even while the main thread
    is blocked in a call); None outside the main thread. The previous wakeup fd comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield reader, writer
    finally:
        signal.set_wakeup_fd(previous)


@contextlib.contextmanager
def watching_head(
    address: str | None,
    on_lost: Callable[[str], None],
    *,
    ask: Callable[[], Answer] | None = None,
    wait_s: float = DEFAULT_LOST_NODE_WAIT_S,
    say: Callable[[str], None] = lambda _line: None,
    on_signal: Callable[[int], None] | None = None,
) -> Iterator[HeadWatch | None]:
    """A :class:`HeadWatch` on ``address`` (none when it is None) for the duration of the block;
    ``ask`` defaults to :func:`gcs_question`."""
    if not address:
        yield None
        return
    pair: tuple[socket.socket, socket.socket] | None = None
    watch: HeadWatch | None = None
    try:
        with signal_pipe() as pair:
            watch = HeadWatch(
                address,
                ask or gcs_question(address),
                on_lost,
                wait_s=wait_s,
                say=say,
                on_signal=on_signal,
                signals=pair[0] if pair else None,
            )
            watch.start()
            try:
                yield watch
            finally:
                watch.stop()
    finally:
        if pair is not None:  # the wakeup fd is the previous one again: wake the watch, then close
            with contextlib.suppress(OSError):
                pair[1].send(b"\0")
            if watch is not None:
                watch.join(timeout=1.0)
            if watch is None or not watch.is_alive():
                pair[0].close()
                pair[1].close()
