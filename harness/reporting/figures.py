"""What every figure the reporters save shares: camera-ready PDF fonts, the PNG resolution, the
caption kept out of the image, and the width a page shows the PNG at.

* Fonts: matplotlib's default PDF output embeds Type 3 fonts, which camera-ready checks (ACL's,
  IEEE's PDF eXpress) reject; :data:`FIGURE_RC` makes it embed TrueType (``pdftotext``-searchable,
  ``pdffonts`` lists them as TrueType), text and mathtext alike.
* A figure carries no title or caption unless asked (``titles=True``): a paper sets the caption in
  LaTeX and the report under the image, from the caption text the reporter writes beside it.
* :func:`css_width`: a PNG saved at :data:`PNG_DPI` shown at its natural size, 1 in = 96 CSS px, so
  its 8 pt text reads as 8 pt on a page instead of shrinking with a fixed image width.
* :data:`TEX_HEADER` and :func:`beside`: a ``.tex`` file of figure floats finds its PDFs beside
  itself wherever a paper inputs it from (``\\CurrentFilePath``, LaTeX 2020-10 or later).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.atomic import save_figure

FIGURE_RC: Mapping[str, Any] = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none"}
"""rcParams for saving: TrueType (Type 42) fonts in PDF and PostScript, text kept as text in SVG."""

PNG_DPI = 300
"""The resolution of every PNG (a page shows it at :func:`css_width`)."""

CSS_DPI = 96
"""CSS pixels per inch."""

TEX_HEADER: tuple[str, ...] = (
    "% needs \\usepackage{graphicx} (and LaTeX 2020-10 or later); the PDFs are found beside this file",
    "% wherever it is \\input from, e.g. \\input{results/claims/claims_figures.tex} in a paper's folder",
    "\\providecommand{\\besidethisfile}[1]{\\ifx\\CurrentFilePath\\empty#1\\else\\CurrentFilePath/#1\\fi}",
)
"""The lines under a figure ``.tex`` file's first: what it needs and the macro :func:`beside` uses."""


def beside(pdf: str) -> str:
    """A figure file's name as ``\\includegraphics`` takes it in a file headed by :data:`TEX_HEADER`."""
    return f"\\besidethisfile{{{pdf}}}"


def save_png_pdf(fig: Any, stem: Path) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` (:data:`PNG_DPI`) and ``<stem>.pdf`` (vector, TrueType fonts,
    no creation date: the same figure gives the same bytes), each atomically: a failure leaves that
    file as it was."""
    import matplotlib

    with matplotlib.rc_context(dict(FIGURE_RC)):  # type: ignore[arg-type]
        return [
            save_figure(fig, stem.with_name(f"{stem.name}.png"), dpi=PNG_DPI),
            save_figure(fig, stem.with_name(f"{stem.name}.pdf"), metadata={"CreationDate": None}),
        ]


def png_size(path: Path) -> tuple[int, int, float | None]:
    """``(width, height, dots per inch)`` of a PNG from its header and ``pHYs`` chunk (None when the
    file does not say its resolution)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    at = data.find(b"pHYs")
    if at < 0:
        return width, height, None
    x, _y, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    return width, height, x * 0.0254 if unit == 1 and x else None


def css_width(path: Path) -> int | None:
    """The width in CSS pixels at which a PNG shows at its printed size (None when unknown)."""
    try:
        width, _height, dpi = png_size(path)
    except (OSError, ValueError, struct.error):
        return None
    return round(width * CSS_DPI / (dpi or PNG_DPI))


__all__ = ["CSS_DPI", "FIGURE_RC", "PNG_DPI", "css_width", "png_size", "save_png_pdf"]
