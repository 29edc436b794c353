"""The statistics of a claim: the paired t interval and power match scipy and Monte Carlo, verdicts,
pairing by seed, finite MDDs with few seeds; the paired t-test's p-value, Holm and Benjamini-Hochberg
adjustment, and the seeds a test needs for a power, against scipy and hand-worked examples."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from scipy import stats

from harness.specs.claim import Claim
from harness.stats.paired import (
    adjust_pvalues,
    evaluate,
    minimum_detectable_difference,
    p_value,
    pair_by_seed,
    paired_power,
    seed_values,
    seeds_for_power,
    summarise,
    t_interval,
)

DIFFS = [0.8, 1.9, -0.3, 1.2, 0.6]


def test_t_interval_matches_scipy() -> None:
    low, high = t_interval(DIFFS)
    ref = stats.t.interval(0.95, len(DIFFS) - 1, loc=np.mean(DIFFS), scale=stats.sem(DIFFS))
    assert (low, high) == pytest.approx(ref, rel=1e-12)
    # and the interval excludes 0 exactly when ttest_rel rejects at 5 %
    better, worse = np.array([70.0, 71.0, 69.5, 72.0, 70.4]), np.array([70.0, 71.0, 69.5, 72.0, 70.4]) - DIFFS
    p = stats.ttest_rel(better, worse).pvalue
    assert (low > 0) == (p < 0.05)
    s = summarise(DIFFS)
    assert (
        s.n == 5 and s.mean == pytest.approx(np.mean(DIFFS)) and s.sd == pytest.approx(np.std(DIFFS, ddof=1))
    )


def test_power_matches_a_monte_carlo_paired_t_test() -> None:
    sd, n = 0.84, 5
    mdd = minimum_detectable_difference(sd, n)
    assert mdd is not None and paired_power(mdd, sd, n) == pytest.approx(0.8, abs=1e-6)
    rng = np.random.default_rng(0)
    sims = rng.normal(mdd, sd, size=(40_000, n))
    t = sims.mean(axis=1) / (sims.std(axis=1, ddof=1) / np.sqrt(n))
    crit = stats.t.ppf(0.975, n - 1)
    assert float(np.mean(np.abs(t) > crit)) == pytest.approx(0.8, abs=0.01)
    # more seeds detect smaller differences
    mdd10 = minimum_detectable_difference(sd, 10)
    assert mdd10 is not None and mdd10 < mdd
    assert minimum_detectable_difference(sd, 1) is None and minimum_detectable_difference(0.0, 3) == 0.0


@pytest.mark.parametrize(
    ("diffs", "verdict"),
    [
        ([1.0, 1.2, 0.9, 1.1], "holds"),
        ([-1.0, -1.2, -0.9, -1.1], "reversed"),
        ([1.0, -1.2, 0.9, -1.1], "inconclusive"),
        ([0.5], "1 seed"),
        ([], "no data"),
    ],
)
def test_verdicts(diffs: list[float], verdict: str) -> None:
    assert summarise(diffs).verdict == verdict


def test_pairing_is_by_seed_not_by_order() -> None:
    # Seeds differ a lot from each other (data order, initialisation), the method effect is +0.5 on
    # every seed: paired, the claim holds; an unpaired comparison could not see it.
    base = {11: 70.0, 12: 74.0, 13: 66.0, 14: 72.0, 15: 68.0}
    better = {s: v + 0.5 + 0.01 * s for s, v in base.items()}
    worse = dict(base)
    worse[99] = 10.0  # a seed only one cell finished: dropped and reported
    records_b = [{"config": {"seed": s}, "final": {"sts": {"avg": v}}} for s, v in better.items()]
    records_w = [{"config": {"seed": s}, "final": {"sts": {"avg": v}}} for s, v in worse.items()]
    random.Random(0).shuffle(records_b)
    random.Random(1).shuffle(records_w)
    paired = pair_by_seed(seed_values(records_b, "sts", "avg"), seed_values(records_w, "sts", "avg"))
    assert paired.seeds == (11, 12, 13, 14, 15) and paired.unpaired == (99,)
    assert paired.diffs == pytest.approx([0.5 + 0.01 * s for s in paired.seeds])
    claim = Claim("t", "a", "b", "avg", 1.0, "a > b")
    assert (
        evaluate(
            claim, seed_values(records_b, "sts", "avg"), seed_values(records_w, "sts", "avg")
        ).summary.verdict
        == "holds"
    )
    unpaired = stats.ttest_ind(list(better.values()), list(base.values()))
    assert unpaired.pvalue > 0.5  # what an unpaired test would have said


@pytest.mark.parametrize("diffs", [(1.0, 1.5), (0.1, -0.2), (0.3, 0.1, 0.2)])
def test_few_seeds_give_a_finite_mdd(diffs: tuple[float, ...]) -> None:
    # scipy's noncentral t returns NaN at one degree of freedom for some noncentralities; two seeds
    # used to crash `harness claims` in the MDD search.
    summary = summarise(diffs)
    assert summary.mdd is not None and summary.sd is not None and np.isfinite(summary.mdd)
    assert paired_power(summary.mdd, summary.sd, len(diffs)) == pytest.approx(0.8, abs=1e-6)
    rng = np.random.default_rng(0)  # Monte Carlo check of the power at the MDD, df = n - 1
    n = len(diffs)
    samples = rng.normal(summary.mdd, summary.sd, size=(200_000, n))
    t = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / np.sqrt(n))
    crit = stats.t.ppf(0.975, n - 1)
    assert np.mean(np.abs(t) > crit) == pytest.approx(0.8, abs=0.01)


def test_the_power_falls_back_to_integration_where_scipy_gives_no_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = {(d, n): paired_power(d, 0.4, n) for d in (0.2, 1.0, 3.0) for n in (2, 3, 5)}
    monkeypatch.setattr(stats.nct, "sf", lambda *args, **kwargs: float("nan"))
    for (d, n), power in expected.items():
        assert paired_power(d, 0.4, n) == pytest.approx(power, abs=1e-7)


# -- p-values, their adjustment (Holm, BH), the seeds for a power --------------------------------------
def test_the_p_value_is_scipys_paired_t_test_and_agrees_with_the_interval() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 12))
        diffs = list(rng.normal(rng.normal(0, 0.5), rng.uniform(0.1, 2.0), n))
        p = p_value(diffs)
        assert p == pytest.approx(stats.ttest_1samp(diffs, 0.0).pvalue, rel=1e-9, abs=1e-15)
        low, high = t_interval(diffs)
        assert p is not None and (p < 0.05) == (low > 0 or high < 0)
        assert summarise(diffs).p == p
    assert p_value([0.4]) is None and p_value([]) is None
    assert p_value([0.3, 0.3, 0.3]) == 0.0 and p_value([0.0, 0.0]) == 1.0  # no spread


def test_holm_and_bh_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.2]
    # Holm: sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 = 0.04, 0.09, 0.08, 0.2; running max
    assert adjust_pvalues(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.2])
    # BH: times 4/1, 4/2, 4/3, 4/4 = 0.04, 0.06, 0.0533, 0.2; running min from the largest
    assert adjust_pvalues(p, "bh") == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert adjust_pvalues(p, "none") == p
    assert adjust_pvalues([0.5, 0.6], "holm") == pytest.approx([1.0, 1.0])  # capped at 1
    assert adjust_pvalues([], "holm") == [] and adjust_pvalues([0.02], "holm") == [0.02]
    with pytest.raises(ValueError):
        adjust_pvalues([1.5], "holm")


def _holm_rejects(p: list[float], alpha: float) -> set[int]:
    """Holm's step-down as he stated it: reject the smallest while p_(i) <= alpha / (m - i + 1)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out: set[int] = set()
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        out.add(i)
    return out


def _bh_rejects(p: list[float], alpha: float) -> set[int]:
    """Benjamini-Hochberg's step-up: reject the k smallest, k the largest with p_(k) <= k alpha / m."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    k = max((r + 1 for r, i in enumerate(order) if p[i] <= (r + 1) * alpha / len(p)), default=0)
    return set(order[:k])


@pytest.mark.parametrize("seed", range(5))
def test_adjusted_p_values_reject_what_the_procedures_reject(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for m in (1, 2, 3, 5, 8, 20):
        p = [float(x) for x in np.concatenate([rng.uniform(0, 1, m // 2), rng.uniform(0, 0.02, m - m // 2)])]
        holm, bh = adjust_pvalues(p, "holm"), adjust_pvalues(p, "bh")
        assert bh == pytest.approx(list(stats.false_discovery_control(p, method="bh")))
        for alpha in (0.01, 0.05, 0.1):
            assert {i for i, q in enumerate(holm) if q <= alpha} == _holm_rejects(p, alpha)
            assert {i for i, q in enumerate(bh) if q <= alpha} == _bh_rejects(p, alpha)
        assert all(h >= r - 1e-15 and b >= r - 1e-15 for h, b, r in zip(holm, bh, p, strict=True))


def test_holm_keeps_the_family_wise_error_rate_where_raw_verdicts_do_not() -> None:
    """Ten true null claims tested together, 20,000 times (p-values uniform)."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, size=(20_000, 10))
    raw = float(np.mean((p < 0.05).any(axis=1)))
    holm = float(np.mean([min(adjust_pvalues(list(row), "holm")) < 0.05 for row in p[:4000]]))
    assert raw > 0.35  # 1 - 0.95^10 = 0.40
    assert holm <= 0.05 + 0.01


@pytest.mark.parametrize(("delta", "sd"), [(1.0, 1.0), (0.3, 0.2), (0.25, 0.84), (2.0, 0.5)])
def test_seeds_for_power_is_the_first_n_with_the_power(delta: float, sd: float) -> None:
    n = seeds_for_power(delta, sd)
    assert n is not None and n >= 2
    assert paired_power(delta, sd, n) >= 0.8
    if n > 2:
        assert paired_power(delta, sd, n - 1) < 0.8
    scan = next(k for k in itertools.count(2) if paired_power(delta, sd, k) >= 0.8)
    assert n == scan
    mdd = minimum_detectable_difference(sd, n)
    assert mdd is not None and mdd <= delta + 1e-9  # what n seeds detect covers delta
    assert seeds_for_power(-delta, sd) == n  # the sign does not matter


def test_seeds_for_power_edges() -> None:
    assert seeds_for_power(0.0, 1.0) is None
    assert seeds_for_power(0.5, 0.0) == 2
    assert seeds_for_power(0.001, 1.0) is None  # millions of seeds: out of reach
    assert seeds_for_power(0.001, 1.0, most=10**8) is not None
    # a test that cannot reject below some n (a critical value of inf) has no power there
    assert paired_power(1.0, 1.0, 3, critical=lambda n: float("inf")) == 0.0

    def late(n: int) -> float:
        return float("inf") if n < 9 else 2.3

    found = seeds_for_power(1.0, 1.0, critical=late)
    assert found == next(k for k in itertools.count(2) if paired_power(1.0, 1.0, k, critical=late) >= 0.8)
    assert found is not None and found >= 9
