"""A real Ray head (``ray start --head`` on 127.0.0.1, token auth as Ray sets it up) used through
``--address`` by ``harness check`` and a smoke grid, then stopped by its own process ids.

About a minute (the head's start-up plus a two-run smoke grid): marked slow.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.store.run_store import RunStore
from tests.helpers import REPO_ROOT, SMOKE_SPEC
from tests.processes import free_port, session_pids


def harness_cli(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli`` with ``args`` in ``env`` (its output captured), ended after ``timeout`` s."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_a_smoke_grid_on_a_real_local_ray_head(linked_root: Path, tmp_path: Path) -> None:
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip("the ray command is not installed beside this Python")
    data = linked_root
    port = free_port()
    temp = Path(f"/tmp/harness-head-{os.getpid()}")  # short: Ray's socket paths must fit 107 bytes
    head = subprocess.Popen(
        [
            str(ray_bin),
            "start",
            "--head",
            "--port",
            str(port),
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--temp-dir",
            str(temp),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # every process of the head shares this session id
    )
    sid = head.pid
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("RAY_AUTH_MODE", None)  # the harness must find the token as `ray start` set it up
    address = f"127.0.0.1:{port}"
    try:
        out, _ = head.communicate(timeout=120)
        assert head.returncode == 0, out
        common = ["--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(tmp_path / "runs")]
        common += ["--address", address]
        check = harness_cli(["check", str(SMOKE_SPEC), *common], env, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"Ray at {address}: 2 CPU(s), 0 GPU(s)" in check.stdout
        too_many = harness_cli(["grid", str(SMOKE_SPEC), *common, "--gpus-per-trial", "1"], env, timeout=120)
        assert too_many.returncode == 2 and "more than the cluster's 0 GPU(s)" in too_many.stderr
        grid = harness_cli(["grid", str(SMOKE_SPEC), *common], env, timeout=300)
        assert grid.returncode == 0, grid.stdout + grid.stderr
        assert "grid: 2 finished, 0 failed of 2 trials" in grid.stdout
        records = RunStore(tmp_path / "runs").records()
        assert len(records) == 2 and all(r["status"] == "finished" for r in records)
    finally:
        pids = session_pids(sid)
        for pid in pids:
            with_suppress_kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while session_pids(sid) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in session_pids(sid):
            with_suppress_kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
    assert not session_pids(sid)


def with_suppress_kill(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)
