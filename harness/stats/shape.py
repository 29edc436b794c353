"""Whether a claim's paired differences look as its test assumes, and a check that assumes less.

Both the fixed-seed t interval and the anytime-valid sequence assume roughly normal per-seed
differences. Heavy symmetric tails do them little harm; skewed differences (one seed's run that
collapsed, say) can make a verdict rest on one seed. So every claim's differences are checked
(:func:`shape_flag`, at :data:`SHAPE_ALPHA` each):

* an outlier seed: the largest studentised deleted residual,
  ``|d_i - mean_{-i}| / (sd_{-i} sqrt(1 + 1/(n-1)))``, which is t with ``n - 2`` degrees of freedom
  for normal differences, beyond the Bonferroni critical value ``t_{1 - SHAPE_ALPHA/(2n), n-2}``
  (4 seeds or more);
* otherwise not normal: the Shapiro-Wilk test's p-value below :data:`SHAPE_ALPHA` (5 seeds or more;
  ``scipy.stats.shapiro``), printed with the sample skewness.

Under normal differences each rule flags at most about SHAPE_ALPHA of claims (together about 2 %,
``benchmarks/simulate_verdicts.py`` measures it). Beside a flagged claim's verdict the outputs print
:func:`sign_flip_p`: the exact sign-flip permutation p-value of the mean difference over the seeds,
which assumes only that a difference is as likely positive as negative when nothing differs. It is
a fixed-seed check, not an anytime-valid one: it says whether the verdict would stand without the
normal model, e.g. a verdict that one far seed carries gets a large sign-flip p.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

SHAPE_ALPHA = 0.01
"""The level of each shape rule (an outlier seed; Shapiro-Wilk)."""
EXACT_UP_TO = 40
"""Seeds up to which :func:`sign_flip_p` enumerates every sign pattern (2^20 sums per half)."""
DRAWS = 200_000
"""Random sign patterns beyond :data:`EXACT_UP_TO` seeds (a fixed generator seed)."""


def outlier_index(diffs: Sequence[float], alpha: float = SHAPE_ALPHA) -> int | None:
    """The index of the seed whose difference is an outlier (see the module notes), or None."""
    from scipy import stats

    n = len(diffs)
    if n < 4:
        return None
    x = np.asarray(diffs, dtype=float)
    total, squares = float(x.sum()), float((x * x).sum())
    worst, at = 0.0, None
    for i, value in enumerate(x):
        mean = (total - value) / (n - 1)
        var = max(0.0, (squares - value * value - (n - 1) * mean * mean) / (n - 2))
        gap = abs(value - mean)
        scaled = gap / math.sqrt(var * (1 + 1 / (n - 1))) if var > 0 else (math.inf if gap > 0 else 0.0)
        if scaled > worst:
            worst, at = scaled, i
    critical = float(stats.t.ppf(1 - alpha / (2 * n), n - 2))
    return at if worst > critical else None


def shape_flag(seeds: Sequence[int], diffs: Sequence[float], alpha: float = SHAPE_ALPHA) -> str:
    """Why the differences do not look normal (``seed 46 an outlier``, ``not normal: Shapiro-Wilk p
    0.004, skewness +1.9``), or empty."""
    from scipy import stats

    at = outlier_index(diffs, alpha)
    if at is not None:
        return f"seed {seeds[at]} an outlier"
    if len(diffs) < 5 or statistics.pstdev(diffs) == 0:
        return ""
    p = float(stats.shapiro(diffs).pvalue)
    if p < alpha:
        skew = float(stats.skew(diffs))
        return f"not normal: Shapiro-Wilk p {p:.3f}, skewness {skew:+.1f}"
    return ""


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """Every sum ``sum_i s_i v_i`` over the sign patterns ``s`` (2^len(values) of them)."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def sign_flip_p(diffs: Sequence[float]) -> float | None:
    """The two-sided sign-flip p-value of ``mean(diffs) = 0``: the share of the ``2^n`` sign patterns
    whose ``|sum s_i d_i|`` is at least the observed ``|sum d_i|`` (exact up to :data:`EXACT_UP_TO`
    seeds, by sums of the two halves; beyond, :data:`DRAWS` random patterns). None below two."""
    n = len(diffs)
    if n < 2:
        return None
    x = np.abs(np.asarray(diffs, dtype=float))
    observed = abs(float(np.sum(diffs)))
    if observed == 0:
        return 1.0
    threshold = observed - 1e-9 * float(x.sum())  # ties (the observed pattern itself) count
    if n > EXACT_UP_TO:
        rng = np.random.default_rng(0)
        signs = rng.choice([-1.0, 1.0], size=(DRAWS, n))
        hits = int(np.count_nonzero(np.abs(signs @ x) >= threshold))
        return (hits + 1) / (DRAWS + 1)
    half = n // 2
    first, second = _signed_sums(x[:half]), np.sort(_signed_sums(x[half:]))
    upper = len(second) - np.searchsorted(second, threshold - first, side="left")
    lower = np.searchsorted(second, -threshold - first, side="right")
    return float((upper.sum() + lower.sum()) / 2.0**n)


__all__ = ["DRAWS", "EXACT_UP_TO", "SHAPE_ALPHA", "outlier_index", "shape_flag", "sign_flip_p"]
