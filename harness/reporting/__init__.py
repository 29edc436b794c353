"""Reporters: run records + table specs -> LaTeX / Markdown tables; run records + plot specs -> figures.

Reporters only read stored run records (:class:`harness.store.RunStore`); no number reaches a table
any other way. Computing a table (:func:`~harness.reporting.tables.build_tables`) is kept apart from
writing files (:func:`~harness.reporting.tables.write_tables`).
"""

from __future__ import annotations

from harness.reporting.tables import (
    RenderedTable,
    build_tables,
    render_latex,
    render_markdown,
    write_tables,
)

__all__ = ["RenderedTable", "build_tables", "render_latex", "render_markdown", "write_tables"]
