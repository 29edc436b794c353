"""harness.reporting.decisions: the effect that matters, each claim's state for the grid's rounds, and
the power lines."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.reporting.correction import Analysis, correct
from harness.reporting.decisions import Effect, claim_states, decision_of, parse_effect, power_lines
from harness.reporting.sequential import sequential_summary
from harness.reporting.statistics import ClaimResult, pair_by_seed
from harness.specs.claim import Claim

SEQUENTIAL = Analysis(sequential=True)


def _result(spec: str, text: str, diffs: list[float], delta: float = 1.0, same_as: str = "") -> ClaimResult:
    paired = pair_by_seed(dict(enumerate(diffs)), dict.fromkeys(range(len(diffs)), 0.0))
    claim = Claim(spec, f"{text} a", f"{text} b", "avg", delta, text, "P")
    return ClaimResult(claim, paired, sequential_summary(paired.diffs), same_as=same_as, comparison=(text,))


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
    states = {s.result.claim.text: s for s in claim_states(results, Effect(), 20, SEQUENTIAL)}
    assert {k: s.state for k, s in states.items()} == {
        "strong": "decided",
        "tiny": "futile",
        "noisy": "futile",
        "open": "undecided",
        "new": "undecided",
    }
    assert states["tiny"].why == "ruled out" and states["noisy"].why == "out of reach"
    assert claim_states(results, Effect(), 5, SEQUENTIAL)[3].state == "max seeds"
    decision = decision_of(list(states.values()))
    assert [n.label for n in decision.needs] == ["t1: open", "t1: new"]  # known needs first
    assert decision.counts == {"decided": 1, "futile": 2, "undecided": 2}
    assert all(len(n.cells) == 2 for n in decision.needs)


def test_a_repeat_open_in_another_family_keeps_the_comparison_open() -> None:
    # decided in t1 alone; in t2 beside two claims of larger p, Holm leaves it open
    shaky = [0.48, 1.04, 0.06, 0.76, 0.62, 0.34, 0.9, 0.2]  # anytime p = 0.032
    first = _result("t1", "x", shaky)
    rows = [first, _result("t2", "x", shaky, same_as="t1: x"), _result("t2", "y", [0.3, -0.2, 0.4, 0.1, 0.2])]
    results = correct(rows, SEQUENTIAL)
    assert [r.corrected_verdict for r in results[:2]] == ["holds", "inconclusive"]
    assert claim_states(results, Effect(), 20, SEQUENTIAL)[0].state == "undecided"
    alone = correct(rows[:1], SEQUENTIAL)
    assert claim_states(alone, Effect(), 20, SEQUENTIAL)[0].state == "decided"


def test_parse_effect() -> None:
    assert parse_effect("50%").share == 0.5 and parse_effect("0.2").points == 0.2
    assert Effect(points=0.2, share=None).text == "0.2 points"
    assert Effect().text == "50% of the paper's delta"
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
