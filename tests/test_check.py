"""``harness check``: every problem in one list, exit 1; a complete setup passes (no network, seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from data_roots import make_data_root

from harness.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "tests" / "fixtures" / "specs" / "smoke_grid.toml"


@pytest.fixture
def good_root(mini_data_root: Path, tmp_path: Path) -> Path:
    return make_data_root(tmp_path / "data", mini_data_root / "senteval")


def check(root: Path, runs: Path, *extra: str) -> list[str]:
    return [
        "check",
        str(SPEC),
        "--profile",
        "smoke",
        "--data-dir",
        str(root),
        "--runs-dir",
        str(runs),
        *extra,
    ]


def test_a_complete_setup_passes_and_leaves_nothing_behind(
    good_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "new" / "runs"
    assert main(check(good_root, runs)) == 0
    out = capsys.readouterr().out
    assert "PROBLEM" not in out and "everything the grid needs is here" in out
    assert "planned: 2 distinct run(s): 0 finished, 2 to run" in out
    assert "model random:tiny" in out and "hidden size 64" in out
    assert "corpus " in out and ": 64 sentences" in out
    # smoke: 4 steps per run, probes at 0, 2 and 4
    assert "cost on random:tiny: 2 run(s), 8 optimiser step(s) and 6 STS-B dev probe(s)" in out
    assert not (tmp_path / "new").exists()  # the writability probe removed what it created


def test_every_problem_is_listed_at_once(
    good_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (good_root / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv").unlink()
    sick = good_root / "senteval" / "SICK" / "SICK_test_annotated.txt"
    sick.write_text("")
    (good_root / "corpus" / "nli-sentences.txt").write_text("one .\n\ntwo .\n" * 20)
    runs = tmp_path / "runs_is_a_file"
    runs.write_text("oops")
    assert main(check(good_root, runs)) == 1
    out = capsys.readouterr().out
    problems = [ln for ln in out.splitlines() if "PROBLEM" in ln]
    assert any("SentEval file missing:" in ln and "sts-dev.csv" in ln for ln in problems), out
    assert any("SentEval file empty:" in ln and "SICK_test_annotated.txt" in ln for ln in problems), out
    assert any("line 2 is empty" in ln for ln in problems), out
    assert any(f"runs folder {runs} is a file" in ln for ln in problems), out
    assert len(problems) == 4 and "4 problem(s)" in out


def test_a_missing_corpus_and_a_cache_less_hub_model_offline(
    good_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "empty_hf_home" / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", hf_constants.HF_HUB_OFFLINE)  # restored after
    (good_root / "corpus" / "nli-sentences.txt").unlink()
    model = "nobody/not-a-cached-model"
    assert main(check(good_root, tmp_path / "runs", "--model", model)) == 1
    out = capsys.readouterr().out
    assert "corpus file not found" in out
    assert f"model {model}: not in the local Hugging Face cache and the hub is offline" in out


def test_a_grid_holding_the_runs_folder_is_a_problem(
    good_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from harness.grid.lock import GridLock; "
            f"GridLock.of({str(runs)!r}).acquire(); print('locked', flush=True); time.sleep(120)",
        ],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert main(check(good_root, runs)) == 1
        assert f"is in use by grid pid {holder.pid}" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()
    assert main(check(good_root, runs)) == 0  # the holder is gone: its lock is stale, not a problem
    assert "stale grid lock" in capsys.readouterr().out


def test_a_grid_lock_that_is_a_folder_is_a_problem(
    good_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    (runs / "grid.lock").mkdir(parents=True)
    assert main(check(good_root, runs)) == 1
    assert f"the grid lock {runs / 'grid.lock'} is a folder, not a file" in capsys.readouterr().out


def test_an_unreachable_ray_address_is_a_problem_not_a_wait(
    good_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(check(good_root, tmp_path / "runs", "--address", "127.0.0.1:1")) == 1
    assert "no Ray head reachable there" in capsys.readouterr().out


def test_check_is_a_command() -> None:
    from harness.cli import COMMANDS, build_parser

    assert "check" in COMMANDS
    args = build_parser().parse_args(["check", "all", "--profile", "paper"])
    assert args._module.__name__ == "harness.commands.check_cmd"
