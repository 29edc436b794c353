"""Reporters: run records + table specs -> LaTeX / Markdown tables; run records + plot specs -> figures.

Reporters only read stored run records (:class:`harness.store.run_store.RunStore`); no number reaches a table
any other way. Computing a table (:func:`~harness.reporting.tables.build.build_tables`) is kept apart from
writing files (:func:`~harness.reporting.tables.write.write_tables`).
"""

from __future__ import annotations

from harness.reporting.tables.build import build_tables
from harness.reporting.tables.latex import render_latex
from harness.reporting.tables.markdown import render_markdown
from harness.reporting.tables.model import RenderedTable
from harness.reporting.tables.write import write_tables

__all__ = ["RenderedTable", "build_tables", "render_latex", "render_markdown", "write_tables"]
