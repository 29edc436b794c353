"""Fixtures of the system tests (the shared ones are in ``tests/conftest.py``)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

HANG_LIMIT_S = 120
"""How long a test that uses :func:`no_hang` may take before it fails as hung."""


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A test that waits on a FIFO or a device (a command, reading records) fails instead of hanging."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the test hung (over {HANG_LIMIT_S} s)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(HANG_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
