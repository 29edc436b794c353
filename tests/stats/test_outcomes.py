"""harness.stats.outcomes: the words for a claim that is not decided, the same in every output."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from harness.errors import ConfigError
from harness.reporting.claims import render_markdown, to_json
from harness.specs.claim import Claim
from harness.stats.correction import Analysis, correct, correct_json_rows
from harness.stats.outcomes import Effect, open_outcome, parse_effect, ruled_out
from harness.stats.paired import ClaimResult, summarise
from harness.stats.sequential import sequential_summary
from tests.helpers import claim_result

TIGHT = [0.01, -0.02, 0.015, 0.0, -0.01, 0.005, 0.01]
NOISY = [1.0, -1.5, 2.0, -0.5, 0.3]
OPEN = [0.3, 0.8, -0.1, 0.6, 0.2]


def _result(text: str, diffs: list[float], delta: float, sequential: bool) -> ClaimResult:
    claim = Claim("t1", f"{text} a", f"{text} b", "avg", delta, text, "P", pair=f"{text} a > {text} b")
    return claim_result(claim, diffs, sequential=sequential, comparison=(text,))


def test_the_words_with_fixed_seeds_and_with_seeds_added_until_decided() -> None:
    fixed = summarise(TIGHT)
    assert ruled_out(fixed, 0.5) and not ruled_out(fixed, 0.01) and not ruled_out(fixed, 0.0)
    assert open_outcome(fixed, 0.5) == "ruled out"
    assert open_outcome(summarise(OPEN), 0.5) == "inconclusive"  # fixed seeds: nothing still running
    assert open_outcome(sequential_summary(OPEN), 1.0, max_seeds=20) == "undecided"
    assert open_outcome(sequential_summary(NOISY), 0.05, max_seeds=20) == "not enough seeds"
    assert open_outcome(sequential_summary(OPEN), 1.0, max_seeds=5) == "not enough seeds"  # has them all
    assert open_outcome(summarise([0.4]), 1.0, max_seeds=20) == "1 seed"


def test_every_output_says_ruled_out_not_enough_seeds_and_undecided() -> None:
    analysis = Analysis(sequential=True, max_seeds=20)
    results = correct(
        [
            _result("tight", TIGHT, 1.0, True),
            _result("noisy", NOISY, 0.1, True),
            _result("open", OPEN, 2.0, True),
            _result("strong", [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02], 1.0, True),
        ],
        analysis,
    )
    assert [r.outcome for r in results] == ["ruled out", "not enough seeds", "undecided", "holds"]
    text = render_markdown(results, "smoke", analysis)
    rows = {line.split(" | ")[1]: line.split(" | ") for line in text.splitlines() if line.startswith("| t1 ")}
    assert [rows[k][10] for k in ("tight", "noisy", "open", "strong")] == [
        "ruled out",
        "not enough seeds",
        "undecided",
        "holds",
    ]
    assert "ruled out 1" in text.split("After ")[1] and "futile" not in text
    assert "not enough seeds = the grid's seeds (at most 20" in text
    data = json.loads(json.dumps(to_json(results, "smoke", analysis)))
    assert [c["outcome"] for c in data["claims"]] == ["ruled out", "not enough seeds", "undecided", "holds"]
    assert data["analysis"]["effect"] == "50%" and data["analysis"]["max_seeds"] == 20
    # corrected again (the HTML report's --correction): the open words stay, decided ones follow p
    again = correct_json_rows(data["claims"], dataclasses.replace(analysis, correction="none"))
    assert [c["outcome"] for c in again] == ["ruled out", "not enough seeds", "undecided", "holds"]


def test_with_fixed_seeds_a_claim_is_ruled_out_or_inconclusive() -> None:
    analysis = Analysis(effect=Effect(points=0.3, share=None))
    results = correct([_result("tight", TIGHT, 1.0, False), _result("open", OPEN, 2.0, False)], analysis)
    assert [r.outcome for r in results] == ["ruled out", "inconclusive"]
    text = render_markdown(results, "smoke", analysis)
    assert "E = 0.3 points" in text and "inconclusive = neither decided nor ruled out" in text
    assert "not enough seeds" not in text


def test_an_effect_is_checked_once_when_it_is_made() -> None:
    """One rule, at the effect's making (``--effect``, a design read back, the Python API): the
    places that use it trust it."""
    bad_effects: list[dict[str, float | None]] = [
        {"points": 0.0, "share": None},
        {"points": -0.3},
        {"points": math.nan},
        {"share": 0.0},
        {"share": 10.5},
        {"share": None},
    ]
    for bad in bad_effects:
        with pytest.raises(ConfigError, match=r"^--effect must be a difference in score points > 0"):
            Effect(**bad)
    with pytest.raises(ConfigError, match=r"got '-0\.3'$"):
        parse_effect("-0.3")
    assert Effect(points=0.3, share=None).of(-2.0) == 0.3 and Effect(share=0.5).of(-2.0) == 1.0
    assert parse_effect("1000%").share == 10.0 and parse_effect("0.3 points").points == 0.3
