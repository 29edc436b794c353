"""A claim of a table spec: one cell beats another on one column, by the paper's delta."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One directional claim of a table: ``better`` beats ``worse`` on ``column``.

    Attributes:
        spec: the table spec's name.
        better, worse: cell keys (row labels, or sweep cell keys ``label [vary=value]``).
        column: the score column compared (a key of the spec's columns).
        paper_delta: ``paper(better) - paper(worse)`` from the spec's quoted numbers.
        text: a one-line statement of the claim.
    """

    spec: str
    better: str
    worse: str
    column: str
    paper_delta: float
    text: str
