"""Lost capacity ends in bounded time, and the head's death in one line.

The fast cases are the modules' own: the watch of the nodes (tests/grid/test_capacity.py), the
driver's callback that feeds it and stops the grid (tests/grid/tune/test_callbacks.py), the head watch
(tests/grid/tune/test_head_watch.py), the option (tests/grid/test_options.py). Here the slow cases
(root, ``unshare``; run by ``.ci/run``): the two-node setup of tests/system/test_cluster.py, a head
on 127.0.0.1 and a worker node in its own mount namespace, with the trials pinned to the worker
(``--trial-resources worker_node=1``):

* ``grid --address`` checks every node's data before it starts: the worker lacks a file, the grid is
  refused naming the node and the file;
* the worker is killed with no replacement: the grid says which node it lost, prints a waiting line
  while it waits, and after ``--lost-node-wait`` marks the runs ``interrupted``, releases the lock
  and exits 1; with a new worker node the same command resumes the killed run from its checkpoint;
* the head is killed: one harness line, the running run ``interrupted``, the lock released.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.store.run_store import RunStore
from tests.helpers import REPO_ROOT, SMOKE_SPEC, make_data_root, session_pids

RAY = Path(sys.executable).with_name("ray")

STS_DEV = Path("senteval") / "STS" / "STSBenchmark" / "sts-dev.csv"

SHORT = ["--max-steps", "24", "--eval-every", "4"]  # long enough to be killed after a checkpoint

# -- slow: a head and a worker node that share no folder --------------------------------------------
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or not RAY.exists(),
    reason="needs root, unshare and the ray command",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if predicate():
                return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Nodes:
    """The Ray processes a test started, each group in its own session (stopped by pid), as in
    tests/system/test_cluster.py."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.sessions: list[int] = []
        self.env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), RAY_USAGE_STATS_ENABLED="0")
        self.env.pop("RAY_AUTH_MODE", None)
        self.env.update(RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3")
        self.head_session = 0

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
            env=dict(self.env, RAY_AUTH_MODE="token", TMPDIR=str(tmp)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.sessions.append(proc.pid)
        wait_for(lambda: "Ray runtime started" in (self.base / f"{name}.log").read_text(), 180, f"{name} up")
        return proc.pid

    def kill(self, sid: int) -> list[int]:
        pids = session_pids(sid)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return pids

    def stop_all(self) -> None:
        for sid in self.sessions:
            for pid in session_pids(sid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while any(session_pids(s) for s in self.sessions) and time.monotonic() < deadline:
            time.sleep(0.2)
        for sid in self.sessions:
            self.kill(sid)


def grid_process(cli: list[str], args: list[str], env: dict[str, str], nodes: Nodes) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*cli, "grid", *args],
        env=dict(env, HARNESS_CHECKPOINT_EVERY_S="0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    nodes.sessions.append(proc.pid)
    return proc


@pytest.mark.slow
@needs_root
def test_a_lost_worker_with_no_replacement_ends_the_grid_in_bounded_time(
    mini_data_root: Path, tmp_path: Path
) -> None:
    runs, data, storage = tmp_path / "runs", tmp_path / "data", tmp_path / "storage"
    runs.mkdir()
    make_data_root(data, mini_data_root / "senteval")
    data_copy = make_data_root(tmp_path / "worker-data", mini_data_root / "senteval")
    base = Path(f"/tmp/hl-{os.getpid()}")  # short: Ray's socket paths must fit 107 bytes
    base.mkdir()
    nodes = Nodes(base)
    port = free_port()
    address = f"127.0.0.1:{port}"
    cli = [sys.executable, "-m", "harness.cli"]
    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs), *SHORT]
    flags = ["--address", address, "--trial-resources", "worker_node=1", "--storage", str(storage)]
    flags += ["--max-failures", "2", "--save-model", "--lost-node-wait", "20"]
    store = RunStore(runs)
    try:
        nodes.head(port)
        (data_copy / STS_DEV).rename(data_copy / "sts-dev.kept")
        first = nodes.worker("w1", address, [runs, data], data, data_copy)
        (data_copy / "sts-dev.kept").rename(data_copy / STS_DEV)
        worker_view = Path(f"/proc/{first}/root")

        # the grid checks every node as `check --address` does: the worker lacks the dev file
        refused = subprocess.run([*cli, "grid", *common, *flags], env=nodes.env, capture_output=True,
                                 text=True, timeout=300)  # fmt: skip
        print(refused.stdout, refused.stderr)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        (line,) = [ln for ln in refused.stderr.splitlines() if ln.startswith("harness grid:")]
        assert re.match(r"harness grid: error: node \S+ \([0-9a-f]{8}\): ", line), refused.stderr
        assert f"SentEval file missing: {data / STS_DEV}: nothing was run" in line
        assert not (runs / "records").exists() and not (runs / "grid.lock").exists()
        shutil.copy(data / STS_DEV, worker_view / data.relative_to("/") / STS_DEV)

        grid = grid_process(cli, [*common, *flags], nodes.env, nodes)
        noted = runs / "resume"
        wait_for(lambda: any(noted.glob("*.json")), 600, "a trial's first resume checkpoint")
        (killed_run,) = [p.stem for p in noted.glob("*.json")]
        step = json.loads((noted / f"{killed_run}.json").read_text())["step"]
        assert nodes.kill(first), "the worker node's processes were gone already"
        killed_at = time.monotonic()
        out, err = grid.communicate(timeout=600)
        waited = time.monotonic() - killed_at
        print(out, err)
        print(f"the grid ended {waited:.0f} s after the worker node was killed")
        assert grid.returncode == 1, out + err
        assert waited < 20 + 120, waited  # the stated wait, Ray's detection of the lost node, the stop
        assert re.search(r"Ray node \S+ \([0-9a-f]{8}\) lost \(it offered worker_node=1", out), out
        waiting = [
            ln
            for ln in out.splitlines()
            if "waiting for a node with worker_node=1: 0 of 1 node(s) left" in ln
        ]
        assert waiting and waiting[-1].endswith("s of 20 s"), out
        errors = [ln for ln in err.splitlines() if ln.startswith("harness grid: error: ")]
        assert len(errors) == 1 and "no Ray node with worker_node=1 came back within 20 s" in errors[0]
        assert "run(s) marked interrupted: " in errors[0]
        assert re.search(r"lost node\(s\): \S+ \([0-9a-f]{8}\)", errors[0]) and killed_run in errors[0]
        assert "Traceback" not in err
        records = store.records()
        assert len(records) == 2 and all(r["status"] == "interrupted" for r in records), records
        assert not (runs / "grid.lock").exists()
        assert (noted / f"{killed_run}.json").is_file()  # kept: the run resumes from it

        # a new worker node: the same command resumes the killed run from its checkpoint
        nodes.worker("w2", address, [runs, data], data, data_copy)
        grid = grid_process(cli, [*common, *flags], nodes.env, nodes)
        out, err = grid.communicate(timeout=900)
        print(out, err)
        assert grid.returncode == 0, out + err
        assert "grid: 2 finished, 0 failed of 2 trials" in out
        killed = store.load(killed_run)
        assert killed is not None and killed["status"] == "finished"
        assert killed.get("resumed_from_step", 0) >= step, killed
    finally:
        nodes.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    assert all(not session_pids(s) for s in nodes.sessions)


@pytest.mark.slow
@needs_root
def test_the_head_killed_gives_one_line_and_interrupted_records(mini_data_root: Path, tmp_path: Path) -> None:
    runs, data, storage = tmp_path / "runs", tmp_path / "data", tmp_path / "storage"
    runs.mkdir()
    make_data_root(data, mini_data_root / "senteval")
    data_copy = make_data_root(tmp_path / "worker-data", mini_data_root / "senteval")
    base = Path(f"/tmp/hh-{os.getpid()}")
    base.mkdir()
    nodes = Nodes(base)
    port = free_port()
    address = f"127.0.0.1:{port}"
    cli = [sys.executable, "-m", "harness.cli"]
    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs), *SHORT]
    flags = ["--address", address, "--trial-resources", "worker_node=1", "--storage", str(storage)]
    try:
        nodes.head(port)
        nodes.worker("w1", address, [runs, data], data, data_copy)
        grid = grid_process(cli, [*common, *flags], nodes.env, nodes)
        noted = runs / "resume"
        wait_for(lambda: any(noted.glob("*.json")), 600, "a trial's first resume checkpoint")
        (running_run,) = [p.stem for p in noted.glob("*.json")]
        assert nodes.kill(nodes.head_session), "the head's processes were gone already"
        killed_at = time.monotonic()
        out, err = grid.communicate(timeout=300)
        ended = time.monotonic() - killed_at
    finally:
        nodes.stop_all()
        shutil.rmtree(base, ignore_errors=True)
    print(out, err)
    print(f"the grid ended {ended:.0f} s after the head was killed")
    assert grid.returncode == 1, out + err
    assert ended < 55, ended  # before Ray's own minute
    harness_lines = [ln for ln in err.splitlines() if ln.startswith("harness grid:")]
    assert len(harness_lines) == 1, err
    assert re.match(rf"harness grid: error: the Ray head at \S+:{port} stopped answering", harness_lines[0])
    assert f"marked interrupted ({running_run})" in harness_lines[0] and "Traceback" not in err
    assert "Failed to connect to GCS" not in err
    record = RunStore(runs).load(running_run)
    assert record is not None and record["status"] == "interrupted", record
    assert not (runs / "grid.lock").exists()
    assert all(not session_pids(s) for s in nodes.sessions)
