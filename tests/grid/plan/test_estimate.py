"""The grid's schedule and printed estimate: LPT makespan, longest runs first, the ``--dry-run``
lines per table and the whole grid from scratch."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.grid.plan.cost import CostModel
from harness.grid.plan.estimate import estimate_lines, hours, longest_first, makespan, scratch_line
from tests.grid.plan.test_cost import cpu


def test_makespan_is_longest_first_list_scheduling() -> None:
    assert makespan([], 2) == 0.0
    assert makespan([5.0, 1.0, 1.0, 1.0], 1) == 8.0
    assert makespan([5.0, 1.0, 1.0, 1.0], 2) == 5.0  # the long job alone on one slot
    # LPT's textbook worst case: {3, 2, 2} and {3, 2} = 7, where {3, 3} and {2, 2, 2} = 6 is optimal
    assert makespan([3.0, 3.0, 2.0, 2.0, 2.0], 2) == 7.0
    assert makespan([4.0, 4.0], 8) == 4.0
    with pytest.raises(ValueError, match="slots"):
        makespan([1.0], 0)


def test_longest_runs_start_first_and_the_estimate_names_tables(data_root: Path) -> None:
    model = CostModel()
    short = cpu(data_root, max_steps=0)
    long = cpu(data_root, "noise_probe", {"variant": "pos_minus_noise"})
    mid = cpu(data_root)
    assert longest_first([short, mid, long], model) == [long, mid, short]
    lines = estimate_lines(
        [(short, ["t1: a"]), (mid, ["t1: b", "t2: b"]), (long, ["t2: c"])], model, local_slots=2
    )
    text = "\n".join(lines)
    assert "t1" in text and "t2" in text and "3 run(s)" in text
    assert "2 slot(s)" in text and "(here)" in text
    expected = makespan([model.run_seconds(c) for c in (short, mid, long)], 2)
    assert f"{expected / 3600:.1f} h" in text or f"{expected / 60:.0f} min" in text
    assert estimate_lines([], model, local_slots=2) == ["estimate: nothing to run"]


def test_the_scratch_line_estimates_every_run(data_root: Path) -> None:
    model = CostModel()
    runs = [
        cpu(data_root, max_steps=0),
        cpu(data_root),
        cpu(data_root, "noise_probe", {"variant": "pos_minus_noise"}),
    ]
    seconds = [model.run_seconds(c) for c in runs]
    line = scratch_line(runs, model, 2)
    assert "3 distinct runs" in line and f"{sum(seconds) / 3600:.2f} CPU-trial-h" in line
    assert f"about {hours(makespan(seconds, 2))} on 2 slot(s)" in line
