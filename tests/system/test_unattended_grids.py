"""Unattended grids: one grid per runs folder, Ctrl-C, a SIGKILLed driver, dead workers, Ray leftovers.

The driver tests run ``python -m harness.cli grid --smoke`` in a subprocess (its own session, so
the test can signal it like a terminal would and stop whatever Ray left by process id) on a small
data root: the first 60 lines of every STS file and a 64-sentence corpus. A smoke grid of two runs
takes about half a minute on two loaded cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.store.run_store import RunStore
from tests.helpers import REPO_ROOT, SMOKE_SPEC
from tests.processes import holding_grid_lock, session_pids, wait_for


def start_grid(runs: Path, data: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    cmd = [sys.executable, "-m", "harness.cli", "grid", str(SMOKE_SPEC), "--smoke"]
    cmd += ["--runs-dir", str(runs), "--data-dir", str(data), *extra]
    return subprocess.Popen(
        cmd,
        cwd=runs.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run_to_the_end(runs: Path, data: Path) -> tuple[int, str, str]:
    """:func:`start_grid` run to its end (5 min at most), its session stopped: exit status, stdout, stderr."""
    grid = start_grid(runs, data)
    try:
        out, err = grid.communicate(timeout=300)
    finally:
        grid.kill()
        stop_session(grid.pid)
    return grid.returncode, out, err


def stop_session(sid: int, settle_s: float = 0.0) -> list[str]:
    """SIGKILL what is left of session ``sid`` by process id; return those ids with their command
    lines and parents (what the assertion message shows).

    With ``settle_s``, processes still exiting get that long first: a process the driver waited for
    can still be in the kernel's exit path (no command line, parent 1) when the driver returns on a
    loaded machine; one that Ray leaked is still there after it.
    """
    deadline = time.monotonic() + settle_s
    while session_pids(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_pids(sid)
    described = []
    for pid in left:
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1]
            described.append(f"{pid} (parent {parent}): {cmd[:200]}")
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return described


def freeze_session(sid: int) -> None:
    """SIGSTOP what is left of session ``sid`` (a SIGKILL still ends a stopped process)."""
    for pid in session_pids(sid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGSTOP)


def statuses(runs: Path) -> dict[str, str]:
    return {r["run_id"]: r["status"] for r in RunStore(runs).records()}


def test_a_second_grid_is_refused_while_the_first_holds_the_lock(
    linked_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    runs = tmp_path / "runs"
    with holding_grid_lock(runs) as holder:
        code = main(
            ["grid", str(SMOKE_SPEC), "--smoke", "--runs-dir", str(runs), "--data-dir", str(linked_root)]
        )
        err = capsys.readouterr().err
        assert code == 2
        assert f"is in use by grid pid {holder.pid} on host" in err and "grid.lock" in err
        assert len(err.strip().splitlines()) == 1
        assert not (runs / "records").exists()  # nothing was started
    # the holder died without releasing: its lock is stale and the next grid takes it over
    info = json.loads((runs / "grid.lock").read_text())
    assert info["pid"] == holder.pid
    assert (
        main(
            [
                "grid",
                str(SMOKE_SPEC),
                "--smoke",
                "--runs-dir",
                str(runs),
                "--data-dir",
                str(linked_root),
                "--dry-run",
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    "how",
    [
        "ctrl-c",  # SIGINT to the whole process group, as a terminal sends it
        pytest.param("sigterm", marks=pytest.mark.slow),  # `kill PID` of the driver
    ],
)
def test_ctrl_c_stops_the_grid_marks_runs_interrupted_and_exits_130(
    how: str, linked_root: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    # long enough runs that the signal always lands while a trial is still training (a 4-step smoke
    # run can finish between the poll and the signal on a loaded machine)
    grid = start_grid(runs, linked_root, "--override", "max_steps=400", "--override", "eval_every=200")
    sid = grid.pid
    try:
        wait_for(lambda: "running" in statuses(runs).values(), 120, "a trial to start")
        if how == "ctrl-c":
            os.killpg(grid.pid, signal.SIGINT)
        else:
            os.kill(grid.pid, signal.SIGTERM)
        out, err = grid.communicate(timeout=120)
    finally:
        grid.kill()
        leftovers = stop_session(sid, settle_s=10)
    assert grid.returncode == 130, (out, err)
    assert "interrupted" in err
    records = RunStore(runs).records()
    assert records and all(r["status"] in ("finished", "interrupted") for r in records)
    assert any(r["status"] == "interrupted" for r in records)
    assert all("Ctrl-C or SIGTERM" in r["error"] for r in records if r["status"] == "interrupted")
    assert not (runs / "grid.lock").exists()
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-ray-{grid.pid}-*"))
    assert not leftovers, f"Ray processes left running after Ctrl-C: {leftovers}"


def test_sigkill_of_the_driver_at_a_random_moment_then_rerun(linked_root: Path, tmp_path: Path) -> None:
    """Every run ends finished exactly once; no finished record is lost or trained again."""
    runs = tmp_path / "runs"
    delay = random.Random().uniform(1.0, 25.0)
    print(f"killing the driver after {delay:.1f} s")
    grid = start_grid(runs, linked_root)
    try:
        try:
            grid.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.kill(grid.pid, signal.SIGKILL)
            grid.wait(timeout=30)
    finally:
        grid.kill()
        time.sleep(0.5)
    # The killed driver's Ray workers outlive it; frozen here, they cannot finish a run between this
    # look at the store and the next grid (which must stop them), so what is checkpointed now is what
    # the next grid finds.
    freeze_session(grid.pid)
    before = {r["run_id"]: r for r in RunStore(runs).records()}
    finished_before = {k: r["started_at"] for k, r in before.items() if r["status"] == "finished"}
    # the driver notes each run's last resume checkpoint (kept in Ray Tune's storage) in resume/
    checkpointed = {p.stem for p in (runs / "resume").glob("*.json")} - set(finished_before)
    print(f"finished before the kill: {sorted(finished_before)}; checkpointed: {sorted(checkpointed)}")

    code, out, err = run_to_the_end(runs, linked_root)
    leftovers = stop_session(grid.pid, settle_s=10)  # a SIGKILLed driver's agents: the second grid stops them
    assert code == 0, (out, err)
    store = RunStore(runs)
    records = store.records()
    assert len(records) == 2 and all(r["status"] == "finished" for r in records)
    for record in records:
        assert record["final"]["sts"]["avg"] is not None
        assert store.attempts(record["run_id"]) == []  # finished exactly once
        if record["run_id"] in finished_before:  # finished before the kill: kept, not retrained
            assert record["started_at"] == finished_before[record["run_id"]]
        if record["run_id"] in checkpointed:  # killed after an evaluation point: continued from it
            assert record.get("resumed_from_step", 0) >= 2, record["run_id"]
    assert not list((runs / "resume").glob("*.json"))  # checkpoints go when their run finishes
    assert not list((runs / "tune").glob("*/*/checkpoint_*/*.pt"))
    assert f"{len(finished_before)} already finished, {2 - len(finished_before)} to run" in out
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-ray-{grid.pid}-*"))
    assert not leftovers, f"the killed driver's Ray processes were not stopped: {leftovers}"


def trial_workers(sid: int) -> list[int]:
    """Ray worker processes running a trial, in session ``sid``."""
    found = []
    for pid in session_pids(sid):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith("ray::ImplicitFunc"):
            found.append(pid)
    return found


@pytest.mark.slow
def test_sigkill_of_a_trial_worker_is_recorded_with_rays_reason_and_rerun(
    linked_root: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    grid = start_grid(runs, linked_root)
    try:
        wait_for(lambda: bool(trial_workers(grid.pid)), 120, "a trial worker")
        time.sleep(random.Random().uniform(0.0, 3.0))
        victims = trial_workers(grid.pid)
        assert victims, "the trials ended before a worker could be killed"
        os.kill(victims[0], signal.SIGKILL)
        out, err = grid.communicate(timeout=300)
    finally:
        grid.kill()
        stop_session(grid.pid)
    assert grid.returncode == 1, (out, err)
    failed = [r for r in RunStore(runs).records() if r["status"] == "failed"]
    assert len(failed) == 1, out
    assert f"Ray worker (pid {victims[0]}) died" in failed[0]["error"], failed[0]["error"]
    assert f"failed: {failed[0]['run_id']}: the trial's Ray worker" in out

    code, out, err = run_to_the_end(runs, linked_root)
    assert code == 0, (out, err)
    records = RunStore(runs).records()
    assert len(records) == 2 and all(r["status"] == "finished" for r in records)
