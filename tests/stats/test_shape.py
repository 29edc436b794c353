"""harness.stats.shape: the check that a claim's differences look normal, and the sign-flip
p-value shown beside a verdict that fails it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.reporting.claim_text import claim_rows, shape_notes
from harness.reporting.claims import render_markdown, to_json
from harness.reporting.claims_latex import render_latex
from harness.specs.claim import Claim
from harness.stats.correction import correct
from harness.stats.paired import evaluate
from harness.stats.shape import outlier_index, shape_flag, sign_flip_p


def _brute(diffs: list[float]) -> float:
    observed = abs(sum(diffs))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=len(diffs))
    )
    return hits / 2 ** len(diffs)


@pytest.mark.parametrize("n", [2, 3, 6, 9, 12])
def test_the_sign_flip_p_value_is_the_enumeration(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(5):
        diffs = [float(v) for v in rng.normal(0.3, 1.0, n)]
        assert sign_flip_p(diffs) == pytest.approx(_brute(diffs), abs=1e-12)
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0 and sign_flip_p([1.0]) is None
    assert sign_flip_p([1.0] * n) == pytest.approx(2 / 2**n)  # only all-plus and all-minus reach it


def test_beyond_the_exact_range_the_draws_agree_with_the_normal_limit() -> None:
    rng = np.random.default_rng(3)
    diffs = [float(v) for v in rng.normal(0.25, 1.0, 60)]
    # for many seeds the sign-flip sum is about normal with variance sum d_i^2
    z = abs(sum(diffs)) / math.sqrt(sum(d * d for d in diffs))
    p = sign_flip_p(diffs)
    assert p is not None and abs(p - math.erfc(z / math.sqrt(2))) < 0.02


def test_one_far_seed_is_named_and_its_verdict_gets_a_large_sign_flip_p() -> None:
    diffs = [0.05, -0.04, 0.02, 0.0, -0.03, 0.01, 3.0]
    assert outlier_index(diffs) == 6
    assert shape_flag([40, 41, 42, 43, 44, 45, 46], diffs) == "seed 46 an outlier"
    flip = sign_flip_p(diffs)
    assert flip is not None and flip > 0.2  # the one seed carries the mean: flipping it flips the sign


def test_skewed_differences_are_flagged_and_normal_ones_rarely() -> None:
    rng = np.random.default_rng(5)
    skewed = rng.lognormal(0.0, 1.2, size=(400, 12)) - 1.0
    normal = rng.normal(0.0, 1.0, size=(2000, 12))
    seeds = list(range(12))
    flagged_skewed = np.mean([bool(shape_flag(seeds, list(row))) for row in skewed])
    flagged_normal = np.mean([bool(shape_flag(seeds, list(row))) for row in normal])
    assert flagged_skewed > 0.4
    assert flagged_normal < 0.035  # two rules at 1 % each; 2,000 draws: sd of the share 0.003
    assert shape_flag(seeds[:3], [0.0, 0.0, 5.0]) == ""  # too few seeds to judge
    assert shape_flag(seeds[:6], [0.2] * 6) == ""  # no spread, nothing to judge


def test_the_claims_outputs_flag_the_claim_and_print_its_sign_flip_p() -> None:
    better = dict(enumerate([0.05, -0.04, 0.02, 0.0, -0.03, 0.01, 3.0], start=40))
    claim = Claim("t1", "A", "B", "avg", 1.0, "A beats B", "P", pair="A > B", metric="STS avg")
    calm = Claim("t1", "C", "B", "avg", 1.0, "C beats B", "P", pair="C > B", metric="STS avg")
    results = correct(
        [
            evaluate(claim, better, dict.fromkeys(better, 0.0)),
            evaluate(
                calm,
                dict(enumerate([0.3, 0.5, 0.4, 0.6, 0.2, 0.45, 0.35], start=40)),
                dict.fromkeys(better, 0.0),
            ),
        ]
    )
    assert results[0].shape == "seed 46 an outlier" and results[1].shape == ""
    verdict = claim_rows(results)[0][7]
    assert (
        verdict.startswith("inconclusive \u2020 sign-flip p ") and "\u2020" not in claim_rows(results)[1][7]
    )
    notes = shape_notes(results)
    assert len(notes) == 2 and notes[1].startswith("t1: A > B on STS avg: seed 46 an outlier; sign-flip p ")
    assert notes[1] in render_markdown(results, "smoke")
    data = to_json(results, "smoke")
    assert data["claims"][0]["shape"] == "seed 46 an outlier" and data["claims"][0]["sign_flip_p"] > 0.2
    assert data["claims"][1]["shape"] is None and data["claims"][1]["sign_flip_p"] is None
    tex = render_latex(results, "smoke")
    assert "inconclusive$^\\dagger$" in tex and "seed 46 an outlier; sign-flip p" in tex
