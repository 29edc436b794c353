"""SIGTERM on the grid driver: an interrupt inside the block, the previous handler back after it,
and Ray's own handler undone; outside the main thread nothing changes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from harness.grid.signals import keep_sigterm_handler, sigterm_as_interrupt


@pytest.fixture(autouse=True)
def _sigterm_restored() -> Iterator[None]:
    """Whatever a test does, the process's SIGTERM handler is the one it had."""
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def test_sigterm_is_an_interrupt_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match=f"signal {int(signal.SIGTERM)}"), sigterm_as_interrupt():
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_previous_handler_comes_back_after_a_normal_exit() -> None:
    seen: list[int] = []

    def mine(signum: int, frame: Any) -> None:
        seen.append(signum)

    signal.signal(signal.SIGTERM, mine)
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not mine
    assert signal.getsignal(signal.SIGTERM) is mine
    signal.raise_signal(signal.SIGTERM)
    assert seen == [signal.SIGTERM]


def test_a_python_handler_survives_a_block_that_replaces_it() -> None:
    """What ``ray.init`` does: it installs a handler of its own; the grid's comes back."""
    with sigterm_as_interrupt():
        grids = signal.getsignal(signal.SIGTERM)
        with keep_sigterm_handler():
            signal.signal(signal.SIGTERM, lambda signum, frame: None)  # Ray's
        assert signal.getsignal(signal.SIGTERM) is grids
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)


def test_the_default_disposition_is_left_to_the_block() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def other(signum: int, frame: Any) -> None:
        pass

    with keep_sigterm_handler():
        signal.signal(signal.SIGTERM, other)
    assert signal.getsignal(signal.SIGTERM) is other


def test_outside_the_main_thread_both_leave_the_handler_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def work() -> None:
        with sigterm_as_interrupt(), keep_sigterm_handler():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [before] and signal.getsignal(signal.SIGTERM) is before
