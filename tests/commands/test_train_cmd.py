"""``harness train``: a smoke run through the command line, its one-line errors, and SIGTERM (``kill
PID``) stopping it as Ctrl-C does: the record ``interrupted``, the resume checkpoint kept, one line,
exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.store.run_store import RunStore
from tests.helpers import REPO_ROOT, make_data_root


def test_cli_train_smoke(
    fakes: None, train_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    out_dir = tmp_path / "runs"
    argv = ["train", "--profile", "smoke", "--data-dir", str(train_root), "--runs-dir", str(out_dir)]
    code = main([*argv, "--max-steps", "2", "--set", "temperature=0.1", "--save-checkpoint"])
    text = capsys.readouterr().out
    assert code == 0
    records = RunStore(out_dir).records()
    assert len(records) == 1 and records[0]["config"]["params"]["temperature"] == 0.1
    assert records[0]["config"]["max_steps"] == 2
    assert f"record: {out_dir / 'records' / records[0]['run_id']}.json" in text
    assert "final sts: STSB" in text
    assert (out_dir / "checkpoints" / records[0]["run_id"] / "config.json").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "temperature"], "--set expects KEY=VALUE"),
        (["--set", "temprature=1"], "did you mean 'temperature'"),
        (["--method", "simcs"], "unknown method 'simcs'"),
        (["--profile", "gpu"], "unknown profile 'gpu'"),
    ],
)
def test_cli_errors_are_one_line(
    train_root: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    from harness.cli import main

    code = main(["train", "--profile", "smoke", "--data-dir", str(train_root), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_sigterm_stops_train_cleanly(mini_data_root: Path, tmp_path: Path) -> None:
    data = make_data_root(tmp_path / "data", mini_data_root / "senteval")
    runs = tmp_path / "runs"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HARNESS_CHECKPOINT_EVERY_S="0")
    args = [sys.executable, "-m", "harness.cli", "train", "--profile", "smoke", "--data-dir", str(data)]
    args += ["--runs-dir", str(runs), "--final-tasks", "none", "--eval-every", "2"]
    train = subprocess.Popen(
        [*args, "--max-steps", "100000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300
        record: dict = {}
        while time.monotonic() < deadline and len(record.get("trajectory") or []) < 3:
            time.sleep(0.5)
            for path in (runs / "records").glob("*.json"):
                try:
                    record = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
        assert len(record.get("trajectory") or []) >= 3, "the run made no evaluation point"
        train.send_signal(signal.SIGTERM)
        out, err = train.communicate(timeout=120)
    finally:
        if train.poll() is None:
            train.kill()
    assert train.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == "harness train: interrupted" and "Traceback" not in err
    run_id = record["run_id"]
    saved = json.loads((runs / "records" / f"{run_id}.json").read_text(encoding="utf-8"))
    assert saved["status"] == "interrupted" and saved["error"].startswith("KeyboardInterrupt")
    assert (runs / "resume" / f"{run_id}.pt").is_file()  # the same command resumes from it
