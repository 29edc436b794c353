"""A parser of tables/PAPER_TABLES.md (the papers' quoted numbers), shared by the spec and claim tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

PAPER_TABLES = Path(__file__).resolve().parents[1] / "tables" / "PAPER_TABLES.md"
"""The papers' quoted numbers, kept in the repository (a copy of the team's shared PAPER_TABLES.md)."""
SHARED_PAPER_TABLES = Path(__file__).resolve().parents[1].parent / "shared" / "docs" / "PAPER_TABLES.md"
"""The team's copy beside the checkout, where there is one."""


def parse_paper_tables(text: str) -> dict[str, list[dict[str, Any]]]:
    """``{"WhitenedCSE Table 1": [{"header": [...], "rows": [[...], ...]}, ...]}`` from the markdown."""
    sections: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] | None = None
    open_table = False
    for line in text.splitlines():
        heading = re.match(r"^## (.+?) \u2014 ", line)
        if heading:
            current = sections.setdefault(heading.group(1), [])
            open_table = False
            continue
        if current is None:
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if all(set(c) <= {"-"} for c in cells):
                continue
            if not open_table:
                current.append({"header": cells, "rows": []})
                open_table = True
            else:
                current[-1]["rows"].append(cells)
        else:
            open_table = False
    return sections


def number(cell: str) -> float:
    """The leading number of a cell (``77.81 (+1.56)`` -> 77.81)."""
    match = re.match(r"^\s*(-?\d+(?:\.\d+)?)", cell)
    if match is None:
        raise ValueError(f"no number in {cell!r}")
    return float(match.group(1))


def paper_rows(tables: list[dict[str, Any]]) -> dict[str, tuple[list[str], list[float]]]:
    out = {}
    for t in tables:
        for cells in t["rows"]:
            label = cells[0][2:] if cells[0].startswith("* ") else cells[0]
            out[label] = (t["header"][1:], [number(c) for c in cells[1:]])
    return out
