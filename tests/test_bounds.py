"""Bounds and early checks of every numeric option and ``HARNESS_*`` setting: one error line, exit 2,
before any plan is printed; a misspelt ``--runs-dir`` writes nothing; an empty one is said."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from data_roots import make_data_root

import harness.run.checkpoint as ckpt
from harness.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "tests" / "fixtures" / "specs" / "smoke_grid.toml"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_data_root(tmp_path / "data")


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``: exit 2, nothing on stdout (no plan), one error line; that line."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out[:500]
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def grid(root: Path, tmp_path: Path, *flags: str) -> list[str]:
    return [
        "grid",
        str(SPEC),
        "--smoke",
        "--data-dir",
        str(root),
        "--runs-dir",
        str(tmp_path / "runs"),
        *flags,
    ]


def check(root: Path, tmp_path: Path, *flags: str) -> list[str]:
    return [
        "check",
        str(SPEC),
        "--profile",
        "smoke",
        "--data-dir",
        str(root),
        "--runs-dir",
        str(tmp_path / "r"),
        *flags,
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--seeds", "100000000"], "--seeds must be at most 1000, got 100000000: each seed is a whole run"),
        (["--seeds", "0"], "--seeds must be >= 1, got 0"),
        (["--cpus-per-trial", "0"], "--cpus-per-trial must be >= 1, got 0"),
        (["--cpus-per-trial", "-2"], "--cpus-per-trial must be >= 1, got -2"),
        (["--gpus-per-trial", "-1"], "--gpus-per-trial must be finite and >= 0, got -1.0"),
        (["--threads", "0"], "--threads must be >= 1, got 0"),
        (["--threads", "100000"], "--threads must be at most 1024"),
    ],
)
def test_grid_and_check_refuse_out_of_range_options_before_any_plan(
    flags: list[str], message: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.perf_counter()
    assert message in refused(grid(root, tmp_path, *flags, "--dry-run"), capsys)
    assert message in refused(grid(root, tmp_path, *flags), capsys)
    assert message in refused(check(root, tmp_path, *flags), capsys)
    assert time.perf_counter() - t0 < 30  # not hours of planning
    assert not (tmp_path / "runs").exists() and not (tmp_path / "r").exists()


def test_the_largest_seed_count_is_still_planned(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(grid(root, tmp_path, "--seeds", "1000", "--dry-run")) == 0
    assert "2000 distinct runs" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["oops", "-5", "nan", "inf"])
def test_a_bad_checkpoint_interval_in_the_environment_is_one_line(
    value: str,
    root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ckpt.EVERY_ENV, value)
    message = "HARNESS_CHECKPOINT_EVERY_S must be a number of seconds >= 0 (0 = at every evaluation)"
    message += f", got {value!r}"
    assert message in refused(grid(root, tmp_path, "--dry-run"), capsys)
    assert message in refused(check(root, tmp_path), capsys)
    train = ["train", "--profile", "smoke", "--data-dir", str(root), "--output-dir", str(tmp_path / "t")]
    assert message in refused(train, capsys)
    assert not (tmp_path / "t").exists()


def test_a_good_checkpoint_interval_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ckpt.EVERY_ENV, " 0 ")
    assert ckpt.every_from_env(strict=True) == 0.0
    monkeypatch.setenv(ckpt.EVERY_ENV, "")
    assert ckpt.every_from_env(strict=True) == ckpt.DEFAULT_EVERY_S


@pytest.mark.parametrize("command", ["tables", "claims", "plots", "report"])
def test_a_misspelt_runs_folder_writes_nothing(
    command: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    earlier = results / "tables" / "tables.md"
    earlier.write_text("the tables of last night\n")
    missing = tmp_path / "rnus"
    out = {"tables": results / "tables", "claims": results / "claims", "plots": results / "plots"}
    argv = [command, *([] if command == "plots" else [str(SPEC)]), "--profile", "smoke"]
    argv += ["--data-dir", str(root), "--runs-dir", str(missing)]
    argv += ["--results", str(results)] if command == "report" else ["--out", str(out[command])]
    line = refused(argv, capsys)
    assert line == (
        f"harness {command}: error: runs folder {missing} does not exist (is --runs-dir spelt right?): "
        "nothing written"
    )
    assert earlier.read_text() == "the tables of last night\n"
    assert sorted(p.name for p in results.rglob("*")) == ["tables", "tables.md"]
    assert not missing.exists()


def test_a_runs_folder_without_records_is_said_on_one_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    argv = ["tables", str(SPEC), "--profile", "smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*argv, "--out", str(tmp_path / "tables")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: runs folder {runs} holds no run records: every cell shows --"]
