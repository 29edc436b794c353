"""Writing the tables: one .tex per table and the Markdown preview."""

from __future__ import annotations

from pathlib import Path

from harness.reporting.tables.model import RenderedTable
from harness.reporting.tables.write import write_tables


def test_write_tables_writes_tex_and_preview(rendered: list[RenderedTable], tmp_path: Path) -> None:
    paths = write_tables(rendered, tmp_path / "out")
    assert sorted(p.name for p in paths) == [
        "report_rows.tex",
        "report_sweep.tex",
        "run_settings.md",
        "run_settings.tex",
        "tables.md",
    ]
    assert "## Fixture: sweeps" in (tmp_path / "out" / "tables.md").read_text(encoding="utf-8")
    appendix = (tmp_path / "out" / "run_settings.tex").read_text(encoding="utf-8")
    assert r"\subsection*{Run settings: Fixture: rows \& sections}" in appendix
    assert r"Table~\ref{tab:report_rows}" in appendix
