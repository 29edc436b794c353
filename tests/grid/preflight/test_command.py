"""``harness check``: every problem in one list, exit 1; a complete setup passes (no network, seconds).

The pre-flight reads every file the runs will read and lists each bad line as ``file:line``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers import STS15, STSB_DEV, check_argv, replace_line
from tests.processes import holding_grid_lock


def test_a_complete_setup_passes_and_leaves_nothing_behind(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "new" / "runs"
    assert main(check_argv(copied_root, runs)) == 0
    out = capsys.readouterr().out
    assert "PROBLEM" not in out and "everything the grid needs is here" in out
    assert "planned: 2 distinct run(s): 0 finished, 2 to run" in out
    assert "model random:tiny" in out and "hidden size 64" in out
    assert "corpus " in out and ": 64 sentences" in out
    # smoke: 4 steps per run, dev evaluations at 0, 2 and 4
    assert "cost on random:tiny: 2 run(s), 8 optimiser step(s) and 6 STS-B dev evaluation(s)" in out
    assert not (tmp_path / "new").exists()  # the writability test removed what it created


def test_every_problem_is_listed_at_once(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (copied_root / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv").unlink()
    sick = copied_root / "senteval" / "SICK" / "SICK_test_annotated.txt"
    sick.write_text("")
    (copied_root / "corpus" / "nli-sentences.txt").write_text("one .\n\ntwo .\n" * 20)
    runs = tmp_path / "runs_is_a_file"
    runs.write_text("oops")
    assert main(check_argv(copied_root, runs)) == 1
    out = capsys.readouterr().out
    problems = [ln for ln in out.splitlines() if "PROBLEM" in ln]
    assert any("SentEval file missing:" in ln and "sts-dev.csv" in ln for ln in problems), out
    assert any("SentEval file empty:" in ln and "SICK_test_annotated.txt" in ln for ln in problems), out
    assert any("line 2 is empty" in ln for ln in problems), out
    assert any(f"runs folder {runs} is a file" in ln for ln in problems), out
    assert len(problems) == 4 and "4 problem(s)" in out


def test_a_missing_corpus_and_a_cache_less_hub_model_offline(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "empty_hf_home" / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", hf_constants.HF_HUB_OFFLINE)  # restored after
    (copied_root / "corpus" / "nli-sentences.txt").unlink()
    model = "nobody/not-a-cached-model"
    assert main(check_argv(copied_root, tmp_path / "runs", "--model", model)) == 1
    out = capsys.readouterr().out
    assert "corpus file not found" in out
    assert f"model {model}: not in the local Hugging Face cache and the hub is offline" in out


def test_a_grid_holding_the_runs_folder_is_a_problem(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    with holding_grid_lock(runs) as holder:
        assert main(check_argv(copied_root, runs)) == 1
        assert f"is in use by grid pid {holder.pid}" in capsys.readouterr().out
    assert main(check_argv(copied_root, runs)) == 0  # the holder is gone: its lock is stale, not a problem
    assert "stale grid lock" in capsys.readouterr().out


def test_a_grid_lock_that_is_a_folder_is_a_problem(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    (runs / "grid.lock").mkdir(parents=True)
    assert main(check_argv(copied_root, runs)) == 1
    assert f"the grid lock {runs / 'grid.lock'} is a folder, not a file" in capsys.readouterr().out


def check_problems(copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(check_argv(copied_root, tmp_path / "runs")) == 1
    return [
        ln.split("PROBLEM", 1)[1].strip() for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln
    ]


def test_check_reads_every_file_and_lists_each_problem_with_its_line(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    senteval = copied_root / "senteval"
    gold = senteval / STS15 / "STS.gs.headlines.txt"
    lines = gold.read_text(encoding="utf-8").splitlines()
    gold.write_text("\n".join(lines[:-10]) + "\n", encoding="utf-8")  # 10 lines short of its input
    replace_line(senteval / STSB_DEV, 7, "a line without tabs")
    replace_line(senteval / STS15 / "STS.gs.belief.txt", 2, "nan")
    replace_line(senteval / "STS" / "STS12-en-test" / "STS.gs.MSRpar.txt", 5, "5.5")
    problems = check_problems(copied_root, tmp_path, capsys)
    assert len(problems) == 4, problems
    assert any(p.startswith(f"{gold}:{len(lines) - 10}: ") for p in problems), problems
    assert any(
        p.startswith(f"{senteval / STSB_DEV}:7: expected at least 7 tab-separated fields") for p in problems
    )
    assert any(
        p.startswith(f"{senteval / STS15 / 'STS.gs.belief.txt'}:2: gold score 'nan'") for p in problems
    )
    assert any("STS.gs.MSRpar.txt:5: gold score 5.5 is outside STS12's range 0..5" in p for p in problems)
