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
from typing import Any

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


WIDTH_64 = ["--post-whiten", "zca", "--post-whiten-sentences", "64"]  # random:tiny is 64 wide


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--warmup-steps", "5"], "warmup_steps 5 is more than the run's max_steps 4: the learning rate"),
        (["--max-steps", "1e15"], "--max-steps: '1e15' is not a valid int"),
        (["--post-whiten", "flow", "--post-whiten-sentences", "81"], "post_whiten_sentences 81 is more than"),
        (WIDTH_64, "post_whiten_sentences 64 is not more than the encoder's width 64"),
        (["--method", "dclr", "--set", "complementary=/no/model"], "model path does not exist: /no/model"),
        (["--set", "temperature=inf"], "--set temperature must be finite, got 'inf'"),
    ],
)
def test_what_the_run_cannot_do_is_one_line_before_its_record(
    train_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    from harness.cli import main

    runs = tmp_path / "runs"
    argv = ["train", "--profile", "smoke", "--data-dir", str(train_root), "--runs-dir", str(runs)]
    code = main([*argv, *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (runs / "records").exists()


class _Resolved(Exception):
    """Raised where the run's checks would read its corpus: the config got that far."""


def test_the_device_decides_auto_and_refuses_what_it_cannot_compute(
    train_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import harness.commands.train_cmd as train_cmd
    import harness.config.hardware as hw
    from harness.cli import main

    def resolved(config: Any, store: Any, save_model: bool) -> None:
        raise _Resolved(config.precision)

    # a GPU without bf16 beside a CPU with it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(hw, "native_bf16", lambda device=None: not str(device).startswith("cuda"))
    monkeypatch.setattr(hw, "compile_problem", lambda device: "no compiler here")
    runs = tmp_path / "runs"
    argv = ["train", "--profile", "smoke", "--data-dir", str(train_root), "--runs-dir", str(runs)]
    assert main([*argv, "--device", "cuda", "--eval-precision", "bf16", "--compile", "off"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        "eval_precision bf16 on cuda: this CUDA GPU has no bf16 (torch.cuda.is_bf16_supported() is "
        "False, so autocast refuses it); set eval_precision to fp16 or fp32"
    )
    assert main([*argv, "--device", "cpu", "--compile", "on"]) == 2
    assert capsys.readouterr().err.strip().endswith("--compile on: no compiler here; use --compile off")
    assert not (runs / "records").exists()
    monkeypatch.setattr(train_cmd, "check_before_training", resolved)
    for device, precision in (("cuda", "fp32"), ("cpu", "bf16")):  # auto: the run's device, not the GPU
        with pytest.raises(_Resolved, match=f"^{precision}$"):
            main([*argv, "--device", device, "--precision", "auto", "--compile", "off"])


def test_more_threads_than_cpus_is_one_warning_line(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.commands.train_cmd import warn_if_oversubscribed

    warn_if_oversubscribed(None)
    warn_if_oversubscribed(1)
    assert capsys.readouterr().err == ""
    warn_if_oversubscribed(1024)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: threads 1024 is more than the ")
