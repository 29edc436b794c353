"""Building tables from records: the cells of the fixture specs (seeds, ranking, n/a, failed runs
left out), every real spec without records, and one resolution of the settings per table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.reporting.tables.build import build_tables
from harness.reporting.tables.latex import render_latex
from harness.reporting.tables.model import RenderedTable
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from tests.helpers import (
    make_corpus_root,
)


def test_grid_and_tables_resolve_through_one_path(corpus_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No command resolves a throwaway config to learn the profile's model or seed: grid expansion and
    # table building go through resolve_settings once per set of overrides and resolve_run per cell.
    import harness.specs.cells as plan_mod
    import harness.store.run_config as run_config_mod
    from harness.reporting.tables.build import build_tables

    calls: list[str] = []
    real_settings = plan_mod.resolve_settings

    def counting_settings(*args: Any, **kwargs: Any) -> Any:
        calls.append("settings")
        return real_settings(*args, **kwargs)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("resolve_config called: a throwaway config was resolved")

    monkeypatch.setattr(plan_mod, "resolve_settings", counting_settings)  # where the expansion calls it
    monkeypatch.setattr(run_config_mod, "resolve_config", forbidden)
    spec = load_table_spec(Path("tables/whitenedcse_table4.toml"))
    build_tables([spec], RunStore(corpus_root / "runs"), "cpu", data_root=corpus_root)
    assert calls == ["settings"]  # 16 cells, one set of overrides: one resolution of the settings


def _line(table: RenderedTable, label: str, kind: str = "measured") -> list[str]:
    """The cells of the paper line labelled ``label`` or of the measured line just below it."""
    for i, line in enumerate(table.lines):
        if line.label == label and line.kind == "paper":
            chosen = table.lines[i + 1] if kind == "measured" else line
            assert chosen.kind == kind
            return [f"{c.style}:{c.text}" for c in chosen.cells]
    raise KeyError(label)


def test_rows_table_cells(rendered: list[RenderedTable]) -> None:
    rows = rendered[0]
    # two seeds: mean +- sample std; bold/underline per column among measured values
    assert _line(rows, "SimCSE-BERT-base") == [
        "best:61.00 \u00b1 1.41",
        "second:70.50 \u00b1 0.71",
        "best:65.50 \u00b1 0.71",
    ]
    assert _line(rows, "SimCSE++-BERT-base") == ["best:61.00", "best:72.50", "second:64.00"]
    # failed / running records are ignored: the cell stays empty
    assert _line(rows, "+DCL") == [":--", ":--", ":--"]
    # paper numbers are ranked among themselves (quoted rows included), within the section
    assert _line(rows, "BERT-base (first-last avg.)", "paper")[:1] == [":39.70"]
    # a tie for best leaves no second place
    assert _line(rows, "BERT-base (first-last avg.)")[0] == ":30.11"
    quoted = [ln for ln in rows.lines if ln.kind == "quoted"]
    assert [(q.label, q.marks) for q in quoted] == [
        ("GloVe (avg.)", "\u2020"),
        ("SimCSE-BERT-large", "\u2021"),
        ("ConSERT-large", "\u2020"),
    ]
    assert any("runs under profile paper only" in n for n in rows.notes)
    # the notes say what a measured line is in words; the settings go to the appendix
    assert rows.notes[0].startswith("Italic 'measured' lines: this harness's run of the row above on random")
    assert "4 training steps of batch 8" in rows.notes[0] and "over 2 seeds" in rows.notes[0]
    assert not any("simcsepp(" in n or ":82480" in n or "max_steps" in n for n in rows.notes)
    assert any(line.startswith("SimCSE++-BERT-base: simcsepp(") for line in rows.settings)


def test_sweep_table_cells(rendered: list[RenderedTable]) -> None:
    sweep = rendered[1]
    assert sweep.header == ["Group size", "16", "32", "96", "64"]
    assert _line(sweep, "STS-Avg. (shuffled)") == [
        ":50.00",
        "best:53.00 \u00b1 0.71",
        ":n/a (d=64)",
        ":51.00",
    ]
    assert _line(sweep, "w/o shuffled") == [":49.00", "second:52.00", ":n/a (d=64)", ":--"]
    # the m = 2 cell shares its run with the 32-group shuffled cell
    assert _line(sweep, "STS-Avg.") == ["best:53.00 \u00b1 0.71", "second:52.00"]
    assert any(
        n.startswith("n/a: not valid for this profile's encoder (d = 64): num_groups=96") for n in sweep.notes
    )
    headers = [ln for ln in sweep.lines if ln.kind == "header"]
    assert [h.label for h in headers] == ["Positive Number"]


def test_every_real_spec_renders_without_records(tmp_path: Path) -> None:
    from harness.specs.find import load_table_specs

    data_root = make_corpus_root(tmp_path / "data")
    tables = build_tables(load_table_specs(), RunStore(tmp_path / "runs"), "cpu", data_root=data_root)
    assert len(tables) >= 11
    for table in tables:
        tex = render_latex(table)
        floats = tex.count(r"\end{table")  # a table too tall for a page prints as two floats
        assert tex.count(r"\begin{tabular}") == floats and floats in (1, 2) and "profile cpu" in tex
    table4 = next(t for t in tables if t.name == "whitenedcse_table4")
    # group counts keep their channels per group (384 at d = 768 -> 192 at d = 384): none is n/a
    assert "n/a" not in render_latex(table4)
