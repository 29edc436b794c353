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
  noncentrality ``delta * sqrt(n) / s``.

Pure functions here; :mod:`harness.reporting.claims` renders them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.specs.claim import Claim
from harness.store.record import record_metric

Verdict = Literal["holds", "reversed", "inconclusive", "1 seed", "no data", "not run"]


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


def paired_power(delta: float, sd: float, n: int, alpha: float = 1 - CONFIDENCE) -> float:
    """Power of a two-sided paired t-test at level ``alpha`` for a true mean difference ``delta``."""
    from scipy import stats

    df = n - 1
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    nc = delta * math.sqrt(n) / sd
    return _nct_sf(crit, df, nc) + _nct_sf(crit, df, -nc)


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
    sd: float, n: int, power: float = POWER, alpha: float = 1 - CONFIDENCE
) -> float | None:
    """The smallest true difference detected with ``power`` (None when ``n < 2``; 0 when ``sd == 0``)."""
    from scipy import optimize

    if n < 2:
        return None
    if sd == 0:
        return 0.0
    high = sd
    while paired_power(high, sd, n, alpha) < power:
        high *= 2
    return float(optimize.brentq(lambda d: paired_power(d, sd, n, alpha) - power, 0.0, high, xtol=1e-10))


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
    return Summary(n, mean, sd, low, high, verdict, minimum_detectable_difference(sd, n))


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


def evaluate(
    claim: Claim, better: Mapping[int, float], worse: Mapping[int, float], reason: str = ""
) -> ClaimResult:
    """Pair the two cells' per-seed values and summarise (``reason`` marks a claim not measured here)."""
    paired = pair_by_seed(better, worse)
    summary = summarise(paired.diffs)
    if reason:
        summary = Summary(0, None, None, None, None, "not run", None)
    return ClaimResult(claim, paired, summary, reason)
