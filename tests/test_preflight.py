"""The pre-flight reads every file the runs will read: ``harness check`` lists each bad line as
``file:line``, a grid stops before Ray starts, and the readers refuse gold scores that are not finite
or lie outside the task's range (``harness eval`` exits 2 with one line)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from data_roots import make_data_root

from harness.cli import main
from harness.errors import DataError
from harness.evaluation import tasks
from harness.evaluation.readers import StsPairs, TsvPairs, check_gold_range, read_subset_files
from harness.evaluation.tasks import STS_REGISTRY, data_problems

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "tests" / "fixtures" / "specs" / "smoke_grid.toml"
STS15 = Path("STS") / "STS15-en-test"
STSB_DEV = Path("STS") / "STSBenchmark" / "sts-dev.csv"


@pytest.fixture
def root(mini_data_root: Path, tmp_path: Path) -> Path:
    return make_data_root(tmp_path / "data", mini_data_root / "senteval")


def replace_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def check_problems(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    args = ["check", str(SPEC), "--profile", "smoke", "--data-dir", str(root)]
    assert main([*args, "--runs-dir", str(tmp_path / "runs")]) == 1
    return [
        ln.split("PROBLEM", 1)[1].strip() for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln
    ]


# -- readers -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity"])
def test_the_readers_refuse_gold_scores_that_are_not_finite(value: str, root: Path) -> None:
    senteval = root / "senteval"
    gold = senteval / STS15 / "STS.gs.belief.txt"
    replace_line(gold, 3, value)
    with pytest.raises(DataError, match=rf"STS.gs.belief.txt:3: gold score '{value}' is not a finite number"):
        read_subset_files((senteval / STS15 / "STS.input.belief.txt", gold), "belief")
    dev = senteval / STSB_DEV
    fields = dev.read_text(encoding="utf-8").split("\n")[4].split("\t")
    fields[4] = value
    replace_line(dev, 5, "\t".join(fields))
    with pytest.raises(DataError, match=rf"sts-dev.csv:5: gold score '{value}' is not a finite number"):
        TsvPairs(gold_field=4, sent_fields=(5, 6))([dev], "dev")


def test_a_gold_score_outside_the_task_range_is_named_by_file_and_line(root: Path) -> None:
    senteval = root / "senteval"
    sick = senteval / "SICK" / "SICK_test_annotated.txt"
    fields = sick.read_text(encoding="utf-8").split("\n")[2].split("\t")
    fields[3] = "0.5"  # SICK-R is scored 1..5
    replace_line(sick, 3, "\t".join(fields))
    with pytest.raises(
        DataError, match=r"SICK_test_annotated.txt:3: gold score 0.5 is outside SICKRelatedness's range 1..5"
    ):
        STS_REGISTRY["SICKRelatedness"].read(senteval)
    gold = senteval / STS15 / "STS.gs.images.txt"
    replace_line(gold, 4, "7")
    replace_line(gold, 6, "-1")
    # the subset is sorted before scoring: the line named is still the file's own
    with pytest.raises(
        DataError, match=r"STS.gs.images.txt:(4|6): gold score (7|-1) is outside STS15's range 0..5 \(1 more"
    ):
        STS_REGISTRY["STS15"].read(senteval)
    assert STS_REGISTRY["STS15"].gold_range == (0.0, 5.0)
    assert STS_REGISTRY["STSBenchmark"].gold_range == (0.0, 5.0)


def test_the_range_check_without_line_numbers_names_the_pair() -> None:
    pairs = StsPairs("dev", ("a",), ("b",), np.array([9.0]))
    with pytest.raises(DataError, match=r"X dev pair 1: gold score 9 is outside X's range 0..5"):
        check_gold_range(pairs, 0.0, 5.0, "X")
    check_gold_range(pairs, 0.0, 9.0, "X")


def test_a_gold_file_shorter_than_its_input_names_where_it_ends(root: Path) -> None:
    senteval = root / "senteval"
    gold = senteval / STS15 / "STS.gs.headlines.txt"
    lines = gold.read_text(encoding="utf-8").splitlines()
    gold.write_text("\n".join(lines[:-10]) + "\n", encoding="utf-8")
    with pytest.raises(
        DataError,
        match=rf"STS.gs.headlines.txt:{len(lines) - 10}: .* has {len(lines)} lines but "
        rf".* has {len(lines) - 10}; they must pair up",
    ):
        STS_REGISTRY["STS15"].read(senteval)


# -- harness check ---------------------------------------------------------------------------------
def test_check_reads_every_file_and_lists_each_problem_with_its_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    senteval = root / "senteval"
    gold = senteval / STS15 / "STS.gs.headlines.txt"
    lines = gold.read_text(encoding="utf-8").splitlines()
    gold.write_text("\n".join(lines[:-10]) + "\n", encoding="utf-8")  # 10 lines short of its input
    replace_line(senteval / STSB_DEV, 7, "a line without tabs")
    replace_line(senteval / STS15 / "STS.gs.belief.txt", 2, "nan")
    replace_line(senteval / "STS" / "STS12-en-test" / "STS.gs.MSRpar.txt", 5, "5.5")
    problems = check_problems(root, tmp_path, capsys)
    assert len(problems) == 4, problems
    assert any(p.startswith(f"{gold}:{len(lines) - 10}: ") for p in problems), problems
    assert any(
        p.startswith(f"{senteval / STSB_DEV}:7: expected at least 7 tab-separated fields") for p in problems
    )
    assert any(
        p.startswith(f"{senteval / STS15 / 'STS.gs.belief.txt'}:2: gold score 'nan'") for p in problems
    )
    assert any("STS.gs.MSRpar.txt:5: gold score 5.5 is outside STS12's range 0..5" in p for p in problems)


def test_check_passes_the_real_data_and_a_second_read_is_remembered(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_parts: list[str] = []
    real = tasks.StsTask.read_part

    def counting(self: tasks.StsTask, senteval: Path, part: tasks.StsPart) -> StsPairs:
        read_parts.append(f"{self.name}/{part.name}")
        return real(self, senteval, part)

    monkeypatch.setattr(tasks.StsTask, "read_part", counting)
    monkeypatch.setattr(tasks, "_READ_OK", set())
    senteval = root / "senteval"
    count, problems = data_problems(senteval, ["sts"])
    assert problems == [] and count == len(read_parts) == 1 + sum(
        len(t.parts_for()) for t in STS_REGISTRY.values()
    )
    assert data_problems(senteval, ["sts"]) == (count, [])
    assert len(read_parts) == count  # nothing read again
    gold = senteval / STS15 / "STS.gs.images.txt"
    replace_line(gold, 2, "oops")  # a changed file is read again
    count, problems = data_problems(senteval, ["sts"])
    assert problems == [f"{gold}:2: gold score 'oops' is not a number"]
    assert data_problems(senteval, ["none"])[0] == 1  # the STS-B dev probe only


# -- a grid stops before Ray starts; eval exits 2 with one line ------------------------------------
def test_a_grid_stops_before_ray_when_a_data_file_is_bad(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replace_line(root / "senteval" / STSB_DEV, 3, "x\ty")
    runs = tmp_path / "runs"
    assert main(["grid", str(SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert f"harness grid: data problem: {root / 'senteval' / STSB_DEV}:3: expected at least 7" in err
    assert "1 data file problem(s) above: nothing was run" in err and "Traceback" not in err
    assert not (runs / "records").exists() and not (runs / "ray").exists()
    assert not (runs / "grid.lock").exists()


def test_eval_refuses_a_nan_gold_score_with_one_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replace_line(root / "senteval" / STS15 / "STS.gs.answers-forums.txt", 2, "nan")
    output = tmp_path / "out.json"
    args = [
        "eval",
        "--model",
        "random:tiny",
        "--tasks",
        "sts",
        "--data-dir",
        str(root),
        "--output",
        str(output),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "STS.gs.answers-forums.txt:2: gold score 'nan' is not a finite number" in err[0]
    assert not output.exists()
