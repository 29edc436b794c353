"""Read the numbers that docs pages quote out of rendered ``tables.md`` and ``claims.md`` files.

Shared by the tests that keep README.md and docs/*.md consistent with the committed run records
(``tests/system/test_docs.py``, ``tests/system/test_replication_numbers.py``).
"""

from __future__ import annotations

import re

DEMO_SECTION = "Demo: SimCSE, WhitenedCSE and SimCSE++ on one protocol (STS)"
"""The title of the cpu_demo spec's section in a rendered tables.md."""
DEMO_LINES = {
    "SimCSE": "SimCSE-BERT-base",
    "WhitenedCSE": r"\* WhitenedCSE-BERT-base",
    "SimCSE++": r"\* SimCSE++-BERT-base",
}
"""Method -> the label of its paper line in the cpu_demo table (the measured line follows it)."""


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split(" | ")]


def _plain(cell: str) -> str:
    """A rendered cell without bold, underline and seed count: ``76.42 ± 0.17``."""
    return re.sub(r"\*\*|</?u>| \(n = \d+\)", "", cell).strip()


def demo_averages(tables_md: str) -> dict[str, tuple[str, str, str]]:
    """Method -> (paper STS avg, measured mean, measured sd) of the cpu_demo table, as rendered."""
    section = tables_md.split(f"## {DEMO_SECTION}\n", 1)[1].split("\n## ", 1)[0].splitlines()
    out = {}
    for method, label in DEMO_LINES.items():
        at = next(i for i, row in enumerate(section) if row.startswith(f"| {label} |"))
        paper = _plain(_cells(section[at])[-1])
        measured = _cells(section[at + 1])
        assert measured[0].startswith("&nbsp;&nbsp;_measured:"), measured[0]
        mean, sd = _plain(measured[-1]).split(" ± ")
        out[method] = (paper, mean, sd)
    return out


def claim_cells(claims_md: str, spec: str, claim: str) -> tuple[str, str]:
    """(paper delta, ``measured [CI], verdict``) of one claim's row in a rendered claims.md."""
    rows = [_cells(r) for r in claims_md.splitlines() if r.startswith(f"| {spec} | {claim} |")]
    assert len(rows) == 1, (spec, claim, rows)
    _spec, _claim, _pair, paper, measured, ci, _n, verdict = rows[0][:8]  # the raw verdict's columns
    return paper, f"{measured} {ci}, {verdict}"
