"""A grid on a Ray cluster whose nodes share no folder, on this one machine.

A head (``ray start --head`` on 127.0.0.1) and a worker node started inside its own mount namespace
(``unshare --mount``) with a private tmpfs over the runs folder's and the data root's paths: the
worker cannot see the driver's runs folder, and reads its own copy of the small data root. The
worker offers the custom resource ``worker_node`` and the grid's trials ask for it
(``--trial-resources``), so every trial runs there. Tune's storage (``--storage``) is a folder both
see: resume checkpoints and saved encoders live there, as on a cluster with shared storage or s3.

* ``harness check --address`` visits both nodes and lists the data file the worker lacks (exit 1);
* a smoke grid through ``--address``: the worker node is killed (its processes, by their ids) while
  a trial is held after its first checkpoint (``$HARNESS_TEST_HOLD``); a new worker node starts;
  the trial is retried there from its checkpoint; every record is in the driver's store exactly
  once, the saved encoders too, and tables render.

Root only (mounts). Two Ray nodes and a two-run smoke grid with a node lost: a few minutes on two
loaded cores, so marked slow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.store.run_store import RunStore
from tests.helpers import SMOKE_SPEC
from tests.processes import session_pids
from tests.system.ray_nodes import SHORT, STS_DEV, needs_root, new_cluster, piped_output, wait_for_note

pytestmark = [
    pytest.mark.slow,
    needs_root,
]


def test_a_grid_on_nodes_that_share_no_folder(mini_data_root: Path, tmp_path: Path) -> None:
    runs, data, data_copy, nodes, port, address = new_cluster(mini_data_root, tmp_path, "hc")
    storage = tmp_path / "storage"
    (runs / "driver-only").write_text("the driver's runs folder\n")
    cli = [sys.executable, "-m", "harness.cli"]
    common = ["--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    try:
        nodes.head(port)
        (data_copy / STS_DEV).rename(data_copy / "sts-dev.kept")
        first = nodes.worker("w1", address, [runs, data], data, data_copy)
        (data_copy / "sts-dev.kept").rename(data_copy / STS_DEV)  # the next worker's copy is whole
        worker_view = Path(f"/proc/{first}/root")  # the file system as the worker node sees it
        assert (runs / "driver-only").is_file()
        assert not (worker_view / runs.relative_to("/") / "driver-only").exists()
        assert not (worker_view / data.relative_to("/") / STS_DEV).exists()

        check = subprocess.run([*cli, "check", str(SMOKE_SPEC), *common, "--address", address],
                               env=nodes.env, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert check.returncode == 1, check.stdout + check.stderr
        problems = [ln for ln in check.stdout.splitlines() if "PROBLEM" in ln]
        assert len(problems) == 1 and f"SentEval file missing: {data / STS_DEV}" in problems[0], check.stdout
        assert "Ray at " in check.stdout and "2 node(s)" in check.stdout
        # the worker gets the file back (through its own namespace's view of its tmpfs)
        shutil.copy(data / STS_DEV, worker_view / data.relative_to("/") / STS_DEV)

        nodes.hold()  # the trial waits after its first checkpoint: it cannot finish before the kill
        grid = subprocess.Popen(
            [*cli, "grid", str(SMOKE_SPEC), *common, "--address", address, "--trial-resources",
             "worker_node=1", "--storage", str(storage), "--max-failures", "2", "--save-model", *SHORT],
            env=dict(nodes.env, HARNESS_CHECKPOINT_EVERY_S="0"),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        nodes.sessions.append(grid.pid)
        t0 = time.monotonic()
        noted = runs / "resume"
        killed_run = wait_for_note(runs, grid, piped_output(grid))
        step = json.loads((noted / f"{killed_run}.json").read_text())["step"]
        assert nodes.kill(first), "the worker node's processes were gone already"
        nodes.release()
        time.sleep(2.0)
        nodes.worker("w2", address, [runs, data], data, data_copy)
        out, _ = grid.communicate(timeout=900)
        wall = time.monotonic() - t0
    finally:
        leftovers = nodes.stop_all()
        shutil.rmtree(nodes.base, ignore_errors=True)
    print(out)
    print(f"grid wall time {wall:.1f} s; killed {killed_run} after its checkpoint at step {step}")
    assert grid.returncode == 0, out
    assert "grid: 2 finished, 0 failed of 2 trials" in out
    assert f"retrying {killed_run}: " in out  # Tune's retry of the trial the lost node ran
    store = RunStore(runs)
    records = store.records()
    assert sorted(r["run_id"] for r in records) == sorted({r["run_id"] for r in records})
    assert len(records) == 2 and all(r["status"] == "finished" for r in records)
    for record in records:
        assert store.attempts(record["run_id"]) == []  # one record per run, no duplicate attempt
        assert record["checkpoint"] == store.checkpoint_ref(record["run_id"])
        assert (store.checkpoint_dir(record["run_id"]) / "config.json").is_file()
    killed = store.load(killed_run)
    assert killed is not None and killed.get("resumed_from_step", 0) >= step, killed
    assert not list(noted.glob("*.json"))  # the notes go when their runs finish
    assert not [p for p in storage.rglob("*.pt")]  # so do the resume checkpoints
    tables_out = ["--out", str(tmp_path / "tables")]
    tables = subprocess.run([*cli, "tables", str(SMOKE_SPEC), *common, *SHORT, *tables_out],
                            env=nodes.env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert tables.returncode == 0, tables.stdout + tables.stderr
    lines = (tmp_path / "tables" / "smoke_grid.tex").read_text().splitlines()
    measured = [lines[i + 1] for i, ln in enumerate(lines) if ln.startswith(("SimCSE-BERT-base &", "{*}\\,"))]
    assert len(measured) == 2 and all("--" not in ln for ln in measured)
    print(f"stopped {len(leftovers)} process(es) left by the nodes and the grid")
    assert all(not session_pids(s) for s in nodes.sessions)
