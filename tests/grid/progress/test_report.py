"""The grid's progress lines (no Ray): evaluation points, the 30-second heartbeat, the cost model's ETA."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.grid.progress.report as progress
from harness.grid.plan.estimate import makespan
from harness.grid.progress.report import GridProgress
from harness.store.run_store import RunStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeConfig:
    def __init__(self, run_id: str) -> None:
        self.id = run_id

    def run_id(self) -> str:
        return self.id


def point(step: int, total: int = 100, dev: float = 50.0) -> dict[str, object]:
    return {"run_id": "x", "status": "running", "step": step, "total_steps": total, "stsb_dev": dev}


def eta_of(line: str) -> str:
    return line.split("ETA ")[1].split(" ")[0]


def test_the_eta_comes_from_the_estimates_and_stays_steady(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "ensure_failed_record", lambda store, config, reason: None)
    clock = Clock()
    lines: list[str] = []
    estimates = {"a": 600.0, "b": 600.0, "c": 600.0, "d": 600.0}
    shares = dict.fromkeys(estimates, 1.0)  # no final evaluation: steps are the whole run
    grid = GridProgress(4, RunStore(tmp_path), lines.append, estimates, 2, clock, steps_shares=shares)
    assert grid.eta_s() == makespan(list(estimates.values()), 2) == 1200.0  # before anything ran
    grid.trial_started("a")
    grid.trial_started("b")
    assert eta_of(lines[-1]) == "20m00s"
    # both run twice as slowly as estimated: at every point the ETA says so, the same each time
    etas: list[float] = []
    for step in (25, 50, 75):
        clock.now += 300.0
        grid.trial_result("a", point(step))
        grid.trial_result("b", point(step))
        etas.append(grid.eta_s() or 0.0)
        clock.now += 60.0  # between evaluation points the ETA counts down with the clock
        assert grid.eta_s() == pytest.approx(etas[-1] - 60.0)
        clock.now -= 60.0
    assert etas[0] == pytest.approx(etas[1] + 300.0) and etas[1] == pytest.approx(etas[2] + 300.0)
    assert etas[2] == pytest.approx(2 * (600 * 0.25 + 600))  # a quarter of a and b left, then c and d
    # the first run ending does not make the ETA jump (it is not elapsed / ended x remaining)
    clock.now += 300.0
    before = grid.eta_s()
    assert before is not None
    grid.trial_finished("a", {"work_s": 1200.0, "best_stsb_dev": 60.0})
    after = grid.eta_s()
    assert "finished a (STS-B dev 60.00, 1200.0 s)" in lines[-1]
    assert after == pytest.approx(before)  # not elapsed / ended x remaining (3600 s here)
    # a failed run leaves nothing to wait for: b's final evaluation and d (at the pace so far)
    grid.trial_started("c")
    grid.trial_failed(FakeConfig("c"), "boom")  # type: ignore[arg-type]
    assert grid.eta_s() == pytest.approx(max(2 * 600 * (1 - progress.LAST_SHARE), 2 * 600))


def test_without_estimates_the_eta_extrapolates_from_ended_trials(tmp_path: Path) -> None:
    clock = Clock()
    lines: list[str] = []
    grid = GridProgress(3, RunStore(tmp_path), lines.append, clock=clock)
    grid.trial_started("a")
    assert "ETA" not in lines[-1]
    clock.now += 60.0
    grid.trial_finished("a", {})
    assert eta_of(lines[-1]) == "2m00s"


def test_evaluation_points_and_a_heartbeat_while_runs_train(tmp_path: Path) -> None:
    clock = Clock()
    lines: list[str] = []
    grid = GridProgress(1, RunStore(tmp_path), lines.append, {"a": 100.0}, clock=clock)
    grid.trial_started("a")
    clock.now += progress.POINT_GAP_S - 1
    grid.trial_result("a", point(10, dev=48.0))
    assert len(lines) == 1  # too soon after the last line
    clock.now += 1
    grid.trial_result("a", point(20, dev=51.25))
    assert lines[-1].endswith("| a step 20/100, STS-B dev 51.25")
    grid.trial_result("a", {"run_id": "a", "status": "finished", "work_s": 3.0})  # the final report
    assert len(lines) == 2
    grid.tick()
    assert len(lines) == 2
    clock.now += progress.HEARTBEAT_S
    grid.tick()
    assert lines[-1].endswith("| running: a step 20/100, STS-B dev 51.25")
    assert lines[-1].startswith("[0/1] done 0, running 1, failed 0, remaining 1, ETA ")
    grid.trial_finished("a", {"work_s": 3.0})
    clock.now += progress.HEARTBEAT_S
    grid.tick()  # nothing runs: no heartbeat
    assert lines[-1].startswith("[1/1] done 1, running 0, failed 0, remaining 0 (")


def test_the_final_evaluation_after_the_last_step_is_still_to_wait_for(tmp_path: Path) -> None:
    clock = Clock()
    lines: list[str] = []
    grid = GridProgress(
        1, RunStore(tmp_path), lines.append, {"a": 400.0}, clock=clock, steps_shares={"a": 0.25}
    )
    grid.trial_started("a")
    clock.now += 100.0
    grid.trial_result("a", point(100, total=100))  # the steps took what the cost model said
    assert grid.eta_s() == pytest.approx(300.0)  # the final tasks: three quarters of the estimate
    clock.now += 500.0  # long past the estimate: at least the final evaluation is left, never 0
    assert grid.eta_s() == pytest.approx(300.0)
    grid.tick()  # the heartbeat says what the run is doing after its last step
    assert lines[-1].endswith("| running: a step 100/100, STS-B dev 50.00, final evaluation")


def test_a_resumed_run_counts_only_what_it_had_left(tmp_path: Path) -> None:
    """A run resumed from its checkpoint reports the point it resumed from first: its estimate's
    rest is what is left of it, and its time does not make the grid look faster than it is."""
    clock = Clock()
    lines: list[str] = []
    estimates, shares = {"a": 400.0, "b": 400.0}, {"a": 0.25, "b": 0.25}
    grid = GridProgress(2, RunStore(tmp_path), lines.append, estimates, 1, clock, steps_shares=shares)
    grid.trial_started("a")
    clock.now += 10.0
    resumed = {**point(100, total=100), "resumed_from_step": 100}  # after its last step: final tasks left
    grid.trial_result("a", resumed)
    assert grid.eta_s() == pytest.approx(300.0 + 400.0)
    clock.now += 290.0
    grid.trial_finished("a", {"work_s": 300.0})  # as long as its rest was estimated to take
    assert grid.eta_s() == pytest.approx(400.0)  # b at the estimates' pace, not at 300 / 400 of it
    grid.trial_started("b")
    grid.trial_result("b", point(0))
    clock.now += 50.0
    grid.trial_result("b", point(50))  # half its steps in half their estimated 100 s
    assert grid.eta_s() == pytest.approx(400.0 - 50.0)  # the pace so far: a's rest and b's steps, both 1x
