"""One local Ray session for the Ray Tune tests of this folder (Ray's start-up is paid once)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.grid.tune import cluster


@pytest.fixture(scope="package")
def ray_up() -> Iterator[float]:
    """A smoke Ray session, started by the first test that asks for it and stopped after the last
    test of tests/grid/tune; its start-up time in seconds."""
    with cluster.ray_session(smoke=True) as start_s:
        yield start_s
