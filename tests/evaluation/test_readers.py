"""The SentEval readers: gold scores that are not finite or lie outside the task's range are named by
file and line; the sort before embedding is stable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.errors import DataError
from harness.evaluation.readers import (
    StsPairs,
    TextSplit,
    TsvPairs,
    check_gold_range,
    read_subset_files,
    sort_split,
)
from harness.evaluation.tasks import STS_REGISTRY
from tests.helpers import STS15, STSB_DEV, replace_line


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity"])
def test_the_readers_refuse_gold_scores_that_are_not_finite(value: str, copied_root: Path) -> None:
    senteval = copied_root / "senteval"
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


def test_a_sick_file_without_its_header_is_refused_not_short_of_a_pair(copied_root: Path) -> None:
    sick = copied_root / "senteval" / "SICK" / "SICK_trial.txt"
    reader = STS_REGISTRY["SICKRelatedness"].reader
    lines = sick.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(reader([sick], "dev")) == len(lines) - 1
    sick.write_text("".join(lines[1:]), encoding="utf-8")
    with pytest.raises(
        DataError, match=r"SICK_trial\.txt:1: expected the header line \(column names\), found"
    ):
        reader([sick], "dev")


def test_a_gold_score_outside_the_task_range_is_named_by_file_and_line(copied_root: Path) -> None:
    senteval = copied_root / "senteval"
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


def test_a_gold_file_shorter_than_its_input_names_where_it_ends(copied_root: Path) -> None:
    senteval = copied_root / "senteval"
    gold = senteval / STS15 / "STS.gs.headlines.txt"
    lines = gold.read_text(encoding="utf-8").splitlines()
    gold.write_text("\n".join(lines[:-10]) + "\n", encoding="utf-8")
    with pytest.raises(
        DataError,
        match=rf"STS.gs.headlines.txt:{len(lines) - 10}: .* has {len(lines)} lines but "
        rf".* has {len(lines) - 10}; they must pair up",
    ):
        STS_REGISTRY["STS15"].read(senteval)


def test_sort_is_stable_by_length_then_label() -> None:
    split = TextSplit(
        (
            [
                ["a", "b"],
                ["c"],
                ["d", "e"],
                ["f"],
                ["g", "h"],
                [],
            ],
        ),
        np.array([1, 1, 0, 0, 1, 1]),
    )
    ordered = sort_split(split)
    assert ordered.columns[0] == [[], ["f"], ["c"], ["d", "e"], ["a", "b"], ["g", "h"]]
    assert ordered.labels.tolist() == [1, 0, 1, 0, 1, 1]


def test_pair_sort_uses_both_lengths_then_label() -> None:
    a = [["x"], ["x"], ["x", "y"], ["x"]]
    b = [["p", "q"], ["p"], ["p"], ["p", "q"]]
    ordered = sort_split(TextSplit((a, b), np.array([1, 0, 0, 0])))
    assert ordered.columns[1] == [["p"], ["p", "q"], ["p", "q"], ["p"]]
    assert ordered.labels.tolist() == [0, 0, 1, 0]
