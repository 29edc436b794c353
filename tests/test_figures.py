"""Camera-ready figures: TrueType fonts in every PDF (no Type 3), legends outside the data, no title
inside unless asked, forest plots at most about 9 in tall with the x range set by the measured
intervals and the verdict shown by marker shape as well as colour; PNGs that say their resolution,
so a page shows them at their printed size."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.figures import css_width, png_size
from harness.reporting.forest import MAX_HEIGHT_IN, VERDICT_STYLE, draw_forest
from harness.reporting.plots import draw_plot
from harness.specs.find import load_plot_specs

ROOT = Path(__file__).resolve().parents[1]
NIGHT = ROOT / "docs" / "night"


def _fonts(pdf: Path) -> list[str]:
    """Font types of a PDF: ``pdffonts`` where installed, else read from the file's font objects."""
    exe = shutil.which("pdffonts")
    if exe:
        out = subprocess.run([exe, str(pdf)], capture_output=True, text=True, check=True).stdout
        return [line[37:55].strip() for line in out.splitlines()[2:]]
    data = pdf.read_bytes()
    return [m.decode() for m in re.findall(rb"/Subtype\s*/(Type3|TrueType|Type0|Type1)\b", data)]


@pytest.fixture(scope="module")
def rendered(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The night's claims and plots, drawn by the commands."""
    out = tmp_path_factory.mktemp("figures")
    manifest = json.loads((NIGHT / "manifest.json").read_text(encoding="utf-8"))
    common = ["--profile", "night", "--runs-dir", str(NIGHT / "runs"), "--data-dir", str(data_root)]
    common += [a for k, v in manifest["overrides"].items() for a in ("--override", f"{k}={v}")]
    assert main(["claims", *manifest["specs"], *common, "--out", str(out / "claims")]) == 0
    assert main(["plots", *common, "--out", str(out / "plots")]) == 0
    return out


def test_every_pdf_embeds_truetype_not_type3(rendered: Path) -> None:
    pdfs = sorted(rendered.rglob("*.pdf"))
    assert len(pdfs) >= 12 + 2  # a forest plot per table, the two plots
    for pdf in pdfs:
        fonts = _fonts(pdf)
        assert fonts and not any("Type 3" in f or f == "Type3" for f in fonts), (pdf.name, fonts)


def test_forest_plots_fit_a_page_with_measured_ranges(rendered: Path) -> None:
    for png in sorted((rendered / "claims").glob("claims_forest_*.png")):
        width, height, dpi = png_size(png)
        assert dpi == pytest.approx(300, abs=1)
        assert width / 300 == pytest.approx(7.0, abs=0.05) and height / 300 <= MAX_HEIGHT_IN + 0.01, png.name
        assert css_width(png) == 672  # 7 in at 96 px per inch


def test_the_forest_x_range_is_the_measured_one_and_verdicts_have_shapes(night_claims: list) -> None:
    table5 = [r for r in night_claims if r.claim.spec == "simcsepp_table5"]
    ax = draw_forest(table5, "night").axes[0]
    low, high = ax.get_xlim()
    measured = [v for r in table5 for v in (r.summary.low, r.summary.high) if v is not None]
    assert low <= min(measured) and high >= max(measured)
    assert high < 2.0 < max(r.claim.paper_delta for r in table5)  # not stretched to the paper's +15.22
    beyond = [t.get_text() for t in ax.texts if t.get_text().startswith("paper ")]
    assert "paper +15.22 \u2192" in beyond  # a delta beyond the range: its value in the margin
    markers = {line.get_marker() for line in ax.get_lines() if line.get_linestyle() == "None"}
    assert {VERDICT_STYLE[v][1] for v in ("holds", "reversed", "inconclusive")} <= markers
    figure = draw_forest(table5, "night")
    assert not ax.get_title() and figure._suptitle is None  # type: ignore[attr-defined]  # caption: LaTeX, report


def test_legends_sit_outside_the_data() -> None:
    from harness.reporting.plots import SeriesData

    steps = list(range(0, 101, 25))
    data = [
        SeriesData(
            name,
            steps,
            [0.1 + 0.01 * i for i in range(5)],
            [-2.0 - 0.1 * i for i in range(5)],
            [0.01] * 5,
            [0.01] * 5,
            5,
        )
        for name in ("SimCSE", "WhitenedCSE", "SimCSE++")
    ]
    for spec in load_plot_specs():
        fig = draw_plot(spec, data, "night")
        fig.draw_without_rendering()
        legends = [*fig.legends, *(lg for ax in fig.axes if (lg := ax.get_legend()) is not None)]
        assert legends, spec.name
        for legend in legends:
            box = legend.get_window_extent()
            for ax in fig.axes:
                data_box = ax.get_window_extent()
                assert box.y1 <= data_box.y0 + 1 or box.y0 >= data_box.y1 - 1, spec.name  # below or above


@pytest.fixture(scope="module")
def night_claims(data_root: Path) -> list:
    from harness.reporting.claims import build_claims
    from harness.specs.find import load_table_specs
    from harness.store.run_store import RunStore

    manifest = json.loads((NIGHT / "manifest.json").read_text(encoding="utf-8"))
    specs = [s for s in load_table_specs(["simcsepp_table5"])]
    return build_claims(
        specs, RunStore(NIGHT / "runs"), "night", overrides=manifest["overrides"], data_root=data_root
    )
