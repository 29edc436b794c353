"""``harness grid --dry-run``: the plan, the estimate and the makespan it prints, with and without the
corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main


def test_grid_command_dry_run(corpus_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    args = [
        "grid",
        "whitenedcse_table4",
        "--profile",
        "cpu",
        "--runs-dir",
        str(runs),
        "--data-dir",
        str(corpus_root),
    ]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "16 distinct runs" in out and "0 finished, 16 to run" in out
    assert re.search(r"whitenedcse_table4 +16 run\(s\) +[0-9.]+ CPU-trial-h", out)
    assert "makespan, longest first:" in out
    assert main(["grid", "no_such_spec", "--dry-run", "--data-dir", str(corpus_root)]) == 2
    assert main([*args, "--dry-run", "--override", "bad"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_dry_run_and_check_plan_without_the_corpus(
    corpus_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    common = ["--profile", "paper", "--runs-dir", str(tmp_path / "runs"), "--data-dir", str(corpus_root)]
    assert main(["grid", "whitenedcse_table3", *common, "--dry-run"]) == 0  # wiki1m is not there
    out = capsys.readouterr().out
    assert "wiki1m_for_simcse.txt not found: run ids below are provisional" in out
    assert "5 distinct runs" in out
    assert main(["grid", "whitenedcse_table3", *common]) == 2  # training needs the corpus
    assert "wiki1m_for_simcse.txt" in capsys.readouterr().err
    assert main(["check", "whitenedcse_table3", *common]) == 1
    text = capsys.readouterr()
    assert "planned: 5 distinct run(s)" in text.out + text.err and "wiki1m" in text.out + text.err


def test_the_dry_run_stops_where_the_grid_would_on_a_records_file(
    corpus_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # records/ as a file: every run shows as to do, yet the grid could write none of them
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "records").write_text("not a folder")
    args = ["grid", "whitenedcse_table4", "--profile", "cpu", "--runs-dir", str(runs)]
    assert main([*args, "--data-dir", str(corpus_root), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert "distinct runs" not in out
    records = runs / "records"
    assert err == (
        f"harness grid: error: records folder {records}: {records} is a file, not a folder: remove it or "
        "choose another folder; nothing was run\n"
    )
