"""Camera-ready figures (harness.reporting.figures): TrueType fonts in every PDF (no Type 3), forest
plots at most about 9 in tall; PNGs that say their resolution, so a page shows them at their printed
size."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.figures import css_width, png_size
from harness.reporting.forest import MAX_HEIGHT_IN
from tests.helpers import NIGHT, manifest_of, override_args


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
    manifest = manifest_of(NIGHT)
    common = ["--profile", "night", "--runs-dir", str(NIGHT / "runs"), "--data-dir", str(data_root)]
    common += override_args(manifest["overrides"])
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
