"""The HTML report fits a window from 1,280 px: measured in headless Chromium, not only rendered.

The report is built from the committed ``docs/demo`` and ``docs/night`` records (their tables are as
wide as real tables get: eight columns of mean ± sd). A copy of the page gets a small script that
writes the layout Chromium computed (``getBoundingClientRect``) into the DOM, which ``--dump-dom``
prints: at 1,280 and 1,920 px every table's scroll box ends inside the window, the page itself does
not scroll sideways, and every table's forest plot is on the page (that no cell is hidden:
``tests/system/test_report_cells.py``). Screenshots at both widths are taken too
(``HARNESS_REPORT_SCREENSHOT=<folder>`` keeps them to look at).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT
from tests.pages import chromium, committed_report, dumped_json, headless_chromium, scripted_page

WIDTHS = (1280, 1920)

LAYOUT_SCRIPT = """<script>
window.addEventListener("load", () => {
  const right = (el) => el.getBoundingClientRect().right;
  const out = {
    width: document.documentElement.clientWidth,
    page: document.documentElement.scrollWidth,
    boxes: [...document.querySelectorAll(".scroll")].map(right),
    tables: [...document.querySelectorAll(".scroll > table")].map(right),
    forest: document.querySelectorAll("#claims ~ figure img").length,
  };
  const pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _layout(exe: str, page: Path, width: int, home: Path) -> dict:
    """The layout the page script reports at ``width``."""
    scripted = scripted_page(page, LAYOUT_SCRIPT, "layout")
    args = [
        f"--window-size={width},1000",
        "--virtual-time-budget=5000",
        "--dump-dom",
        scripted.resolve().as_uri(),
    ]
    return dumped_json(headless_chromium(exe, *args, home=home), "layout")


def _screenshot(exe: str, page: Path, width: int, shot: Path, home: Path) -> None:
    """A screenshot of ``page`` at ``width`` in ``shot`` (a PNG, asserted)."""
    headless_chromium(
        exe, f"--window-size={width},1600", f"--screenshot={shot}", page.resolve().as_uri(), home=home
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("folder", "specs"),
    [("demo", ["cpu_demo"]), ("night", ["simcsepp_table3", "whitenedcse_table2", "cpu_demo"])],
)
def test_the_report_fits_the_window(tmp_path: Path, folder: str, specs: list[str]) -> None:
    exe = chromium()
    assert exe is not None
    page = committed_report(REPO_ROOT / "docs" / folder, specs, tmp_path / "results")
    keep = os.environ.get("HARNESS_REPORT_SCREENSHOT")
    for width in WIDTHS:
        layout = _layout(exe, page, width, tmp_path)
        assert layout["width"] == width and layout["page"] <= width, layout  # no sideways page scroll
        assert layout["boxes"] and all(right <= width for right in layout["boxes"]), layout
        assert layout["forest"] == len(specs)  # one forest plot per table with claims
        shot = tmp_path / f"report-{folder}-{width}.png"
        _screenshot(exe, page, width, shot, tmp_path)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / shot.name)


def test_the_layout_script_sees_a_table_spilling_out(tmp_path: Path) -> None:
    """The measurement itself: a 3,000 px table outside a scroll box is seen past the window."""
    exe = chromium()
    assert exe is not None
    page = tmp_path / "wide.html"
    cells = "".join(f"<td>{i:04d}</td>" for i in range(60))
    page.write_text(
        '<!DOCTYPE html><html><body><div class="scroll" style="width:3000px">'
        f'<table style="width:3000px"><tr>{cells}</tr></table></div></body></html>',
        encoding="utf-8",
    )
    layout = _layout(exe, page, 1280, tmp_path)
    assert layout["page"] > 1280 and max(layout["boxes"]) > 1280
