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
* the head is killed: one harness line, the running run ``interrupted``, the lock released;
* the head is stopped (SIGSTOP: it accepts connections, answers nothing): the grid says it waits,
  and after ``--lost-node-wait`` ends as for a killed head; ``check``/``grid --address`` to the
  stopped head each say so in one line; Ctrl-C or SIGTERM while it waits: exit 130, the same marks.

Each test holds its trial after its first resume checkpoint (``$HARNESS_TEST_HOLD``, see
:mod:`harness.grid.tune.trial`) before it loses a node or the head, so no run can finish first; the
tests judge the harness's own lines, whatever Ray prints beside them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from harness.store.run_store import RunStore
from tests.helpers import SMOKE_SPEC
from tests.processes import session_pids, wait_for
from tests.system.ray_nodes import SHORT, STS_DEV, Nodes, needs_root, new_cluster, piped_output, wait_for_note


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
    runs, data, data_copy, nodes, port, address = new_cluster(mini_data_root, tmp_path, "hl")
    storage = tmp_path / "storage"
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

        nodes.hold()
        grid = grid_process(cli, [*common, *flags], nodes.env, nodes)
        noted = runs / "resume"
        killed_run = wait_for_note(runs, grid, piped_output(grid))
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
        nodes.release()
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
        nodes.remove()
    assert all(not session_pids(s) for s in nodes.sessions)


@pytest.mark.slow
@needs_root
def test_the_head_killed_gives_one_line_and_interrupted_records(mini_data_root: Path, tmp_path: Path) -> None:
    runs, data, data_copy, nodes, port, address = new_cluster(mini_data_root, tmp_path, "hh")
    storage = tmp_path / "storage"
    cli = [sys.executable, "-m", "harness.cli"]
    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs), *SHORT]
    flags = ["--address", address, "--trial-resources", "worker_node=1", "--storage", str(storage)]
    try:
        nodes.head(port)
        nodes.worker("w1", address, [runs, data], data, data_copy)
        nodes.hold()
        grid = grid_process(cli, [*common, *flags], nodes.env, nodes)
        running_run = wait_for_note(runs, grid, piped_output(grid))
        assert nodes.kill(nodes.head_session), "the head's processes were gone already"
        killed_at = time.monotonic()
        out, err = grid.communicate(timeout=300)
        ended = time.monotonic() - killed_at
    finally:
        nodes.remove()
    print(out, err)
    print(f"the grid ended {ended:.0f} s after the head was killed")
    assert grid.returncode == 1, out + err
    assert ended < 55, ended  # before Ray's own minute
    harness_lines = [ln for ln in err.splitlines() if ln.startswith("harness grid:")]
    assert len(harness_lines) == 1, err
    assert re.match(rf"harness grid: error: the Ray head at \S+:{port} stopped answering", harness_lines[0])
    assert f"marked interrupted ({running_run})" in harness_lines[0] and "Traceback" not in err
    record = RunStore(runs).load(running_run)
    assert record is not None and record["status"] == "interrupted", record
    assert not (runs / "grid.lock").exists()
    assert all(not session_pids(s) for s in nodes.sessions)


class Output:
    """A process's stdout and stderr, read as they come (the tests act on a line it printed)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((proc.stdout, self.out), (proc.stderr, self.err))
        ]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, lines: list[str]) -> None:
        assert stream is not None
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait(self, timeout_s: float) -> tuple[int, str, str]:
        """The exit status, stdout and stderr once the process ended (a hang fails the test)."""
        code = self.proc.wait(timeout=timeout_s)
        for reader in self.readers:
            reader.join(timeout=30)
        return code, "\n".join(self.out), "\n".join(self.err)


def frozen_head_setup(
    mini_data_root: Path, tmp_path: Path, prefix: str
) -> tuple[Nodes, list[str], str, Path]:
    """A head and a worker node; the arguments of a smoke grid (and of `check`) with ``--address``
    to them; the grid's runs folder."""
    runs, data, data_copy, nodes, port, address = new_cluster(mini_data_root, tmp_path, prefix)
    args = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs), *SHORT]
    nodes.head(port)
    nodes.worker("w1", address, [runs, data], data, data_copy)
    return nodes, [*args, "--address", address], address, runs


def grid_flags(tmp_path: Path) -> list[str]:
    """What a grid adds to `check`'s arguments: its trials on the worker, Tune's storage."""
    return ["--trial-resources", "worker_node=1", "--storage", str(tmp_path / "storage")]


def stop_head_once_held(nodes: Nodes, runs: Path, grid: Output) -> str:
    """Wait for the held trial's first resume checkpoint, stop (SIGSTOP) the head; the run's id."""
    running_run = wait_for_note(runs, grid.proc, lambda: "\n".join(grid.wait(timeout_s=60)[1:]))
    assert nodes.signal(nodes.head_session, signal.SIGSTOP), "the head's processes were gone already"
    return running_run


@pytest.mark.slow
@needs_root
def test_a_stopped_head_ends_the_grid_after_the_lost_node_wait(mini_data_root: Path, tmp_path: Path) -> None:
    nodes, args, address, runs = frozen_head_setup(mini_data_root, tmp_path, "hs")
    cli = [sys.executable, "-m", "harness.cli"]
    try:
        nodes.hold()
        flags = [*grid_flags(tmp_path), "--lost-node-wait", "20"]
        grid = Output(grid_process(cli, [*args, *flags], nodes.env, nodes))
        running_run = stop_head_once_held(nodes, runs, grid)
        stopped_at = time.monotonic()
        code, out, err = grid.wait(timeout_s=300)
        ended = time.monotonic() - stopped_at
        print(out, err)
        print(f"the grid ended {ended:.0f} s after the head was stopped")
        # with the head still stopped: `check` and `grid` to it say so in one line each
        checked = subprocess.run([*cli, "check", *args], env=nodes.env, capture_output=True, text=True,
                                 timeout=300)  # fmt: skip
        again = subprocess.run([*cli, "grid", *args, *flags], env=nodes.env, capture_output=True, text=True,
                               timeout=300)  # fmt: skip
    finally:
        nodes.remove()
    assert code == 1, out + err
    assert ended < 20 + 120, ended  # the stated wait and the questions' deadlines, not Ray's minutes
    assert f"the Ray head at {address} accepts connections but does not answer: waiting up to 20 s" in out
    harness_lines = [ln for ln in err.splitlines() if ln.startswith("harness grid:")]
    assert len(harness_lines) == 1, err
    assert harness_lines[0].startswith(
        f"harness grid: error: the Ray head at {address} has not answered for "
    )
    assert f"marked interrupted ({running_run})" in harness_lines[0] and "Traceback" not in err
    record = RunStore(runs).load(running_run)
    assert record is not None and record["status"] == "interrupted", record
    assert not (runs / "grid.lock").exists()

    print(checked.stdout, checked.stderr)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    problems = [ln for ln in checked.stdout.splitlines() if "PROBLEM" in ln]
    assert len(problems) == 1 and f"--address {address}: the Ray head there accepts connections but " \
        "does not answer" in problems[0], checked.stdout  # fmt: skip
    print(again.stdout, again.stderr)
    assert again.returncode == 2, again.stdout + again.stderr
    (line,) = [ln for ln in again.stderr.splitlines() if ln.startswith("harness grid:")]
    assert "the Ray head there accepts connections but does not answer" in line
    assert not (runs / "grid.lock").exists()
    assert all(not session_pids(s) for s in nodes.sessions)


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_while_the_head_is_stopped_ends_the_grid(
    signum: int, mini_data_root: Path, tmp_path: Path
) -> None:
    nodes, args, address, runs = frozen_head_setup(mini_data_root, tmp_path, "hi")
    cli = [sys.executable, "-m", "harness.cli"]
    try:
        nodes.hold()
        grid = Output(grid_process(cli, [*args, *grid_flags(tmp_path)], nodes.env, nodes))  # wait: 300 s
        running_run = stop_head_once_held(nodes, runs, grid)
        waiting = f"the Ray head at {address} accepts connections but does not answer: waiting up to 300 s"
        wait_for(lambda: any(waiting in ln for ln in grid.out), 120, "the grid's line that it waits")
        os.kill(grid.proc.pid, signum)
        signalled_at = time.monotonic()
        code, out, err = grid.wait(timeout_s=120)
        ended = time.monotonic() - signalled_at
    finally:
        nodes.remove()
    print(out, err)
    print(f"the grid ended {ended:.0f} s after the signal")
    assert code == 130, out + err
    assert ended < 60, ended  # seconds (the next question's deadline), not the 300 s wait
    assert "harness grid: interrupted" in err.splitlines() and "Traceback" not in err
    assert f"marked interrupted ({running_run})" in err
    record = RunStore(runs).load(running_run)
    assert record is not None and record["status"] == "interrupted", record
    assert not (runs / "grid.lock").exists()
    assert all(not session_pids(s) for s in nodes.sessions)
