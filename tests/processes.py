"""Processes the tests start or wait for: a session's live processes, a free port, a condition polled
until it holds, and a process that holds a grid lock."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.helpers import REPO_ROOT


def session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid`` (what a driver or a Ray head started and left behind)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a Ray head)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    """Poll ``predicate`` (an OSError: not yet) until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if predicate():
                return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def holding_grid_lock(runs: Path) -> Iterator[subprocess.Popen[str]]:
    """A process holding the grid lock of ``runs`` while inside; killed after, which leaves it stale."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from harness.grid.lock import GridLock; "
            f"GridLock.of({str(runs)!r}).acquire(); print('locked', flush=True); time.sleep(120)",
        ],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()
