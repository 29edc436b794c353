"""How a claim's numbers and group read, shared by the claims tables and the forest plots."""

from __future__ import annotations

from harness.specs.claim import Claim

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


__all__ = ["MINUS", "PAPER_CITATIONS", "heading", "number"]
