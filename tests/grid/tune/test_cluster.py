"""The Ray session of a grid: a local grid ignores RAY_ADDRESS, and Ray starts no more CPU trials
than their memory estimates allow."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.grid.options import GridRequest
from harness.grid.tune import cluster, driver
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from tests.helpers import FIXTURES, REPO_ROOT, SMOKE_CLUSTER, make_corpus_root, timed_train


def test_a_local_grid_ignores_ray_address(tmp_path: Path) -> None:
    # A grid without --address starts its own Ray even when RAY_ADDRESS points elsewhere (or a head
    # runs on this machine): ray.init() would otherwise try to join it and refuse num_cpus. In a
    # subprocess, so that no Ray session of this test process is reused.
    import subprocess
    import sys

    code = (
        "import ray, harness.grid.tune.cluster as t\n"
        "with t.ray_session(address=None, smoke=True):\n"
        "    assert ray.is_initialized() and ray.cluster_resources().get('CPU', 0) >= 1\n"
        "print('ok')\n"
    )
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_a_local_ray_leaves_no_process_behind_even_one_that_ignores_sigterm(tmp_path: Path) -> None:
    # ray.shutdown() can return while a worker of the local Ray is still exiting (seen after Ctrl-C on
    # a loaded machine). Stand-in for such a straggler: a process that holds a log in the session's
    # folder and ignores SIGTERM. Leaving the session must stop it. In a subprocess, so that no Ray
    # session of this test process is reused.
    import subprocess
    import sys

    code = (
        "import os, subprocess, sys, tempfile, time\n"
        "from pathlib import Path\n"
        "import ray, harness.grid.tune.cluster as t\n"
        "with t.ray_session(address=None, smoke=True):\n"
        "    root = next(Path(tempfile.gettempdir()).glob(f'harness-ray-{os.getpid()}-*'))\n"
        "    straggler = subprocess.Popen([sys.executable, '-c', 'import signal, sys, time; "
        'signal.signal(signal.SIGTERM, signal.SIG_IGN); f = open(sys.argv[1], "w"); '
        "print(1, flush=True); time.sleep(600)', str(root / 'straggler.log')],\n"
        "        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)\n"
        "    straggler.stdout.readline()\n"
        "start = time.monotonic()\n"
        "print(straggler.poll() is not None, root.exists(), round(time.monotonic() - start, 1))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    stopped, folder_left, _ = done.stdout.split()
    assert stopped == "True" and folder_left == "False", done.stdout


def test_ray_starts_no_more_cpu_trials_than_their_memory_allows(
    ray_up: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    resources = ray.cluster_resources()
    if resources.get("CPU", 0) < 2 or not resources.get("memory"):
        pytest.skip("needs two CPUs in Ray and its memory resource")
    budget = float(resources["memory"])
    data_root = make_corpus_root(tmp_path / "data")
    plan = expand([load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", data_root=data_root)
    configs = [r.config for r in plan.runs]
    assert len(configs) == 2

    def run(fraction: float) -> tuple[bool, list[str]]:
        monkeypatch.setattr(cluster, "estimate_bytes", lambda config, device="cpu": int(fraction * budget))
        store = RunStore(tmp_path / f"runs-{fraction}")
        lines: list[str] = []
        report = driver.run_trials(
            configs, data_root, store, GridRequest(SMOKE_CLUSTER, timed_train, lines.append)
        )
        assert report.finished == 2, report.failed
        spans = [json.loads(p.read_text()) for p in data_root.glob("span-*.json")]
        overlap = min(end for _, end in spans) > max(start for start, _ in spans)
        return overlap, lines

    together, lines = run(0.3)
    assert together and not any(ln.startswith("memory:") for ln in lines)
    alone, lines = run(0.6)  # two of them would need 1.2 x what Ray has
    assert not alone
    assert any(ln.startswith("memory: the largest run needs") and "at most 1 such run" in ln for ln in lines)
    # a run that needs more than the whole budget asks for all of it, and still runs (alone)
    monkeypatch.setattr(cluster, "estimate_bytes", lambda config, device="cpu": int(3 * budget))
    assert cluster.trial_memory(configs, 0.0, budget) == {c.run_id(): int(budget) for c in configs}
    assert cluster.trial_memory(configs, 0.5, budget) == {}  # GPU trials: activations are not host memory


def test_a_head_that_accepts_connections_but_does_not_answer_is_refused_in_one_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # a listening socket nobody reads: what a stopped (SIGSTOP) head looks like from outside
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        with pytest.raises(ConfigError) as caught:
            cluster.check_address(address, answer_s=0.5)
    finally:
        server.close()
    assert str(caught.value) == (
        f"--address {address}: the Ray head there accepts connections but does not answer (no reply to "
        "Ray's health check within 0.5 s): the head node is stopped, hung or overloaded"
    )
    # Ray's own retry lines ("Failed to connect to GCS ...") are not the user's to read (other
    # lines may come from the package's Ray session, running beside this test)
    assert "GCS" not in capfd.readouterr().err
