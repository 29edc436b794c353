"""Leftovers of killed grids: Ray session folders and the Ray agents that hold them (no ray import).

A locally started Ray keeps its session files in ``<tmp>/harness-ray-<driver pid>-*`` (see
:func:`harness.grid.tune.cluster.ray_session`). A driver killed with SIGKILL cannot remove it, and a
few Ray agents survive it. :func:`remove_stale_temp_dirs` finds the folders whose driver is gone, stops the
processes that still hold files in them (by their process ids) and removes the folders. Only a
folder of the harness's name and content is touched (:mod:`harness.removal`): anything else there is
left, its processes too, with one warning line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.removal import Shape, owned, remove_owned

TEMP_PREFIX = "harness-ray-"
TRIAL_PREFIX = "harness-trial-"
"""A grid trial's own folder on its node: ``<tmp>/harness-trial-<worker pid>-*`` (see harness.grid.tune)."""
RAY_FOLDER = Shape(
    "grid's Ray session folder", rf"{TEMP_PREFIX}\d+-[a-z0-9_]+", folder=True, holds=(r"session_.+",)
)
"""What a local grid's Ray keeps in its folder (``tempfile.mkdtemp``'s name): its sessions only."""
TRIAL_FOLDER = Shape(
    "grid trial's folder",
    rf"{TRIAL_PREFIX}\d+-[a-z0-9_]+",
    folder=True,
    holds=("resume", "checkpoints", "finished", "records"),
)
"""What a trial keeps in its folder (a run store's layout, :class:`harness.grid.tune.trial.TrialStore`)."""


def remove_stale_temp_dirs(root: Path | None = None) -> list[Path]:
    """Remove the Ray session folders of local grids whose driver is gone (killed grids)."""
    root = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed = []
    for path in root.glob(f"{TEMP_PREFIX}*-*"):
        pid_text = path.name[len(TEMP_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)) or not owned(path, [root], RAY_FOLDER):
            continue
        stop_processes(pids_using(path))
        if remove_owned(path, [root], RAY_FOLDER):
            removed.append(path)
    return removed


def remove_stale_trial_dirs(root: Path | None = None) -> list[Path]:
    """Remove the trial folders on this node whose Ray worker is gone (a worker killed mid-run: its
    resume checkpoint is in Ray Tune's storage, this copy is of no use)."""
    root = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed = []
    for path in root.glob(f"{TRIAL_PREFIX}*-*"):
        pid_text = path.name[len(TRIAL_PREFIX) :].split("-", 1)[0]
        if pid_text.isdigit() and not _pid_alive(int(pid_text)) and remove_owned(path, [root], TRIAL_FOLDER):
            removed.append(path)
    return removed


def pids_using(folder: Path) -> list[int]:
    """Processes of this user with a file open under ``folder`` (Linux ``/proc``; else none).

    A SIGKILLed driver leaves a few Ray agents behind, holding their logs in its session folder.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    prefix = str(Path(folder).resolve())
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if any(link.startswith(prefix) for link in links):
            found.append(int(entry.name))
    return sorted(found)


def start_times(pids: Sequence[int]) -> dict[int, int]:
    """Each live process's start time in clock ticks since boot (Linux ``/proc``), by process id: what
    tells a process from a later one that reuses its id."""
    found = {}
    for pid in pids:
        if (start := _start_time(pid)) is not None:
            found[pid] = start
    return found


def stop_processes(
    pids: Sequence[int], grace_s: float = 2.0, started: Mapping[int, int] | None = None
) -> None:
    """SIGTERM the given processes, then SIGKILL those still there after ``grace_s``; return once
    they are gone (or ``grace_s`` more has passed). With ``started`` (from :func:`start_times`), a
    process whose start time differs is a later one that reuses the id, and is left alone."""

    if started is not None:
        pids = [pid for pid in pids if pid not in started or _start_time(pid) == started[pid]]
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if _pid_running(pid)]
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _pid_running(pid)]


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _pid_running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return _pid_alive(pid)
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
