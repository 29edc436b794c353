"""No cell of the HTML report is hidden, checked cell by cell in headless Chromium at a phone's 390 px
and at 1,280 and 1,920 px.

The reports of the committed ``docs/demo`` and ``docs/night`` records (every night table: the widest
tables there are) get a script that visits every cell of every table in a scroll box: it scrolls the
box (and the page) until the cell is in view, then asks the browser which element is on top at the
cell's left edge, centre and right edge (``document.elementFromPoint``). A cell under a sticky column,
outside its scroll box or outside the window is reported with its text. The page itself must not
scroll sideways, the sticky label column takes at most a third of a phone's screen, and the figures
show at their natural width (the PNG's printed size at 96 px per inch), shrinking only to fit the
page's text width.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT
from tests.pages import chromium, committed_report, dumped_json, headless_chromium, scripted_page

NIGHT_SPECS = [
    "cpu_demo",
    "simcsepp_table3",
    "simcsepp_table2",
    "whitenedcse_table3",
    "whitenedcse_table6",
    "whitenedcse_table5",
    "simcsepp_table4",
    "simcsepp_table1",
    "whitenedcse_table4",
    "simcsepp_table5",
    "whitenedcse_table1",
    "whitenedcse_table2",
]

CELLS_SCRIPT = """<script>
window.addEventListener("load", () => {
  const hidden = [];
  let checked = 0;
  for (const found of document.querySelectorAll(".scroll > table td, .scroll > table th")) {
    if (!found.textContent.trim()) continue;
    // a heading across the whole table: its text (sticky at the left) is what must show
    const cell = found.colSpan > 1 && found.firstElementChild ? found.firstElementChild : found;
    const box = cell.closest(".scroll");
    box.scrollLeft = 0;
    let r = cell.getBoundingClientRect();
    let b = box.getBoundingClientRect();
    if (r.right > b.right) box.scrollLeft += r.right - b.right;
    r = cell.getBoundingClientRect();
    window.scrollBy(0, r.top - 120);
    r = cell.getBoundingClientRect();
    b = box.getBoundingClientRect();
    checked += 1;
    const y = Math.min(r.top + 8, (r.top + r.bottom) / 2);
    const on_top = [r.left + 2, (r.left + r.right) / 2, r.right - 2].every((x) => {
      const el = document.elementFromPoint(x, y);
      return el !== null && (el === cell || cell.contains(el));
    });
    const inside = r.left >= b.left - 1 && r.right <= b.right + 1 && r.left >= -1
      && r.right <= document.documentElement.clientWidth + 1;
    if (!on_top || !inside) hidden.push(cell.textContent.trim().slice(0, 40));
  }
  window.scrollTo(0, 0);
  const figures = [...document.querySelectorAll("figure img")].map((img) => [
    img.getBoundingClientRect().width, Number(img.getAttribute("width")),
  ]);
  const style = getComputedStyle(document.body);
  const labels = [...document.querySelectorAll("table.results td:first-child, table.results th:first-child")]
    .filter((c) => c.colSpan === 1);
  const out = {
    width: document.documentElement.clientWidth,
    page: document.documentElement.scrollWidth,
    text: document.body.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight),
    sticky: Math.max(0, ...labels.map((c) => c.getBoundingClientRect().width)),
    checked, hidden, figures,
  };
  if (window.parent !== window) {  // in a phone-sized frame: the page around it prints it
    window.parent.postMessage(JSON.stringify(out), "*");
    return;
  }
  const pre = document.createElement("pre");
  pre.id = "cells";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""

PHONE = """<!DOCTYPE html><html><head><style>body{margin:0} iframe{border:0}</style></head><body>
<iframe src="{src}" width="{width}" height="844"></iframe>
<script>
window.addEventListener("message", (event) => {
  const pre = document.createElement("pre");
  pre.id = "cells";
  pre.textContent = event.data;
  document.body.appendChild(pre);
});
</script></body></html>"""
"""A phone's screen in a frame: headless Chromium opens no window narrower than 500 px."""


def _cells(exe: str, page: Path, width: int, home: Path) -> dict:
    """The cells' layout the page script reports at ``width`` (below 500 px: inside a phone's frame)."""
    scripted = scripted_page(page, CELLS_SCRIPT, "cells")
    if width < 500:
        phone = page.with_name(f"phone-{page.name}")
        phone.write_text(
            PHONE.replace("{src}", scripted.name).replace("{width}", str(width)), encoding="utf-8"
        )
        scripted = phone
    dom = headless_chromium(
        exe,
        f"--window-size={max(width, 500)},1000",
        "--virtual-time-budget=20000",
        "--dump-dom",
        scripted.resolve().as_uri(),
        home=home,
        timeout=300,
    )
    return dumped_json(dom, "cells")


@pytest.mark.parametrize(("folder", "specs"), [("demo", ["cpu_demo"]), ("night", NIGHT_SPECS)])
def test_no_cell_of_the_report_is_hidden(tmp_path: Path, folder: str, specs: list[str]) -> None:
    exe = chromium()
    assert exe is not None
    page = committed_report(REPO_ROOT / "docs" / folder, specs, tmp_path / "results", plots=True)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page.read_text()
    for width in (390, 1280, 1920):
        layout = _cells(exe, page, width, tmp_path)
        assert layout["width"] == width and layout["page"] <= width, layout  # no sideways page scroll
        assert layout["checked"] > (300 if folder == "night" else 60), layout["checked"]
        assert layout["hidden"] == [], (width, layout["hidden"])
        if width < 700:  # a phone: the label column leaves two thirds of the screen to the numbers
            assert 0 < layout["sticky"] <= width / 3, layout["sticky"]
        assert layout["figures"]
        for shown, natural in layout["figures"]:  # natural width, or the text's when narrower
            assert natural > 0 and shown == pytest.approx(min(natural, layout["text"]), abs=40), layout


def test_the_cells_script_sees_a_cell_under_a_sticky_column(tmp_path: Path) -> None:
    """The check itself: a table whose last column is sticky over a narrow box hides the cells under it."""
    exe = chromium()
    assert exe is not None
    cells = "".join(f"<td>{i:04d} wide cell</td>" for i in range(30))
    page = tmp_path / "sticky.html"
    page.write_text(
        "<!DOCTYPE html><html><head><style>.scroll{overflow-x:auto;width:600px}"
        "td{white-space:nowrap;background:#fff;padding:4px}"
        "td:last-child{position:sticky;right:0;width:300px;min-width:300px}</style></head><body>"
        f'<div class="scroll"><table><tr>{cells}</tr></table></div></body></html>',
        encoding="utf-8",
    )
    layout = _cells(exe, page, 1280, tmp_path)
    assert layout["checked"] == 30 and layout["hidden"], layout
