"""The Markdown preview of the tables equals its golden file."""

from __future__ import annotations

from harness.reporting.tables.markdown import render_markdown_preview
from harness.reporting.tables.model import RenderedTable
from tests.helpers import (
    check_golden,
)


def test_golden_markdown(rendered: list[RenderedTable]) -> None:
    check_golden("tables.md", render_markdown_preview(rendered))
