"""Error control across claims: how claims are tested, their families, and the verdicts after correction.

Every claim gets a raw verdict from its own 95 % interval (:mod:`harness.stats.paired`, or
the anytime-valid sequence of :mod:`harness.stats.sequential` where seeds were added until
decided). Tested together, about one claim in twenty would "hold" or be "reversed" by chance when
nothing differs, so the claims' p-values are also adjusted within a family
(:func:`~harness.stats.paired.adjust_pvalues`) and a corrected verdict is given:

* family ``table``: the claims of one table spec; ``paper``: the claims of one paper (the paper its
  ``better`` cell cites, :attr:`harness.specs.claim.Claim.paper`); ``all``: every claim rendered
  together;
* a comparison that several rows repeat (the same runs on the same score) is one hypothesis: it is
  counted once in its family and every repeat gets its adjusted p-value;
* corrected verdict: holds or reversed (the raw verdict's direction) where the adjusted p-value is
  below alpha = 0.05, else inconclusive; a claim without a p-value (1 seed, no data, not run here)
  keeps its raw verdict, and ``none`` keeps every raw verdict as it is. The raw interval is not
  changed.

The defaults (Holm within each table) and why: docs/guide.md, "Error control across claims".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.errors import ConfigError
from harness.stats.outcomes import NOT_ENOUGH_SEEDS, UNDECIDED, Effect, open_outcome, outcome
from harness.stats.paired import (
    CORRECTIONS,
    ClaimResult,
    CorrectionMethod,
    Summariser,
    Verdict,
    adjust_pvalues,
    summarise,
)
from harness.stats.sequential import ALPHA, MIXTURE_C, sequential_summary

Family = Literal["table", "paper", "all"]
FAMILIES: tuple[Family, ...] = ("table", "paper", "all")
DEFAULT_CORRECTION: CorrectionMethod = "holm"
DEFAULT_FAMILY: Family = "table"
METHOD_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}


@dataclass(frozen=True)
class Analysis:
    """How a set of claims is tested and corrected.

    Attributes:
        correction: ``holm``, ``bh`` or ``none``.
        family: the claims adjusted together: ``table``, ``paper`` or ``all``.
        sequential: test with the anytime-valid confidence sequence (the seeds were added by
            ``harness grid --until-decided``) instead of the fixed-seed t interval.
        mixture_c: the sequence's mixture parameter (the one the grid used).
        effect: the smallest difference that matters: a claim whose interval lies inside +-effect is
            ``ruled out`` (:mod:`harness.stats.outcomes`).
        max_seeds: the most seeds the grid may give a claim (``--until-decided``): with the
            sequence, an open claim is then ``not enough seeds`` or ``undecided``; None: fixed seeds.
        stopped: why the grid that added the seeds stopped with claims open (its budget, no runs
            left): those claims have ``not enough seeds``, not ``undecided``; empty: it did not.
    """

    correction: CorrectionMethod = DEFAULT_CORRECTION
    family: Family = DEFAULT_FAMILY
    sequential: bool = False
    mixture_c: float = MIXTURE_C
    effect: Effect = field(default_factory=Effect)
    max_seeds: int | None = None
    stopped: str = ""

    def __post_init__(self) -> None:
        if self.correction not in CORRECTIONS:
            raise ConfigError(
                f"--correction must be one of {', '.join(CORRECTIONS)}, got {self.correction!r}"
            )
        if self.family not in FAMILIES:
            raise ConfigError(f"--family must be one of {', '.join(FAMILIES)}, got {self.family!r}")

    def summariser(self) -> Summariser:
        """The per-claim test: the t interval, or the confidence sequence with this ``c``."""
        if not self.sequential:
            return summarise
        c = self.mixture_c
        return lambda diffs: sequential_summary(diffs, c)

    @property
    def interval(self) -> str:
        """The interval's column label: ``95% CI`` (fixed seeds) or ``95% CS`` (sequence)."""
        return "95% CS" if self.sequential else "95% CI"

    @property
    def test(self) -> str:
        """The per-claim test in words."""
        if self.sequential:
            return f"anytime-valid 95% confidence sequence (t mixture, c = {self.mixture_c:g})"
        return "Student-t 95% interval"

    @property
    def label(self) -> str:
        """The correction in a column header: ``Holm per table``, ``BH per paper``, ``none``."""
        if self.correction == "none":
            return "none"
        short = "Holm" if self.correction == "holm" else "BH"
        return f"{short} per {self.family}" if self.family != "all" else f"{short}, all claims"

    @property
    def described(self) -> str:
        """The correction in a sentence's words."""
        if self.correction == "none":
            return "no correction (each claim at alpha = 0.05 on its own)"
        family = {"table": "within each table", "paper": "within each paper", "all": "across all claims"}
        return f"{METHOD_NAMES[self.correction]} {family[self.family]} (alpha = 0.05)"

    def to_json(self) -> dict[str, Any]:
        return {
            "correction": self.correction,
            "family": self.family,
            "alpha": ALPHA,
            "test": "sequential" if self.sequential else "t",
            "mixture_c": self.mixture_c if self.sequential else None,
            "effect": self.effect.argument,
            "max_seeds": self.max_seeds if self.sequential else None,
        }


DEFAULT_ANALYSIS = Analysis()


@dataclass(frozen=True)
class Member:
    """One claim as the correction sees it.

    Attributes:
        family: the name of its family (a table, a paper, ``all``).
        hypothesis: what it tests; rows with the same one (repeats) count once.
        p: its p-value (None: nothing tested).
        verdict: its raw verdict.
    """

    family: str
    hypothesis: str
    p: float | None
    verdict: Verdict


def family_of(spec: str, paper: str, family: Family) -> str:
    """The family a claim of table ``spec`` and paper ``paper`` belongs to."""
    return {"table": spec, "paper": paper or spec, "all": "all"}[family]


def correct_tested(
    items: Sequence[Member], method: CorrectionMethod, alpha: float = ALPHA
) -> list[tuple[float | None, Verdict]]:
    """``(adjusted p, corrected verdict)`` of every item (see the module notes), in order."""
    adjusted: dict[tuple[str, str], float] = {}
    families: dict[str, dict[str, float]] = {}
    for item in items:
        if item.p is not None:
            families.setdefault(item.family, {}).setdefault(item.hypothesis, item.p)
    for family, hypotheses in families.items():
        keys = list(hypotheses)
        for key, value in zip(keys, adjust_pvalues([hypotheses[k] for k in keys], method), strict=True):
            adjusted[(family, key)] = value
    out: list[tuple[float | None, Verdict]] = []
    for item in items:
        p = adjusted.get((item.family, item.hypothesis))
        verdict = item.verdict
        if p is not None and method != "none" and verdict in ("holds", "reversed") and not p < alpha:
            verdict = "inconclusive"
        out.append((p, verdict))
    return out


def hypothesis_of(result: ClaimResult) -> str:
    """The hypothesis a claim tests: its comparison (shared by repeats), else the claim itself."""
    if result.comparison:
        return " | ".join(result.comparison)
    return f"{result.claim.spec} | {result.claim.better} | {result.claim.worse} | {result.claim.column}"


def correct(results: Sequence[ClaimResult], analysis: Analysis = DEFAULT_ANALYSIS) -> list[ClaimResult]:
    """The results with their family, adjusted p-value, corrected verdict and what each is when not
    decided (:func:`~harness.stats.outcomes.open_outcome`) filled in."""
    items = [
        Member(
            family_of(r.claim.spec, r.claim.paper, analysis.family),
            hypothesis_of(r),
            r.summary.p,
            r.summary.verdict,
        )
        for r in results
    ]
    out = []
    for result, item, (p, verdict) in zip(
        results, items, correct_tested(items, analysis.correction), strict=True
    ):
        max_seeds = analysis.max_seeds if analysis.sequential else None
        effect = analysis.effect.of(result.claim.paper_delta)
        undecided = open_outcome(result.summary, effect, max_seeds, analysis.mixture_c)
        if undecided == UNDECIDED and analysis.sequential and analysis.stopped:
            undecided = NOT_ENOUGH_SEEDS  # the grid gives it no more seeds
        out.append(
            dataclasses.replace(
                result, family=item.family, adjusted=p, corrected=verdict, open_outcome=undecided
            )
        )
    return out


def correct_json_rows(rows: Sequence[Mapping[str, Any]], analysis: Analysis) -> list[dict[str, Any]]:
    """Rows of a ``claims.json`` corrected again under ``analysis`` (``harness report --correction``):
    the raw p-values and verdicts as written, new families, adjusted p-values and corrected verdicts."""
    items = []
    for row in rows:
        spec, paper = str(row.get("spec", "")), str(row.get("paper", ""))
        comparison = row.get("comparison")
        if isinstance(comparison, list) and comparison:
            hypothesis = " | ".join(str(c) for c in comparison)
        else:
            hypothesis = " | ".join(str(row.get(k, "")) for k in ("spec", "better", "worse", "column"))
        p = row.get("p")
        verdict = row.get("verdict")
        items.append(
            Member(
                family_of(spec, paper, analysis.family),
                hypothesis,
                float(p) if isinstance(p, int | float) else None,
                verdict if isinstance(verdict, str) else "no data",  # type: ignore[arg-type]
            )
        )
    out = []
    for row, item, (p, verdict) in zip(rows, items, correct_tested(items, analysis.correction), strict=True):
        fixed = {**row, "family": item.family, "p_adjusted": p, "verdict_corrected": verdict}
        if isinstance(row.get("open_outcome"), str):
            fixed["outcome"] = outcome(verdict, row["open_outcome"])
        out.append(fixed)
    return out


__all__ = [
    "DEFAULT_ANALYSIS",
    "FAMILIES",
    "Analysis",
    "Family",
    "Member",
    "correct",
    "correct_json_rows",
    "correct_tested",
    "family_of",
    "hypothesis_of",
]
