"""Claims: the papers' directional statements, tested on paired seeds.

A claim says that one cell of a table (``better``) scores higher than another (``worse``) on one
column. The paper's delta is computed from the numbers the spec quotes; the measured delta comes
from run records. Two runs with the same seed share their data order and initialisation, so the
comparison is PAIRED BY SEED: for every seed that both cells finished, ``d_s = better_s - worse_s``.

For ``n`` paired differences with mean ``m`` and sample standard deviation ``s``:

* 95 % interval: ``m +- t_{0.975, n-1} * s / sqrt(n)`` (Student's t, as ``scipy.stats.t.interval``
  and ``scipy.stats.ttest_rel`` use);
* verdict: ``holds`` when the interval lies above 0, ``reversed`` when it lies below 0,
  ``inconclusive`` when it contains 0; with one seed there is no interval (``1 seed``), with none
  there is no measurement (``no data``);
* smallest detectable difference (MDD): the true mean difference a two-sided paired t-test at
  alpha = 0.05 detects with 80 % power at this ``n`` and the observed ``s``: the ``delta`` with
  ``P(|T| > t_{0.975, n-1}) = 0.8`` for ``T`` noncentral t with ``n - 1`` degrees of freedom and
  noncentrality ``delta * sqrt(n) / s``;
* p-value: the two-sided paired t-test's, ``2 P(T_{n-1} > |m| sqrt(n) / s)`` (``scipy.stats.ttest_1samp``);
  it is below 0.05 exactly when the 95 % interval excludes 0;
* seeds for a power: the smallest ``n`` at which that test (or, with ``critical``, another test
  that rejects where ``|T| > critical(n)``) detects a true difference with the power asked.

Across claims, p-values are adjusted within a family (:func:`adjust_pvalues`): Holm's step-down
(family-wise error rate, any dependence) or Benjamini-Hochberg's step-up (false discovery rate,
``scipy.stats.false_discovery_control``); the families and the corrected verdicts are
:mod:`harness.stats.correction`'s, the anytime-valid test of seeds added sequentially
:mod:`harness.stats.sequential`'s.

Pure functions here; :mod:`harness.reporting.claims` renders them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.specs.claim import Claim
from harness.store.record import record_metric

Verdict = Literal["holds", "reversed", "inconclusive", "1 seed", "no data", "not run"]
CorrectionMethod = Literal["holm", "bh", "none"]
CORRECTIONS: tuple[CorrectionMethod, ...] = ("holm", "bh", "none")


CONFIDENCE = 0.95


POWER = 0.80


@dataclass(frozen=True)
class Paired:
    """Paired differences of two cells: ``diffs[i] = better - worse`` at ``seeds[i]``."""

    seeds: tuple[int, ...]
    diffs: tuple[float, ...]
    unpaired: tuple[int, ...] = ()
    """Seeds that only one of the two cells finished (left out, reported)."""


@dataclass(frozen=True)
class Summary:
    """The statistics of one claim's paired differences."""

    n: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None
    verdict: Verdict
    mdd: float | None
    p: float | None = None
    """The two-sided p-value of the test behind the verdict (None without an interval)."""


def pair_by_seed(better: Mapping[int, float], worse: Mapping[int, float]) -> Paired:
    """Pair two cells' values by seed; seeds present in only one cell are dropped (and listed)."""
    common = sorted(set(better) & set(worse))
    unpaired = tuple(sorted(set(better) ^ set(worse)))
    return Paired(tuple(common), tuple(better[s] - worse[s] for s in common), unpaired)


def t_interval(diffs: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Two-sided Student-t interval of the mean of ``diffs`` (needs at least two values)."""
    from scipy import stats

    n = len(diffs)
    if n < 2:
        raise ValueError("a t interval needs at least two values")
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


Critical = Callable[[int], float]
"""A test's critical value of ``|T|`` at ``n`` paired seeds (``T``: the paired t statistic); inf where
it cannot reject at that ``n``."""


def t_critical(n: int, alpha: float = 1 - CONFIDENCE) -> float:
    """The two-sided paired t-test's critical value ``t_{1 - alpha/2, n-1}``."""
    from scipy import stats

    return float(stats.t.ppf(1 - alpha / 2, n - 1))


def paired_power(
    delta: float, sd: float, n: int, alpha: float = 1 - CONFIDENCE, critical: Critical | None = None
) -> float:
    """Power of a two-sided paired t-test at level ``alpha`` for a true mean difference ``delta``
    (with ``critical``: of the test that rejects where ``|T| > critical(n)``)."""
    df = n - 1
    crit = critical(n) if critical is not None else t_critical(n, alpha)
    if not math.isfinite(crit):
        return 0.0
    nc = delta * math.sqrt(n) / sd
    return _nct_sf(crit, df, nc) + _nct_sf(crit, df, -nc)


def p_value(diffs: Sequence[float]) -> float | None:
    """Two-sided p-value of the paired t-test of ``mean(diffs) = 0`` (None below two values).

    With no spread the statistic is infinite (p = 0) unless every difference is 0 (p = 1).
    """
    from scipy import stats

    n = len(diffs)
    if n < 2:
        return None
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs)
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    t = mean / (sd / math.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


SEEDS_SEARCH_MAX = 10_000
"""The most seeds :func:`seeds_for_power` looks at; beyond it the answer is None."""


def seeds_for_power(
    delta: float,
    sd: float,
    power: float = POWER,
    alpha: float = 1 - CONFIDENCE,
    critical: Critical | None = None,
    most: int = SEEDS_SEARCH_MAX,
) -> int | None:
    """The fewest paired seeds (>= 2) at which the test detects a true difference ``delta`` with
    ``power`` at paired standard deviation ``sd`` (None beyond ``most``; 2 when ``sd == 0`` and
    ``delta != 0``; None when ``delta == 0``).

    Power rises with ``n`` for both tests used here, so the search doubles an upper bound and then
    bisects.
    """
    if delta == 0 or not math.isfinite(delta) or not math.isfinite(sd):
        return None
    if sd == 0:
        return 2

    def enough(n: int) -> bool:
        return paired_power(abs(delta), sd, n, alpha, critical) >= power

    low, high = 2, 2
    while not enough(high):
        if high >= most:
            return None
        low, high = high + 1, min(most, high * 2)
    while low < high:
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid + 1
    return high


def adjust_pvalues(pvalues: Sequence[float], method: CorrectionMethod) -> list[float]:
    """The p-values adjusted for testing them together (same order as given).

    * ``holm``: Holm's step-down, ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`` over the
      p-values sorted ascending: rejecting where ``p~ < alpha`` bounds the family-wise error rate by
      alpha under any dependence (Holm 1979, Scand. J. Statist. 6, 65-70);
    * ``bh``: Benjamini-Hochberg's step-up, ``p~_(i) = min_{j >= i} min(1, m p_(j) / j)``
      (``scipy.stats.false_discovery_control``): bounds the false discovery rate by alpha for
      independent or positively dependent p-values (Benjamini and Hochberg 1995, JRSS B 57, 289-300);
    * ``none``: the p-values as they are.
    """
    values = [float(p) for p in pvalues]
    if method == "none" or not values:
        return values
    if any(not 0.0 <= p <= 1.0 for p in values):
        raise ValueError(f"p-values must lie in [0, 1], got {values}")
    if method == "bh":
        from scipy import stats

        return [float(p) for p in stats.false_discovery_control(values, method="bh")]
    if method != "holm":
        raise ValueError(f"unknown correction {method!r}")
    m = len(values)
    order = sorted(range(m), key=lambda i: values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * values[i]))
        adjusted[i] = running
    return adjusted


def _nct_sf(x: float, df: int, nc: float) -> float:
    """P(T > x) for T noncentral t(df, nc).

    Both tails of the power go through ``nct.sf`` (the lower one as ``sf(x, df, -nc)``, by
    symmetry): scipy's ``nct.cdf`` returns NaN far in the lower tail at one degree of freedom (e.g.
    ``nct.cdf(-12.7, 1, 8)``), which made the MDD search fail at 2 seeds. Should ``sf`` give a value
    outside [0, 1] (NaN included; older scipy versions computed it differently), integrate over the
    chi-square denominator instead: P(T > x) = E[P(Z > x sqrt(V / df) - nc)], V ~ chi2(df).
    """
    from scipy import integrate, stats

    value = float(stats.nct.sf(x, df, nc))
    if 0.0 <= value <= 1.0:
        return value
    integral, _ = integrate.quad(
        lambda v: stats.norm.sf(x * math.sqrt(v / df) - nc) * stats.chi2.pdf(v, df), 0.0, math.inf
    )
    return min(1.0, max(0.0, float(integral)))


def minimum_detectable_difference(
    sd: float, n: int, power: float = POWER, alpha: float = 1 - CONFIDENCE, critical: Critical | None = None
) -> float | None:
    """The smallest true difference detected with ``power`` (None when ``n < 2`` or the test cannot
    reject at ``n``; 0 when ``sd == 0``)."""
    from scipy import optimize

    if n < 2:
        return None
    if sd == 0:
        return 0.0
    if critical is not None and not math.isfinite(critical(n)):
        return None
    high = sd
    while paired_power(high, sd, n, alpha, critical) < power:
        high *= 2
    return float(
        optimize.brentq(lambda d: paired_power(d, sd, n, alpha, critical) - power, 0.0, high, xtol=1e-10)
    )


def summarise(diffs: Sequence[float]) -> Summary:
    """Mean, sd, 95 % interval, verdict and MDD of paired differences (see the module docstring)."""
    n = len(diffs)
    if n == 0:
        return Summary(0, None, None, None, None, "no data", None)
    mean = statistics.fmean(diffs)
    if n == 1:
        return Summary(1, mean, None, None, None, "1 seed", None)
    sd = statistics.stdev(diffs)
    low, high = t_interval(diffs)
    verdict: Verdict = "holds" if low > 0 else "reversed" if high < 0 else "inconclusive"
    return Summary(n, mean, sd, low, high, verdict, minimum_detectable_difference(sd, n), p_value(diffs))


@dataclass(frozen=True)
class ClaimResult:
    """A claim with its measured comparison under one profile."""

    claim: Claim
    paired: Paired
    summary: Summary
    reason: str = ""
    """Why nothing was measured (a cell not run under this profile, or n/a), if so."""
    extra: dict[str, Any] = field(default_factory=dict)
    same_as: str = ""
    """``spec: text`` of an earlier claim that compares the same runs on the same score (e.g. the
    same pair of methods declared by two tables, or SimCSE++ Table 3's BERT-base and SBERT-base
    claims, which are the same runs on the CPU profiles): a repeat, not another piece of evidence."""
    comparison: tuple[str, ...] = ()
    """What is compared: the two cells' run groups and the score (repeats share it; one hypothesis)."""
    family: str = ""
    """The family its p-value was adjusted in (:mod:`harness.stats.correction`), if any."""
    adjusted: float | None = None
    """Its p-value adjusted within the family (None: no p-value, or not corrected)."""
    corrected: Verdict | None = None
    """The verdict after the correction (None: not corrected; the raw verdict stands)."""
    shape: str = ""
    """Why its paired differences do not look normal (:func:`harness.stats.shape.shape_flag`),
    else empty."""
    sign_flip: float | None = None
    """Where :attr:`shape` is set: the sign-flip p-value of its differences (assumes no normality)."""
    encoder: str = ""
    """The encoder its two cells ran (display name), where they ran one; else empty."""
    open_outcome: str = ""
    """What it is where not decided: ``ruled out``, ``not enough seeds``, ``undecided`` or
    ``inconclusive`` (:mod:`harness.stats.outcomes`; empty: not judged)."""

    @property
    def corrected_verdict(self) -> Verdict:
        """The verdict after correction, or the raw one where no correction was applied."""
        return self.corrected if self.corrected is not None else self.summary.verdict

    @property
    def outcome(self) -> str:
        """The corrected verdict where it holds or is reversed, else :attr:`open_outcome` (else the
        corrected verdict)."""
        verdict = self.corrected_verdict
        if verdict in ("holds", "reversed") or not self.open_outcome:
            return verdict
        return self.open_outcome


def seed_values(
    records: Iterable[Mapping[str, Any]], scores: str, column: str, aggregate: str = "all"
) -> dict[int, float]:
    """``{seed: value}`` of finished records (the last record of a seed wins; none should repeat)."""

    out: dict[int, float] = {}
    for record in records:
        value = record_metric(record, scores, column, aggregate)
        seed = (record.get("config") or {}).get("seed")
        if value is not None and isinstance(seed, int):
            out[seed] = value
    return out


Summariser = Callable[[Sequence[float]], Summary]
"""Paired differences -> :class:`Summary`: :func:`summarise` (fixed seeds) or the anytime-valid
:func:`harness.stats.sequential.sequential_summary`."""


def evaluate(
    claim: Claim,
    better: Mapping[int, float],
    worse: Mapping[int, float],
    reason: str = "",
    summariser: Summariser = summarise,
) -> ClaimResult:
    """Pair the two cells' per-seed values and summarise (``reason`` marks a claim not measured here)."""
    from harness.stats.shape import shape_flag, sign_flip_p

    paired = pair_by_seed(better, worse)
    summary = summariser(paired.diffs)
    if reason:
        return ClaimResult(claim, paired, Summary(0, None, None, None, None, "not run", None), reason)
    shape = shape_flag(paired.seeds, paired.diffs)
    flip = sign_flip_p(paired.diffs) if shape else None
    return ClaimResult(claim, paired, summary, reason, shape=shape, sign_flip=flip)
