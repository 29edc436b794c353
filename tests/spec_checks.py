"""The checks every table spec passes against the papers' quoted tables (PAPER_TABLES.md).

They take a spec and the parsed quoted tables and name no spec, so a new spec of a new source needs
its TOML file and its quoted numbers, nothing else (``tests/system/test_paper_tables.py`` proves it
on a made-up source). A spec either reproduces the table it cites (every row, in the paper's order) or is an
excerpt (the ``make run`` demo: a few rows of several tables), whose every cited table some other
spec reproduces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from harness.specs.model import TableSpec, sweep_cell_key
from tests.paper_tables import number, paper_rows

Paper = dict[str, list[dict[str, Any]]]


def paper_labels(paper: Paper, table: str) -> list[str]:
    """The row labels of a quoted table, in the paper's order (the ``* `` mark of its methods removed)."""
    return [c[0][2:] if c[0].startswith("* ") else c[0] for t in paper[table] for c in t["rows"]]


def spec_labels(spec: TableSpec) -> list[str]:
    return [r.label for r in spec.rows] or [s.label for s in spec.sweeps]


def reproduces(spec: TableSpec, paper: Paper, table: str) -> bool:
    """Whether ``spec`` cites ``table`` and lists every one of its rows, in the paper's order."""
    return spec.cites == table and table in paper and spec_labels(spec) == paper_labels(paper, table)


def check_cites(spec: TableSpec, paper: Paper) -> None:
    """The spec and each of its rows cite a quoted table."""
    assert spec.cites in paper, f"{spec.path}: cites unknown table {spec.cites!r}"
    for row in spec.rows:
        assert row.cites in paper, f"{spec.path}: row {row.label!r} cites unknown {row.cites!r}"


def check_paper_numbers(spec: TableSpec, paper: Paper) -> None:
    """Every ``paper`` number (and ``ours`` mark) of a row or sweep equals the quoted table's."""
    name = spec.path.name
    for row in spec.rows:
        rows = paper_rows(paper[row.cites])
        assert row.label in rows, f"{name}: {row.label!r} is not a row of {row.cites}"
        header, numbers = rows[row.label]
        assert list(spec.column_labels) == header or len(spec.columns) == 1, f"{name}: columns"
        assert list(row.paper) == numbers, f"{name}: {row.label}"
        assert row.ours == any(c[0] == f"* {row.label}" for t in paper[row.cites] for c in t["rows"]), (
            f"{name}: {row.label}: ours mark differs from the paper's *"
        )
    for sweep in spec.sweeps:
        matches = [t for t in paper[spec.cites] if t["header"][0] == sweep.header]
        assert matches, f"{name}: no table headed {sweep.header!r} in {spec.cites}"
        table = matches[0]
        assert [float(v) for v in sweep.values] == [number(h) for h in table["header"][1:]]
        assert sweep.label in [r[0] for r in table["rows"]]
        quoted = next(r for r in table["rows"] if r[0] == sweep.label)
        assert list(sweep.paper) == [number(c) for c in quoted[1:]], f"{name}: {sweep.label}"


def check_reproduced_or_excerpt(spec: TableSpec, specs: Sequence[TableSpec], paper: Paper) -> None:
    """The spec reproduces its cited table, or every table it cites is reproduced by some spec."""
    if reproduces(spec, paper, spec.cites):
        return
    for table in {spec.cites, *(row.cites for row in spec.rows)}:
        assert any(reproduces(s, paper, table) for s in specs), (
            f"{spec.path.name}: lists {spec_labels(spec)}, not every row of {table} "
            f"({paper_labels(paper, table)}), and no spec reproduces {table} in full"
        )


def check_claim_deltas(spec: TableSpec, paper: Paper) -> int:
    """Every claim's ``paper_delta`` equals the quoted numbers' difference; returns the claims checked."""
    for claim in spec.claims:
        values = []
        for key in (claim.better, claim.worse):
            row = next((r for r in spec.rows if r.label == key), None)
            if row is not None:
                header, numbers = paper_rows(paper[row.cites])[key]
                column = spec.column_labels[spec.columns.index(claim.column)]
                values.append(numbers[header.index(column)] if column in header else numbers[-1])
                continue
            sweep = next(s for s in spec.sweeps if key in {sweep_cell_key(s, v) for v in s.values})
            table = next(t for t in paper[spec.cites] if t["header"][0] == sweep.header)
            quoted = next(r for r in table["rows"] if r[0] == sweep.label)
            index = [sweep_cell_key(sweep, v) for v in sweep.values].index(key)
            values.append(number(quoted[1 + index]))
        assert claim.paper_delta == pytest.approx(values[0] - values[1], abs=1e-9), claim
    return len(spec.claims)


def check_spec(spec: TableSpec, specs: Sequence[TableSpec], paper: Paper) -> None:
    """Every check above, for one spec among ``specs``."""
    check_cites(spec, paper)
    check_paper_numbers(spec, paper)
    check_reproduced_or_excerpt(spec, specs, paper)
    check_claim_deltas(spec, paper)
