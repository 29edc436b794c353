"""Writing the rendered tables: one .tex per table and the Markdown preview."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.atomic import write_text
from harness.reporting.tables.latex import render_latex, render_settings_latex
from harness.reporting.tables.markdown import render_markdown_preview, render_settings_markdown
from harness.reporting.tables.model import RenderedTable


def write_tables(tables: Sequence[RenderedTable], out_dir: Path) -> list[Path]:
    """Write ``<name>.tex`` per table, ``tables.md`` with all of them, and the appendix of every
    measured row's settings (``run_settings.tex``, ``run_settings.md``); return the paths.

    Everything is rendered first, then each file is written atomically
    (:func:`harness.atomic.write_text`): a failure leaves that file and the ones after it as they were.
    """
    texts = {out_dir / f"{table.name}.tex": render_latex(table) for table in tables}
    texts[out_dir / "tables.md"] = render_markdown_preview(tables)
    texts[out_dir / "run_settings.tex"] = render_settings_latex(tables)
    texts[out_dir / "run_settings.md"] = render_settings_markdown(tables)
    return [write_text(path, text) for path, text in texts.items()]
