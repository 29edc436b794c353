"""harness.stats.sequential: the anytime-valid paired t-test against its derivation, and by
simulation: with no true difference its error rate stays at or below alpha however long one keeps
adding seeds, where "stop when the t interval excludes 0" does not; with a true difference it decides.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from harness.errors import DataError
from harness.stats.paired import adjust_pvalues, paired_power, seeds_for_power, summarise
from harness.stats.sequential import (
    MIXTURE_C,
    Design,
    anytime_p,
    cannot_reach,
    confidence_sequence,
    mixture_ratios,
    read_design,
    sd_lower_bound,
    sequential_critical,
    sequential_seeds_for_power,
    sequential_summary,
)

ALPHA = 0.05


def _invariant_ratio(x: np.ndarray, c: float) -> float:
    """The reference: the likelihood ratio of the direction of ``x`` (its scale-free part) under a
    N(0, 1/c) prior on the standardised mean against mean 0, by numerical integration over the
    radius and the prior (the module's closed form integrates both analytically)."""
    n = len(x)
    s = float(x.sum() / np.linalg.norm(x))

    def density(delta: float) -> float:
        def f(r: float) -> float:
            return math.exp((n - 1) * math.log(r) - (r * r - 2 * r * delta * s + n * delta * delta) / 2)

        return float(integrate.quad(f, 0, np.inf, limit=200)[0])

    top = integrate.quad(lambda d: stats.norm.pdf(d, 0, 1 / math.sqrt(c)) * density(d), -np.inf, np.inf)[0]
    return float(top / density(0.0))


@pytest.mark.parametrize(("mean", "n", "c"), [(0.0, 3, 0.5), (0.4, 6, 0.5), (-1.0, 8, 1.0), (0.2, 5, 0.1)])
def test_the_closed_form_is_the_invariant_likelihood_ratio(mean: float, n: int, c: float) -> None:
    x = np.random.default_rng(n).normal(mean, 1.0, n)
    assert mixture_ratios(list(x), 0.0, c)[-1] == pytest.approx(_invariant_ratio(x, c), rel=1e-6)
    assert mixture_ratios(list(x), 0.0, c)[0] == pytest.approx(1.0)  # one value says nothing
    # scale-free: multiplying every difference by a constant changes nothing
    assert mixture_ratios(list(7.3 * x), 0.0, c) == pytest.approx(mixture_ratios(list(x), 0.0, c))


def test_the_sequence_the_p_value_and_the_critical_value_agree() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(2, 25))
        diffs = list(rng.normal(rng.normal(0, 1.0), 1.0, n))
        low, high = confidence_sequence(diffs)
        p = anytime_p(diffs)
        assert p is not None
        assert (low > 0 or high < 0) == (p < ALPHA)
        # at one n, L_n(0) >= 1/alpha exactly where |T| > t*_n
        t = np.mean(diffs) / (np.std(diffs, ddof=1) / math.sqrt(n))
        crossed = mixture_ratios(diffs)[-1] >= 1 / ALPHA
        assert crossed == (abs(t) > sequential_critical(n))
    assert sequential_critical(2) == math.inf and sequential_critical(3) == math.inf  # c = 0.5
    assert sequential_critical(5) < math.inf


def test_the_sequence_is_wider_than_the_fixed_interval_and_narrows() -> None:
    diffs = list(np.random.default_rng(2).normal(0.5, 1.0, 30))
    width = [np.subtract(*confidence_sequence(diffs[:n])[::-1]) for n in (5, 10, 20, 30)]
    assert width == sorted(width, reverse=True)
    low, high = summarise(diffs).low, summarise(diffs).high
    assert low is not None and high is not None
    cs_low, cs_high = confidence_sequence(diffs)
    assert cs_low < low and high < cs_high


def test_summary_under_the_sequence() -> None:
    s = sequential_summary([0.5, 0.6, 0.4, 0.55, 0.45, 0.5])
    assert s.verdict == "holds" and s.p is not None and s.p < ALPHA and s.low is not None and s.low > 0
    assert sequential_summary([-0.5, -0.6, -0.4, -0.55, -0.45, -0.5]).verdict == "reversed"
    assert sequential_summary([0.1, -0.2, 0.3]).verdict == "inconclusive"
    assert sequential_summary([0.3]).verdict == "1 seed" and sequential_summary([]).verdict == "no data"
    assert s.mdd is not None and paired_power(
        s.mdd, 0.0707, 6, critical=sequential_critical
    ) == pytest.approx(0.8, abs=0.01)


def _crossed(x: np.ndarray, c: float = MIXTURE_C) -> np.ndarray:
    """Per row: whether L_k(0) >= 1/alpha at some k (vectorised; the same formula as mixture_ratios)."""
    k = np.arange(1, x.shape[1] + 1)
    s, q = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    log_l = 0.5 * np.log(c / (c + k)) - 0.5 * k * np.log1p(-(s * s / q) / (k + c))
    return (log_l >= math.log(1 / ALPHA)).any(axis=1)


def test_with_no_true_difference_the_error_rate_stays_below_alpha_however_long_one_looks() -> None:
    """10,000 simulated claims with a true difference of zero, 30 seeds each, a look after every seed
    from the second: the anytime test decides at most alpha of them; "stop when the 95 % t interval
    excludes 0" decides far more (optional stopping), though at any one fixed n it is exact."""
    rng = np.random.default_rng(20261126)
    x = rng.normal(0.0, 1.0, size=(10_000, 30))
    anytime = float(np.mean(_crossed(x)))
    n = np.arange(2, 31)
    mean = np.cumsum(x, axis=1)[:, 1:] / n
    sd = np.sqrt((np.cumsum(x * x, axis=1)[:, 1:] - n * mean * mean) / (n - 1))
    t = np.abs(mean) / (sd / np.sqrt(n))
    crit = stats.t.ppf(1 - ALPHA / 2, n - 1)
    naive = float(np.mean((t > crit).any(axis=1)))
    rounds = [n - 2 for n in (5, 7, 9, 12, 15, 19, 20)]  # looking only at the grid's rounds
    naive_rounds = float(np.mean((t[:, rounds] > crit[rounds]).any(axis=1)))
    fixed = float(np.mean(t[:, -1] > crit[-1]))
    assert anytime <= ALPHA
    assert naive > 4 * ALPHA and naive_rounds > 2 * ALPHA
    assert abs(fixed - ALPHA) < 0.01
    # the module's own function agrees with the vectorised formula
    assert [(anytime_p(list(row)) or 1.0) < ALPHA for row in x[:300]] == list(_crossed(x[:300]))


def test_the_grids_rounds_with_holm_keep_the_family_wise_error_rate() -> None:
    """2,000 families of four claims (an order a > b > c > d > e, cells sharing seeds and each other),
    nothing truly different; rounds of seeds as the grid runs them (5, 7, 9, 12, 15, 19, 20), the
    undecided claims only, decided where the Holm-adjusted anytime p-value is below alpha."""
    rng = np.random.default_rng(7)
    steps = [5, 7, 9, 12, 15, 19, 20]
    wrong = wrong_raw = 0
    families = 2000
    for _ in range(families):
        seed_effect = rng.normal(0, 2.0, 20)  # what a seed does to every cell alike
        cells = seed_effect + rng.normal(0, 0.5, size=(5, 20))
        diffs = [cells[i] - cells[i + 1] for i in range(4)]
        decided: set[int] = set()
        p = [1.0] * 4
        for n in steps:
            for i in range(4):
                if i not in decided:
                    p[i] = anytime_p(list(diffs[i][:n])) or 1.0
            decided |= {i for i, q in enumerate(adjust_pvalues(p, "holm")) if q < ALPHA}
        wrong += bool(decided)
        wrong_raw += any(q < ALPHA for q in p)
    assert wrong / families <= ALPHA
    assert wrong <= wrong_raw


def test_with_a_true_difference_it_decides() -> None:
    """A true difference of one paired sd: within 30 seeds the anytime test decides at least 80 % of
    2,000 claims, in the right direction; the seeds it was planned to need say the same."""
    rng = np.random.default_rng(11)
    x = rng.normal(1.0, 1.0, size=(2000, 30))
    decided = _crossed(x)
    assert float(np.mean(decided)) >= 0.8
    wrong_way = [(anytime_p(list(r)) or 1.0) < ALPHA and np.mean(r) < 0 for r in x[:200]]
    assert not any(wrong_way)
    planned = sequential_seeds_for_power(1.0, 1.0)
    assert planned is not None and planned <= 30
    fixed = seeds_for_power(1.0, 1.0)
    assert fixed is not None and fixed < planned  # the price of looking whenever one likes


def test_cannot_reach() -> None:
    inside = sequential_summary([0.01, -0.02, 0.015, 0.0, -0.01, 0.005, 0.01])
    assert not cannot_reach(inside, effect=1.0, max_seeds=20)  # ruled out is the outcomes' word, not this
    assert cannot_reach(inside, effect=0.001, max_seeds=20)
    noisy = sequential_summary([1.0, -1.5, 2.0, -0.5, 0.3])
    assert cannot_reach(noisy, effect=0.1, max_seeds=20)
    assert not cannot_reach(noisy, effect=0.1, max_seeds=10_000)
    assert cannot_reach(noisy, effect=10.0, max_seeds=5)  # it has every seed it may get
    # a measured difference larger than the effect is judged on itself
    strong = sequential_summary([1.0, 1.3, 0.7, 1.2, 0.2])
    assert not cannot_reach(strong, effect=0.01, max_seeds=30)
    assert not cannot_reach(sequential_summary([0.5]), effect=1.0, max_seeds=5)


@pytest.mark.parametrize("n", [2, 5, 12, 40])
def test_the_sd_bound_covers_the_true_sd_nine_times_in_ten(n: int) -> None:
    """sd * sqrt((n-1)/chi2_{0.9,n-1}) is below the true sd with probability 0.9 for normal data."""
    rng = np.random.default_rng(n)
    x = rng.normal(0.0, 2.0, size=(20_000, n))
    bounds = [sd_lower_bound(float(sd), n) for sd in x.std(axis=1, ddof=1)]
    assert abs(float(np.mean(np.array(bounds) < 2.0)) - 0.9) < 0.01  # 20,000 draws: sd of the share 0.002
    assert sd_lower_bound(1.0, 1) == 0.0 and sd_lower_bound(0.0, 5) == 0.0


def test_a_written_design_is_read_by_one_rule() -> None:
    assert read_design({}, "x") == Design(None, MIXTURE_C)
    assert read_design({"max_seeds": None, "mixture_c": None}, "x") == Design(None, MIXTURE_C)
    assert read_design({"max_seeds": 12, "mixture_c": 2}, "x") == Design(12, 2.0)
    for field, value in (("max_seeds", 0), ("max_seeds", True), ("max_seeds", "12"), ("mixture_c", 0),
                         ("mixture_c", math.inf), ("mixture_c", False), ("mixture_c", "0.5")):  # fmt: skip
        with pytest.raises(DataError, match=rf"^runs/sequential\.json: design: {field} must be "):
            read_design({field: value}, "runs/sequential.json: design")
