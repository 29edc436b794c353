"""Lost capacity ends in bounded time, and the head's death in one line.

Fast cases: the watch of the nodes (:mod:`harness.grid.capacity`), the driver's callback that feeds it
and stops the grid, the head watch, the option. Slow cases (root, ``unshare``; run by ``.ci/run``):
the two-node setup of tests/test_cluster.py, a head on 127.0.0.1 and a worker node in its own mount
namespace, with the trials pinned to the worker (``--trial-resources worker_node=1``):

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
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from data_roots import make_data_root
from processes import session_pids

from harness.cli import main
from harness.grid.capacity import CapacityWatch, Node
from harness.grid.tune import callbacks
from harness.grid.tune.head_watch import HeadWatch
from harness.store.bookkeeping import ensure_interrupted_record
from harness.store.record import new_record
from harness.store.run_store import RunStore

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "tests" / "fixtures" / "specs" / "smoke_grid.toml"
RAY = Path(sys.executable).with_name("ray")
STS_DEV = Path("senteval") / "STS" / "STSBenchmark" / "sts-dev.csv"
SHORT = ["--max-steps", "24", "--eval-every", "4"]  # long enough to be killed after a checkpoint
HEAD = Node("h" * 56, "127.0.0.1", {"CPU": 1.0, "memory": 4e9})
WORKER = Node("w" * 56, "127.0.0.1", {"CPU": 1.0, "memory": 4e9, "worker_node": 1.0})
NEED = {"CPU": 1.0, "memory": 1e9, "worker_node": 1.0}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- fast: the watch, the callback, the head watch, the option -------------------------------------
def test_the_watch_names_the_lost_node_and_counts_the_wait() -> None:
    clock = Clock()
    watch = CapacityWatch(300.0, clock)
    assert watch.observe([HEAD, WORKER], {}) == []
    assert watch.observe([HEAD, WORKER], {"simcse-1": NEED}) == []  # placeable: Ray's to schedule
    lines = watch.observe([HEAD], {"simcse-1": NEED, "simcsepp-2": NEED})
    assert lines[0] == "Ray node 127.0.0.1 (wwwwwwww) lost (it offered worker_node=1, CPU=1, memory=3.7 GB)"
    assert lines[1].startswith("no alive Ray node can take 2 waiting run(s) (simcse-1, simcsepp-2): ")
    assert "a node with worker_node=1: 0 of 1 node(s) left; waiting up to 300 s" in lines[1]
    clock.now += 45
    assert watch.waiting_line() == "waiting for a node with worker_node=1: 0 of 1 node(s) left, 45 s of 300 s"
    assert not watch.expired()
    clock.now += 255
    assert watch.expired()
    assert watch.stop_reason() == (
        "no Ray node with worker_node=1 came back within 300 s (--lost-node-wait; lost node(s): 127.0.0.1 "
        "(wwwwwwww))"
    )


def test_a_node_that_comes_back_ends_the_wait() -> None:
    clock = Clock()
    watch = CapacityWatch(60.0, clock)
    watch.observe([HEAD, WORKER], {})
    watch.observe([HEAD], {"r-1": NEED})
    clock.now += 30
    back = Node("n" * 56, "10.0.0.7", WORKER.resources)
    lines = watch.observe([HEAD, back], {"r-1": NEED})
    assert lines == [
        "Ray node 10.0.0.7 (nnnnnnnn) joined (it offers worker_node=1, CPU=1, memory=3.7 GB)",
        "a Ray node that can take the waiting runs is back: the grid goes on",
    ]
    clock.now += 100
    assert not watch.expired() and watch.since is None


def trial(run_id: str, status: str) -> Any:
    factory = SimpleNamespace(required_resources=dict(NEED))
    return SimpleNamespace(
        status=status, placement_group_factory=factory, config={"run_entry": {"run_id": run_id}}
    )


def test_the_callback_prints_while_nothing_runs_and_stops_the_grid_after_the_wait(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = Clock()
    lines: list[str] = []
    progress = callbacks.TuneProgress(2, RunStore(tmp_path / "runs"), lines.append, clock=clock)
    progress.capacity = CapacityWatch(120.0, clock)
    stopper = callbacks.GridStopper(progress)
    nodes = [HEAD, WORKER]
    monkeypatch.setattr(callbacks, "alive_nodes", lambda: list(nodes))
    progress.capacity.observe(nodes, {})
    trials = [trial("a-1", "RUNNING"), trial("b-2", "PENDING")]
    progress.on_step_end(1, trials)
    assert lines == [] and not stopper.stop_all()
    nodes.remove(WORKER)
    trials[0].status = "PENDING"  # Tune retries it: it waits like the other
    clock.now += 5
    progress.on_step_end(2, trials)
    assert "Ray node 127.0.0.1 (wwwwwwww) lost" in lines[0] and "waiting up to 120 s" in lines[1]
    for _ in range(7):  # a line every 15 s, with nothing running
        clock.now += 15
        progress.on_step_end(3, trials)
    waiting = [ln for ln in lines if "| waiting for a node with worker_node=1: 0 of 1 node(s) left" in ln]
    assert len(waiting) == 7 and waiting[-1].endswith("105 s of 120 s"), lines
    assert not stopper.stop_all()
    clock.now += 15
    progress.on_step_end(4, trials)
    assert stopper.stop_all()
    assert progress.capacity_stop is not None and "no Ray node with worker_node=1" in progress.capacity_stop


def test_the_grid_waits_for_runs_still_running_before_it_stops(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = Clock()
    progress = callbacks.TuneProgress(2, RunStore(tmp_path / "runs"), lambda _line: None, clock=clock)
    progress.capacity = CapacityWatch(10.0, clock)
    monkeypatch.setattr(callbacks, "alive_nodes", lambda: [HEAD])
    progress.capacity.observe([HEAD, WORKER], {})
    trials = [trial("a-1", "RUNNING"), trial("b-2", "PENDING")]
    progress.on_step_end(1, trials)
    clock.now += 60
    progress.on_step_end(2, trials)
    assert progress.capacity.expired() and progress.capacity_stop is None  # a-1 still works on a node left
    trials[0].status = "TERMINATED"
    clock.now += 3
    progress.on_step_end(3, trials)
    assert progress.capacity_stop is not None


def test_the_head_watch_calls_once_the_head_is_silent() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    lost: list[float] = []
    done = threading.Event()

    def on_lost(silent_s: float) -> None:
        lost.append(silent_s)
        done.set()

    watch = HeadWatch(address, on_lost, lost_after_s=0.5, every_s=0.1)
    watch.start()
    time.sleep(0.5)
    assert not lost  # it answers
    server.close()
    assert done.wait(10) and lost[0] >= 0.5
    watch.done.set()


def test_a_waiting_run_without_a_record_gets_an_interrupted_one(tmp_path: Path, mini_data_root: Path) -> None:
    from harness.grid.plan import expand
    from harness.specs.parse import load_table_spec

    data = make_data_root(tmp_path / "data")
    config = expand([load_table_spec(SPEC)], "smoke", seeds=1, data_root=data).runs[0].config
    store = RunStore(tmp_path / "runs")
    assert ensure_interrupted_record(store, config, "no node")
    record = store.load(config.run_id())
    assert record is not None and record["status"] == "interrupted" and record["error"] == "no node"
    finished = dict(new_record(config), status="finished")
    store.save(finished)
    assert not ensure_interrupted_record(store, config, "no node")


@pytest.mark.parametrize("value", ["-1", "nan", "1e9"])
def test_the_wait_is_checked(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["grid", str(SPEC), "--smoke", "--runs-dir", str(tmp_path / "runs"), "--lost-node-wait", value]
    assert main(args) == 2
    assert "--lost-node-wait must be seconds from 0 to 604800 (a week)" in capsys.readouterr().err


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
    tests/test_cluster.py."""

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
    common = [str(SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs), *SHORT]
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
    common = [str(SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs), *SHORT]
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
