"""An anytime-valid paired t-test: claims decided while seeds are added (``harness grid --until-decided``).

The fixed-seed interval of :mod:`harness.stats.paired` is valid for a number of seeds chosen
before the data are seen. Adding seeds until the interval excludes 0 and stopping there inflates the
error rate (optional stopping: about 0.2 instead of 0.05 when one looks after every seed up to 20,
``tests/stats/test_sequential.py`` measures it). Here the number of seeds may depend on the data.

The test (Wang and Ramdas, "Anytime-valid t-tests and confidence sequences for Gaussian means with
unknown variance", Sequential Analysis 44, 2025, arXiv:2310.03722; the Gaussian-mixture form of
Lai's 1976 construction, Ann. Statist. 4, 265-280): for paired differences ``x_1, x_2, ...`` (in seed
order) with mean ``mu`` and unknown spread, and a hypothesised mean ``mu0``, let
``S_k = sum_{i<=k} (x_i - mu0)`` and ``Q_k = sum_{i<=k} (x_i - mu0)^2``. Then::

    L_k(mu0) = sqrt(c / (c + k)) * (1 - S_k^2 / ((k + c) Q_k)) ** (-k / 2)

is the likelihood ratio of the scale-free part of the data (the direction of the vector ``x - mu0``)
under a N(0, 1/c) prior on the standardised difference ``(mu - mu0) / sigma``, against
``mu = mu0``; it is a nonnegative martingale with ``L_1 = 1`` when ``mu = mu0`` and the ``x_i`` are
independent normal, so by Ville's inequality ``P(L_k >= 1/alpha for some k) <= alpha``: whenever
one stops, for whatever reason, the chance that it ever crossed is at most alpha.

* anytime p-value: ``p_n = min(1, min_{k<=n} 1 / L_k(0))``; a claim is decided (holds or reversed
  by the sign of its mean) where ``p_n < alpha``;
* confidence sequence: ``{mu : L_n(mu) < 1/alpha}`` is ``m_n +- h_n`` with the sample mean ``m_n``,
  ``h_n = sqrt(q_n (n - 1) s_n^2 / (n (n - q_n)))``, sample sd ``s_n`` and
  ``q_n = (n + c) (1 - (alpha^2 c / (n + c)) ** (1/n))`` (all of R where ``q_n >= n``); the running
  intersection over ``k <= n`` is reported, so it excludes 0 exactly where ``p_n < alpha``;
* at one ``n`` the test rejects where ``|T| > t*_n = sqrt((n - 1) q_n / (n - q_n))`` (``T``: the
  paired t statistic), so its power at ``n`` is the noncentral-t power of the fixed test with that
  critical value (:func:`sequential_critical`, used for the seeds a claim needs).

``c`` (:data:`MIXTURE_C`) is fixed before any data: 0.5, a prior standard deviation of 1.4 on the
standardised difference, which makes the sequence about as narrow as it gets between 8 and 30 seeds
(docs/guide.md has the table). Changing ``c`` after looking at the data would void the guarantee, so
the grid records the ``c`` it used (``<runs>/sequential.json``) and the reporters read it from there.

Pure functions: the grid's rounds (:mod:`harness.grid.rounds`) and the claims reporter call them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import DataError
from harness.stats.paired import (
    CONFIDENCE,
    POWER,
    Summary,
    Verdict,
    minimum_detectable_difference,
    seeds_for_power,
)

MIXTURE_C = 0.5
"""The prior precision ``c`` of the standardised difference in the mixture (see the module notes)."""
ALPHA = 1 - CONFIDENCE


def mixture_ratios(diffs: Sequence[float], mu0: float = 0.0, c: float = MIXTURE_C) -> list[float]:
    """``L_k(mu0)`` for ``k = 1..n`` (the module notes' formula; ``Q_k = 0`` counts as no evidence)."""
    if c <= 0:
        raise ValueError(f"the mixture's c must be > 0, got {c}")
    out = []
    s = q = 0.0
    for k, x in enumerate(diffs, start=1):
        s += x - mu0
        q += (x - mu0) ** 2
        share = 0.0 if q == 0 else min(float(k), s * s / q) / (k + c)
        out.append(math.exp(0.5 * math.log(c / (c + k)) - 0.5 * k * math.log1p(-share)))
    return out


def anytime_p(diffs: Sequence[float], c: float = MIXTURE_C) -> float | None:
    """``min(1, min_k 1 / L_k(0))`` (None below two values: nothing to test)."""
    if len(diffs) < 2:
        return None
    return min(1.0, 1.0 / max(mixture_ratios(diffs, 0.0, c)))


def _q(n: int, c: float, alpha: float) -> float:
    return (n + c) * (1.0 - math.exp((2 * math.log(alpha) + math.log(c) - math.log(n + c)) / n))


def sequential_critical(n: int, c: float = MIXTURE_C, alpha: float = ALPHA) -> float:
    """``t*_n``: the ``|T|`` above which the confidence sequence at ``n`` seeds excludes 0 (inf where
    it cannot at ``n``)."""
    if n < 2:
        return math.inf
    q = _q(n, c, alpha)
    return math.inf if q >= n else math.sqrt((n - 1) * q / (n - q))


def confidence_sequence(
    diffs: Sequence[float], c: float = MIXTURE_C, alpha: float = ALPHA
) -> tuple[float, float]:
    """The running intersection over ``k = 2..n`` of the sets ``{mu : L_k(mu) < 1/alpha}``.

    Where the intersection is empty (a chance of at most alpha under the model) the last set alone is
    returned. Needs at least two values; bounds may be infinite.
    """
    if len(diffs) < 2:
        raise ValueError("a confidence sequence needs at least two values")
    low, high = -math.inf, math.inf
    last = (low, high)
    for k in range(2, len(diffs) + 1):
        part = diffs[:k]
        mean, sd = statistics.fmean(part), statistics.stdev(part)
        q = _q(k, c, alpha)
        half = math.inf if q >= k else math.sqrt(q * (k - 1) * sd * sd / (k * (k - q)))
        last = (mean - half, mean + half)
        low, high = max(low, last[0]), min(high, last[1])
    return (low, high) if low <= high else last


def sequential_summary(diffs: Sequence[float], c: float = MIXTURE_C, alpha: float = ALPHA) -> Summary:
    """:class:`Summary` of paired differences under the anytime-valid test: the interval is the
    confidence sequence, ``p`` the anytime p-value, the MDD that of the test at this ``n``."""
    n = len(diffs)
    if n == 0:
        return Summary(0, None, None, None, None, "no data", None)
    mean = statistics.fmean(diffs)
    if n == 1:
        return Summary(1, mean, None, None, None, "1 seed", None)
    sd = statistics.stdev(diffs)
    low, high = confidence_sequence(diffs, c, alpha)
    p = anytime_p(diffs, c)
    decided = p is not None and p < alpha
    verdict: Verdict = "inconclusive"
    if decided and low > 0:
        verdict = "holds"
    elif decided and high < 0:
        verdict = "reversed"
    mdd = minimum_detectable_difference(sd, n, critical=lambda k: sequential_critical(k, c, alpha))
    return Summary(n, mean, sd, low, high, verdict, mdd, p)


def sequential_seeds_for_power(
    delta: float, sd: float, power: float = POWER, c: float = MIXTURE_C, alpha: float = ALPHA
) -> int | None:
    """The seeds at which the confidence sequence excludes 0 with ``power`` for a true difference
    ``delta`` (judged at that ``n`` alone, so a slight overstatement: it may also cross earlier)."""
    return seeds_for_power(delta, sd, power, alpha, critical=lambda k: sequential_critical(k, c, alpha))


SD_BOUND = 0.90
"""The one-sided confidence of the lower bound on the paired sd that :func:`cannot_reach` judges on."""


def sd_lower_bound(sd: float, n: int, confidence: float = SD_BOUND) -> float:
    """A one-sided lower confidence bound of the paired sd from ``n`` normal differences of sample
    sd ``sd``: ``sd * sqrt((n - 1) / chi2_{confidence, n-1})`` (0 below two values)."""
    from scipy import stats

    if n < 2:
        return 0.0
    return sd * math.sqrt((n - 1) / float(stats.chi2.ppf(confidence, n - 1)))


def seeds_within_reach(
    summary: Summary, effect: float, c: float = MIXTURE_C, alpha: float = ALPHA
) -> int | None:
    """The seeds the sequence needs for 80 % power at the effect judged (the user's ``effect``, or the
    measured mean difference where that is larger: a claim is judged on what it shows) if the paired
    sd is as small as its :data:`SD_BOUND` lower bound; None without a spread, or beyond reach."""
    if summary.mean is None or summary.sd is None:
        return None
    judged = max(abs(effect), abs(summary.mean))
    return sequential_seeds_for_power(judged, sd_lower_bound(summary.sd, summary.n), c=c, alpha=alpha)


def cannot_reach(
    summary: Summary, effect: float, max_seeds: int, c: float = MIXTURE_C, alpha: float = ALPHA
) -> bool:
    """ "Not enough seeds": a claim that has ``max_seeds`` seeds, or whose sequence would need more
    than ``max_seeds`` for 80 % power at the effect judged even if the paired sd were as small as its
    lower confidence bound (:func:`seeds_within_reach`). Without a spread (fewer than two seeds) it
    can still be reached.

    The bound, not the sd itself: at the first seeds the sample sd is so noisy that a rule on it
    stops (at a true difference equal to the effect and a 20-seed maximum) about half the claims the
    seeds would have decided, and near its threshold it flips from round to round;
    ``benchmarks/simulate_verdicts.py`` measures both rules (docs/guide.md has the table). Stopping a
    claim never rejects anything, so it cannot raise the error rate; it only costs power.
    """
    if summary.mean is None or summary.sd is None:
        return False
    if summary.n >= max_seeds:
        return True
    needed = seeds_within_reach(summary, effect, c, alpha)
    return needed is None or needed > max_seeds


@dataclass(frozen=True)
class Design:
    """What a grid's ``--until-decided`` design fixed, as a file wrote it back: the most seeds a
    claim gets (None: not recorded) and the mixture ``c`` (:data:`MIXTURE_C` where not recorded)."""

    max_seeds: int | None = None
    mixture_c: float = MIXTURE_C


def read_design(written: Mapping[str, Any], where: str) -> Design:
    """``max_seeds`` and ``mixture_c`` of a design written to a file (``sequential.json``'s
    ``design``, ``claims.json``'s ``analysis``), by one rule: the most seeds a whole number >= 1, c a
    finite number > 0; absent or null: not recorded.

    Raises:
        DataError: another value, naming ``where`` (the file and key) and the field.
    """
    seeds, c = written.get("max_seeds"), written.get("mixture_c")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise DataError(f"{where}: max_seeds must be a whole number >= 1, got {seeds!r}")
    if c is not None and (
        isinstance(c, bool) or not isinstance(c, int | float) or not (math.isfinite(c) and c > 0)
    ):
        raise DataError(f"{where}: mixture_c must be a finite number > 0, got {c!r}")
    return Design(seeds, MIXTURE_C if c is None else float(c))


__all__ = [
    "ALPHA",
    "MIXTURE_C",
    "SD_BOUND",
    "Design",
    "anytime_p",
    "cannot_reach",
    "confidence_sequence",
    "mixture_ratios",
    "read_design",
    "sd_lower_bound",
    "seeds_within_reach",
    "sequential_critical",
    "sequential_seeds_for_power",
    "sequential_summary",
]
