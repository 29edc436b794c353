"""One grid per runs folder: a second lock is refused naming its holder; a stale one is taken over."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.grid.lock import GridLock
from harness.store.run_store import RunStore


def test_a_second_lock_is_refused_naming_the_holder(tmp_path: Path) -> None:
    import socket

    from harness.errors import GridLockedError

    store = RunStore(tmp_path / "runs")
    with GridLock.of(store.root):
        info = json.loads((store.root / "grid.lock").read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(GridLockedError, match=rf"in use by grid pid {os.getpid()} on host"):
            GridLock.of(store.root).acquire()
    assert not (store.root / "grid.lock").exists()
    with GridLock.of(store.root):  # free again
        pass


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    store = RunStore(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(dead.stdout)
    stale = {"pid": pid, "host": socket.gethostname(), "started_at": "2026-01-01T00:00:00+00:00"}
    (tmp_path / "grid.lock").write_text(json.dumps(stale))
    notes: list[str] = []
    with GridLock.of(store.root, log=notes.append):
        assert json.loads((tmp_path / "grid.lock").read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and f"stale grid lock of pid {pid}" in notes[0]


def test_a_lock_from_another_host_is_refused(tmp_path: Path) -> None:
    from harness.errors import GridLockedError

    other = {"pid": 1, "host": "elsewhere.example", "started_at": "2026-01-01T00:00:00+00:00"}
    (tmp_path / "grid.lock").write_text(json.dumps(other))
    with pytest.raises(GridLockedError, match=r"elsewhere\.example.*delete the lock file"):
        GridLock.of(tmp_path).acquire()


def test_a_lock_file_another_process_put_in_its_place_is_left_with_a_warning(tmp_path: Path) -> None:
    lock = GridLock.of(tmp_path / "runs")
    lock.acquire()
    theirs = tmp_path / "runs" / "theirs"
    theirs.write_text('{"pid": 1}')
    os.replace(theirs, lock.path)  # not the file this grid made and locked
    with pytest.warns(RuntimeWarning, match=f"left {lock.path} alone.*not the grid lock this process made"):
        lock.release()
    assert json.loads(lock.path.read_text()) == {"pid": 1}
