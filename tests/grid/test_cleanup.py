"""What dead grids leave behind: Ray's temporary folders of processes that are gone are removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_stale_ray_temp_dirs_are_removed(tmp_path: Path) -> None:
    from harness.grid.cleanup import remove_stale_temp_dirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    stale = tmp_path / f"harness-ray-{int(dead.stdout)}-abc"
    live = tmp_path / f"harness-ray-{os.getpid()}-def"
    for folder in (stale, live):
        (folder / "session_x").mkdir(parents=True)
    assert remove_stale_temp_dirs(tmp_path) == [stale]
    assert not stale.exists() and live.exists()
