"""Two Ray nodes that share no folder, on this one machine (tests/system/test_cluster.py and
tests/system/test_lost_node.py).

A head (``ray start --head`` on 127.0.0.1) and worker nodes each started inside its own mount
namespace (``unshare --mount``) with a private tmpfs over the given paths and its own copy of the
data root. A worker offers the custom resource ``worker_node``, so trials that ask for it
(``--trial-resources worker_node=1``) run there. Root only (mounts).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from harness.grid.tune.trial import HOLD_ENV
from tests.helpers import REPO_ROOT, make_data_root
from tests.processes import free_port, session_pids, wait_for

RAY = Path(sys.executable).with_name("ray")
STS_DEV = Path("senteval") / "STS" / "STSBenchmark" / "sts-dev.csv"
SHORT = ["--max-steps", "24", "--eval-every", "4"]  # long enough to be killed after a checkpoint

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or not RAY.exists(),
    reason="needs root, unshare and the ray command beside this Python",
)


def wait_for_note(runs: Path, grid: subprocess.Popen[str], output: Callable[[], str]) -> str:
    """The run whose first resume checkpoint the grid noted (its trial then waits, held); a grid
    that ends before fails the test with ``output()``, its lines."""
    noted = runs / "resume"

    def noted_or_ended() -> bool:
        if grid.poll() is not None:
            raise AssertionError(
                f"the grid ended ({grid.returncode}) before a resume checkpoint:\n{output()}"
            )
        return any(noted.glob("*.json"))

    wait_for(noted_or_ended, 900, "a trial's first resume checkpoint")
    (run_id,) = [p.stem for p in noted.glob("*.json")]
    return run_id


def piped_output(proc: subprocess.Popen[str]) -> Callable[[], str]:
    """What an ended process with piped stdout (and stderr) printed."""

    def read() -> str:
        out, err = proc.communicate(timeout=60)
        return f"{out}\n{err or ''}"

    return read


class Nodes:
    """The Ray processes a test started, each group in its own session (stopped by pid)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.sessions: list[int] = []
        self.env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), RAY_USAGE_STATS_ENABLED="0")
        self.env.pop("RAY_AUTH_MODE", None)
        # a lost node is noticed in seconds, not the default half minute
        self.env.update(RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3")
        self.head_session = 0
        # while this file exists a trial waits after each resume checkpoint (harness.grid.tune.trial)
        self.hold_file = base / "hold"
        self.env[HOLD_ENV] = str(self.hold_file)

    def head(self, port: int) -> None:
        cmd = [str(RAY), "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1"]
        cmd += ["--num-cpus", "1", "--num-gpus", "0", "--include-dashboard", "false"]
        cmd += ["--disable-usage-stats", "--temp-dir", str(self.base / "h")]
        pipe = subprocess.PIPE
        proc = subprocess.Popen(
            cmd, env=self.env, stdout=pipe, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.sessions.append(proc.pid)
        self.head_session = proc.pid
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out

    def worker(self, name: str, address: str, hidden: list[Path], data: Path, data_copy: Path) -> int:
        """A worker node in its own mount namespace: a tmpfs over each ``hidden`` path, its own
        copy of the data root at ``data``; returns its namespace's first process id."""
        tmp = self.base / name
        tmp.mkdir()
        mounts = "".join(f"mount -t tmpfs -o size=512m tmpfs {p}\n" for p in hidden)
        script = (
            f"set -e\n{mounts}cp -a {data_copy}/. {data}/\n"
            f"exec {RAY} start --address {address} --node-ip-address 127.0.0.1 --num-cpus 1 --num-gpus 0 "
            f"""--resources '{{"worker_node": 1}}' --disable-usage-stats --temp-dir {tmp}/r --block\n"""
        )
        log = (self.base / f"{name}.log").open("w")
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            # token auth as `ray start --head` set it up; the trials' own folders in this node's folder
            env=dict(self.env, RAY_AUTH_MODE="token", TMPDIR=str(tmp)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.sessions.append(proc.pid)
        wait_for(lambda: "Ray runtime started" in (self.base / f"{name}.log").read_text(), 180, f"{name} up")
        return proc.pid

    def hold(self) -> None:
        """Trials wait after their first resume checkpoint until :meth:`release`."""
        self.hold_file.touch()

    def release(self) -> None:
        self.hold_file.unlink(missing_ok=True)

    def signal(self, sid: int, signum: int) -> list[int]:
        """Send ``signum`` to every process of session ``sid``; the ids it went to."""
        pids = session_pids(sid)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        return pids

    def kill(self, sid: int) -> list[int]:
        pids = session_pids(sid)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return pids

    def remove(self) -> None:
        """Stop every process the nodes started (:meth:`stop_all`) and remove their folder."""
        self.stop_all()
        shutil.rmtree(self.base, ignore_errors=True)

    def stop_all(self) -> list[int]:
        """SIGTERM every session, SIGKILL what is left after 10 s, and again until none is alive (a
        process forked meanwhile, or one slow to die on a loaded machine; 30 s at most): the tests
        then check that no process of a session is left. Returns the ids killed."""
        for sid in self.sessions:
            self.signal(sid, signal.SIGTERM)
            self.signal(sid, signal.SIGCONT)  # a stopped (frozen) process acts on it once continued
        deadline = time.monotonic() + 10
        while any(session_pids(s) for s in self.sessions) and time.monotonic() < deadline:
            time.sleep(0.2)
        killed: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            alive = [pid for sid in self.sessions for pid in self.kill(sid)]
            if not alive:
                break
            killed += [pid for pid in alive if pid not in killed]
            time.sleep(0.2)
        return killed


class Cluster(NamedTuple):
    """What :func:`new_cluster` sets up."""

    runs: Path
    data: Path
    data_copy: Path
    nodes: Nodes
    port: int
    address: str


def new_cluster(mini_data_root: Path, tmp_path: Path, prefix: str) -> Cluster:
    """Runs folder, data root, the worker's data copy and unstarted nodes in ``/tmp/<prefix>-<pid>``."""
    runs, data = tmp_path / "runs", tmp_path / "data"
    runs.mkdir()
    make_data_root(data, mini_data_root / "senteval")
    data_copy = make_data_root(tmp_path / "worker-data", mini_data_root / "senteval")
    base = Path(f"/tmp/{prefix}-{os.getpid()}")  # short: Ray's socket paths must fit 107 bytes
    base.mkdir()
    port = free_port()
    return Cluster(runs, data, data_copy, Nodes(base), port, f"127.0.0.1:{port}")
