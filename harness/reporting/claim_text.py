"""How a claim's numbers, verdicts and group read, shared by the claims outputs and the forest plots."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.specs.claim import Claim

if TYPE_CHECKING:
    from harness.stats.correction import Analysis
    from harness.stats.paired import ClaimResult

MINUS = "\u2212"
"""The minus sign of every printed difference (a hyphen is no minus beside a ``+``)."""

PAPER_CITATIONS = {"WhitenedCSE": "Zhuo et al., ACL 2023", "SimCSE++": "Xu et al., EMNLP 2023"}
"""Author and venue of the papers whose tables the specs cite (``cites = "<paper> Table <n>"``)."""


PAPER_ENCODER = re.compile(r"-((?:S?BERT|RoBERTa)-(?:base|large))\b")
"""The paper's encoder in a row label (``SimCSE-BERT-base``, ``SimCSE++-SBERT-base``)."""


def measured_pair(pair: str, encoder: str) -> str:
    """A pair as measured: the paper's encoder in its row names replaced by the one that was run
    (``WhitenedCSE-BERT-base > SimCSE-BERT-base`` measured on all-MiniLM-L6-v2 reads
    ``WhitenedCSE > SimCSE (all-MiniLM-L6-v2, paper: BERT-base)``); unchanged where the rows name
    no encoder or the one measured."""
    named = list(dict.fromkeys(PAPER_ENCODER.findall(pair)))
    if not named or named == [encoder]:
        return pair
    return f"{PAPER_ENCODER.sub('', pair)} ({encoder}, paper: {', '.join(named)})"


def measured_on(results: Sequence[ClaimResult]) -> str:
    """The encoders the claims' runs used, for a heading (``all-MiniLM-L6-v2``), or empty."""
    return ", ".join(sorted({r.encoder for r in results if r.encoder}))


def number(value: float | None, sign: bool = True) -> str:
    """A difference as printed: ``+0.54``, ``−0.18`` (a real minus), ``0.00`` for zero; a value that
    rounds to zero at two decimals keeps a third (``−0.004``) rather than print a signed zero."""
    if value is None:
        return "--"
    digits = 2 if round(abs(value), 2) > 0 else 3
    if round(abs(value), digits) == 0:
        return "0.00"
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    return text.replace("-", MINUS)


def heading(claim: Claim) -> str:
    """A claims group's heading: the paper table with its authors, and the table's title
    (``WhitenedCSE Table 4 (Zhuo et al., ACL 2023): Number of groups and shuffling``)."""
    if not claim.cites:
        return claim.spec
    paper = claim.cites.split(" Table")[0]
    cited = f"{claim.cites} ({PAPER_CITATIONS[paper]})" if paper in PAPER_CITATIONS else claim.cites
    return f"{cited}: {claim.title}" if claim.title else cited


VERDICT_TEXT = {  # in the order the totals list them
    "holds": "holds",
    "reversed": "reversed",
    "ruled out": "ruled out",
    "not enough seeds": "not enough seeds",
    "undecided": "undecided",
    "inconclusive": "inconclusive",
    "1 seed": "1 seed: no interval",
    "no data": "no finished runs",
    "not run": "not run here",
}


DAGGER = "\u2020"
"""The mark of a verdict whose paired differences fail the shape check."""


def flagged(result: ClaimResult) -> str:
    """`` † sign-flip p 0.250`` after the verdict of a claim whose differences fail the shape check
    (:mod:`harness.stats.shape`), else empty."""
    if not result.shape:
        return ""
    return f" {DAGGER} sign-flip p {p_text(result.sign_flip)}"


def shape_notes(results: Sequence[ClaimResult]) -> list[str]:
    """One line per claim whose differences fail the shape check: what the check found."""
    from harness.stats.shape import SHAPE_ALPHA

    flagged_ = [r for r in results if r.shape and not r.same_as]
    if not flagged_:
        return []
    head = (
        f"{DAGGER} the paired differences do not look normal, as the test assumes (an outlier seed, or "
        f"Shapiro-Wilk p < {SHAPE_ALPHA:g}); beside the verdict, the exact sign-flip p-value over the "
        "seeds, which does not assume it:"
    )
    lines = [f"{r.claim.spec}: {r.claim.label or r.claim.text}: {r.shape}" for r in flagged_]
    return [
        head,
        *(f"{line}; sign-flip p {p_text(r.sign_flip)}" for line, r in zip(lines, flagged_, strict=True)),
    ]


def outcome_note(analysis: Analysis) -> str:
    """What the outcome after correction says where a claim is not decided (plain text)."""
    from harness.stats.sequential import SD_BOUND

    effect = f"E = {analysis.effect.text}"
    ruled = (
        f"ruled out = not decided and the interval lies inside \u00b1E ({effect}): a difference that "
        "large is excluded"
    )
    if not (analysis.sequential and analysis.max_seeds):
        return f"{ruled}; inconclusive = neither decided nor ruled out"
    return (
        f"{ruled}; not enough seeds = the grid's seeds (at most {analysis.max_seeds}, or its budget) cannot "
        f"reach a verdict at E at this noise (judged on the paired sd's {SD_BOUND:.0%} lower bound): no "
        "evidence either way; undecided = more seeds may decide it"
    )


def interval_text(result: ClaimResult) -> str:
    """A claim's interval as printed (``--`` where it has none)."""
    s = result.summary
    if s.low is None or s.high is None:
        return "--"
    return f"[{_bound(s.low)}, {_bound(s.high)}]"


def _bound(value: float) -> str:
    """An interval's end (a confidence sequence is unbounded at the first few seeds)."""
    if math.isinf(value):
        return "+inf" if value > 0 else f"{MINUS}inf"
    return number(value)


def p_text(value: float | None) -> str:
    """A p-value as the outputs print it: three decimals, ``<0.001`` below that, ``--`` for none."""
    if value is None:
        return "--"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def claim_rows(results: Sequence[ClaimResult]) -> list[list[str]]:
    """Each claim as the printed cells of every output: spec, statement, pair, paper delta, measured
    mean, interval, n, verdict, p, adjusted p, outcome after correction (the corrected verdict where
    it holds or is reversed, else ruled out, not enough seeds, undecided or inconclusive), MDD."""
    rows = []
    for r in results:
        s = r.summary
        rows.append(
            [
                r.claim.spec,
                r.claim.text,
                r.claim.label,
                number(r.claim.paper_delta),
                number(s.mean),
                interval_text(r),
                str(s.n),
                VERDICT_TEXT[s.verdict] + (" (repeat)" if r.same_as else "") + flagged(r),
                p_text(s.p),
                p_text(r.adjusted),
                VERDICT_TEXT[r.outcome],
                number(s.mdd, sign=False),
            ]
        )
    return rows


__all__ = [
    "DAGGER",
    "MINUS",
    "PAPER_CITATIONS",
    "VERDICT_TEXT",
    "claim_rows",
    "flagged",
    "heading",
    "interval_text",
    "measured_on",
    "measured_pair",
    "number",
    "outcome_note",
    "p_text",
    "shape_notes",
]
