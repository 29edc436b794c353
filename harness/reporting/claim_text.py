"""How a claim's numbers, verdicts and group read, shared by the claims outputs and the forest plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.specs.claim import Claim

if TYPE_CHECKING:
    from harness.reporting.statistics import ClaimResult

MINUS = "\u2212"
"""The minus sign of every printed difference (a hyphen is no minus beside a ``+``)."""

PAPER_CITATIONS = {"WhitenedCSE": "Zhuo et al., ACL 2023", "SimCSE++": "Xu et al., EMNLP 2023"}
"""Author and venue of the papers whose tables the specs cite (``cites = "<paper> Table <n>"``)."""


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


VERDICT_TEXT = {
    "holds": "holds",
    "reversed": "reversed",
    "inconclusive": "inconclusive",
    "1 seed": "1 seed: no interval",
    "no data": "no finished runs",
    "not run": "not run here",
}


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
    mean, interval, n, verdict, p, adjusted p, corrected verdict, MDD."""
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
                VERDICT_TEXT[s.verdict] + (" (repeat)" if r.same_as else ""),
                p_text(s.p),
                p_text(r.adjusted),
                VERDICT_TEXT[r.corrected_verdict],
                number(s.mdd, sign=False),
            ]
        )
    return rows


__all__ = [
    "MINUS",
    "PAPER_CITATIONS",
    "VERDICT_TEXT",
    "claim_rows",
    "heading",
    "interval_text",
    "number",
    "p_text",
]
