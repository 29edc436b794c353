"""What grids leave behind: the Ray folders of dead drivers, and the processes of a Ray being shut down."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


def test_stale_ray_temp_dirs_are_removed(tmp_path: Path) -> None:
    from harness.grid.cleanup import remove_stale_temp_dirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    stale = tmp_path / f"harness-ray-{int(dead.stdout)}-abc"
    live = tmp_path / f"harness-ray-{os.getpid()}-def"
    for folder in (stale, live):
        (folder / "session_x").mkdir(parents=True)
    assert remove_stale_temp_dirs(tmp_path) == [stale]
    assert not stale.exists() and live.exists()


STRAGGLER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "log = open(sys.argv[1], 'w')\n"
    "signal.signal(signal.SIGUSR1, lambda *_: log.close())\n"
    "print('up', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_process_seen_holding_the_folder_is_stopped_after_it_closed_its_files(tmp_path: Path) -> None:
    # A Ray worker on its way out closes its files before it is gone: the session's processes are
    # taken while they hold their logs, and each is waited for (or killed) afterwards.
    import signal

    from harness.grid.cleanup import pids_using, start_times, stop_processes

    straggler = subprocess.Popen(
        [sys.executable, "-c", STRAGGLER, str(tmp_path / "worker.log")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert straggler.stdout is not None and straggler.stdout.readline().strip() == "up"
        seen = start_times(pids_using(tmp_path))
        assert list(seen) == [straggler.pid]
        straggler.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while pids_using(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pids_using(tmp_path) == []  # its files are closed, it still runs
        assert straggler.poll() is None
        stop_processes(sorted({*seen, *pids_using(tmp_path)}), grace_s=0.5, started=seen)
        assert straggler.poll() == -signal.SIGKILL  # SIGTERM was ignored
    finally:
        straggler.kill()
        straggler.wait()


def test_a_process_id_reused_by_a_later_process_is_left_alone(tmp_path: Path) -> None:
    from harness.grid.cleanup import start_times, stop_processes

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        now = start_times([other.pid])
        assert set(now) == {other.pid}
        stop_processes([other.pid], grace_s=0.2, started={other.pid: now[other.pid] - 1})
        assert other.poll() is None  # not the process that was seen: not signalled
        stop_processes([other.pid], grace_s=2.0, started=now)
        assert other.poll() is not None
    finally:
        other.kill()
        other.wait()
    assert start_times([other.pid]) == {}


def test_a_folder_of_another_shape_under_the_harness_s_names_is_left_with_a_warning(tmp_path: Path) -> None:
    from harness.grid.cleanup import remove_stale_temp_dirs, remove_stale_trial_dirs

    dead = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout
    )
    ray_like = tmp_path / f"harness-ray-{dead}-backup"
    trial_like = tmp_path / f"harness-trial-{dead}-notes"
    named_like = tmp_path / f"harness-ray-{dead}-My Photos"
    for folder in (ray_like, trial_like, named_like):
        folder.mkdir()
        (folder / "thesis.tex").write_text("mine")
    ours = tmp_path / f"harness-trial-{dead}-abc_12"
    (ours / "resume").mkdir(parents=True)
    with pytest.warns(RuntimeWarning) as caught:
        assert remove_stale_temp_dirs(tmp_path) == []
        assert remove_stale_trial_dirs(tmp_path) == [ours]
    said = sorted(str(w.message) for w in caught)
    assert len(said) == 3 and all("it holds thesis.tex" in line or "its name is not" in line for line in said)
    assert all((folder / "thesis.tex").read_text() == "mine" for folder in (ray_like, trial_like, named_like))
    assert not ours.exists()
