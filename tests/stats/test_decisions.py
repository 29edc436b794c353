"""harness.stats.decisions: the effect that matters, each claim's state for the grid's rounds, and
the power lines."""

from __future__ import annotations

import dataclasses
import re

import pytest

from harness.errors import ConfigError
from harness.specs.claim import Claim
from harness.stats.correction import Analysis, correct
from harness.stats.decisions import claim_states, decider, decision_of, power_lines
from harness.stats.outcomes import Effect, parse_effect
from harness.stats.paired import ClaimResult
from harness.stats.sequential import sequential_seeds_for_power
from tests.helpers import claim_result

SEQUENTIAL = Analysis(sequential=True, max_seeds=20)


def _result(spec: str, text: str, diffs: list[float], delta: float = 1.0, same_as: str = "") -> ClaimResult:
    claim = Claim(spec, f"{text} a", f"{text} b", "avg", delta, text, "P")
    return claim_result(claim, diffs, sequential=True, same_as=same_as, comparison=(text,))


def test_states() -> None:
    strong = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02]
    results = correct(
        [
            _result("t1", "strong", strong),
            _result("t1", "tiny", [0.01, -0.02, 0.015, 0.0, -0.01, 0.005, 0.01]),  # inside +-0.5
            _result("t1", "noisy", [1.0, -1.5, 2.0, -0.5, 0.3], delta=0.1),  # 0.05 needs too many
            _result("t1", "open", [0.3, 0.8, -0.1, 0.6, 0.2], delta=2.0),
            _result("t1", "new", [0.4]),
        ],
        SEQUENTIAL,
    )
    states = {s.result.claim.text: s for s in claim_states(results, SEQUENTIAL)}
    assert {k: s.state for k, s in states.items()} == {
        "strong": "decided",
        "tiny": "ruled out",
        "noisy": "not enough seeds",
        "open": "undecided",
        "new": "undecided",
    }
    # judged at its measured mean (0.26, above the effect 0.05), on the sd's lower bound (0.97)
    assert states["tiny"].detail == ""
    assert re.fullmatch(
        r"needs \d+ seeds at 0\.26 even at sd 0\.97 \(its 90% lower bound\)", states["noisy"].detail
    )
    five = dataclasses.replace(SEQUENTIAL, max_seeds=5)
    at_most = claim_states(correct(results, five), five)[3]
    assert (at_most.state, at_most.detail) == ("not enough seeds", "has all 5 seeds")
    decision = decision_of(list(states.values()))
    assert [n.label for n in decision.needs] == ["t1: open", "t1: new"]  # known needs first
    assert decision.counts == {"decided": 1, "ruled out": 1, "not enough seeds": 1, "undecided": 2}
    assert all(len(n.cells) == 2 for n in decision.needs)
    assert not any("futile" in line or "out of reach" in line for line in decision.lines)


def test_a_grid_stopped_by_its_budget_leaves_its_open_claims_short_of_seeds() -> None:
    why = "the budget (2 trial-h: the next round does not fit)"
    stopped = dataclasses.replace(SEQUENTIAL, stopped=why)
    rows = [
        _result("t1", "open", [0.3, 0.8, -0.1, 0.6, 0.2], delta=2.0),
        _result("t1", "noisy", [1.0, -1.5, 2.0, -0.5, 0.3], delta=0.1),  # beyond reach: its own reason
        _result("t1", "new", [0.4]),  # no spread yet: short of seeds for the grid's reason too
    ]
    results = correct(rows, stopped)  # the one place that says it: the claims' open outcome
    assert [r.open_outcome for r in results] == ["not enough seeds", "not enough seeds", "1 seed"]
    state, noisy, new = claim_states(results, stopped)
    assert (state.state, state.detail) == ("not enough seeds", why)
    assert state.to_json()["detail"] == why and state.to_json()["state"] == "not enough seeds"
    assert noisy.state == "not enough seeds" and noisy.detail.startswith("needs ")
    assert (new.state, new.detail) == ("not enough seeds", why)
    assert [s.state for s in claim_states(correct(rows, SEQUENTIAL), SEQUENTIAL)] == [
        "undecided",
        "not enough seeds",
        "undecided",
    ]


def test_the_grids_decider_builds_the_claims_under_its_analysis_and_stop() -> None:
    """``decide(stopped=why)``: the claims built again under the grid's analysis with the stop, so
    :func:`correct` alone turns open claims into not enough seeds."""
    seen: list[Analysis] = []

    def build(analysis: Analysis) -> list[ClaimResult]:
        seen.append(analysis)
        return correct([_result("t1", "open", [0.3, 0.8, -0.1, 0.6, 0.2], delta=2.0)], analysis)

    decide = decider(build, SEQUENTIAL)
    assert decide().counts["undecided"] == 1 and seen[-1] == SEQUENTIAL
    stopped = decide(stopped="no runs left to do up to --max-seeds")
    assert stopped.counts["not enough seeds"] == 1 and seen[-1].stopped.startswith("no runs left")


def test_not_enough_seeds_is_judged_on_the_lower_bound_of_the_sd() -> None:
    """A claim whose first five seeds happen to scatter a little more than its true spread: on the
    sample sd the sequence would need more than 20 seeds at the effect, on the sd's 90 % lower bound
    it would not, so it stays undecided (and gets the seeds that may decide it)."""
    diffs = [1.9, -0.2, 1.6, 0.1, 1.1]  # mean 0.9, sd 0.9; effect 0.9 (half a paper delta of 1.8)
    results = correct([_result("t1", "c", diffs, delta=1.8)], SEQUENTIAL)
    s = results[0].summary
    assert s.sd is not None
    assert (sequential_seeds_for_power(0.9, s.sd) or 0) > 20  # on the sample sd: beyond 20 seeds
    (state,) = claim_states(results, SEQUENTIAL)
    assert state.state == "undecided"


def test_a_repeat_open_in_another_family_keeps_the_comparison_open() -> None:
    # decided in t1 alone; in t2 beside two claims of larger p, Holm leaves it open
    shaky = [0.48, 1.04, 0.06, 0.76, 0.62, 0.34, 0.9, 0.2]  # anytime p = 0.032
    first = _result("t1", "x", shaky)
    rows = [first, _result("t2", "x", shaky, same_as="t1: x"), _result("t2", "y", [0.3, -0.2, 0.4, 0.1, 0.2])]
    results = correct(rows, SEQUENTIAL)
    assert [r.corrected_verdict for r in results[:2]] == ["holds", "inconclusive"]
    assert claim_states(results, SEQUENTIAL)[0].state == "undecided"
    alone = correct(rows[:1], SEQUENTIAL)
    assert claim_states(alone, SEQUENTIAL)[0].state == "decided"


def test_parse_effect() -> None:
    assert parse_effect("50%").share == 0.5 and parse_effect("0.2").points == 0.2
    assert Effect(points=0.2, share=None).text == "0.2 points"
    assert Effect().text == "50% of the paper's delta"
    for effect in (Effect(), Effect(points=0.3, share=None), Effect(share=0.125)):
        assert (
            parse_effect(effect.text) == effect == parse_effect(effect.argument)
        )  # as sequential.json has it
    for bad in ("0", "-3", "abc", "0%", "2000%", "nan"):
        with pytest.raises(ConfigError, match="--effect"):
            parse_effect(bad)


def test_power_lines_name_the_test_and_each_undecided_claim() -> None:
    results = correct(
        [_result("t1", "open", [0.3, 0.8, -0.1, 0.6, 0.2], delta=2.0), _result("t1", "new", [0.4])]
    )
    lines = power_lines(results, Effect(), Analysis())
    assert lines[0].startswith("seeds for 80% power (the paired t-test")
    assert "t1: open" in lines[1] and "paper delta +2.00" in lines[1] and "effect 1.00" in lines[1]
    assert "no spread yet" in lines[2]
    assert power_lines(results, Effect(), SEQUENTIAL)[0].startswith("seeds for 80% power (the anytime-valid")
