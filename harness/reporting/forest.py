"""Forest plots of the claims: one figure per table spec, sized for a page.

Each figure lists its table's claims top to bottom: a statement (bold) and under it every pair of
cells it covers, each with its measured mean and 95 % interval. The verdict is drawn twice, by colour
and by marker shape (holds: triangle up, reversed: triangle down; a claim neither: ruled out, a
square, not enough seeds, a hexagon, undecided or inconclusive, a circle; one seed: a plus without
interval), so it survives greyscale printing; the marker is open where a claim holds or is reversed
on its own interval but not after the correction across claims (the legend names the correction).
An unbounded end of a confidence sequence runs to the axes' edge. The paper's delta is an open
diamond; the x range is set by the measured intervals (and zero), not by the paper's deltas,
which can be ten times larger: a paper delta outside the range is an arrow at the edge with its value
in the margin.
A pair with nothing measured says so in its label ("not run here"); a pair whose per-seed
differences fail the shape check (:mod:`harness.stats.shape`) carries the claims table's dagger and
its sign-flip p-value in its label, and the caption says what they mean.

A figure is 7 in wide (a paper's full text width) and 0.26 in per line, at most :data:`MAX_HEIGHT_IN`;
the legend sits below the axes, outside the data. No title or caption inside the figure unless
asked (``titles``): :func:`forest_caption` is the caption, which ``claims_figures.tex`` (a figure
float per plot) and the HTML report set under it.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_text
from harness.removal import Shape, remove_owned
from harness.reporting.claim_text import DAGGER, MINUS, flagged, heading, measured_on, number
from harness.reporting.figures import TEX_HEADER, beside, save_png_pdf
from harness.reporting.latex_text import latex_text
from harness.stats.correction import DEFAULT_ANALYSIS, Analysis
from harness.stats.paired import ClaimResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VERDICT_STYLE: dict[str, tuple[str, str, str]] = {
    "holds": ("#1b7837", "^", "holds"),
    "reversed": ("#b2182b", "v", "reversed"),
    "ruled out": ("#555555", "s", "ruled out"),
    "not enough seeds": ("#777777", "h", "not enough seeds"),
    "undecided": ("#555555", "o", "undecided"),
    "inconclusive": ("#555555", "o", "inconclusive"),
    "1 seed": ("#999999", "P", "1 seed (no interval)"),
}
"""verdict or outcome -> (colour, marker, legend text)."""

PAPER_COLOUR = "#2166ac"
WIDTH_IN = 7.0
LINE_IN = 0.26
MAX_HEIGHT_IN = 9.0
LABEL_CHARS = 60
"""Labels wrap at this many characters (about 3.3 in at 8 pt), so the intervals keep half the width."""
X_TICKS = 6
"""At most this many x intervals: the default's nine crowd the half width the intervals get."""
FIGURES_TEX = "claims_figures.tex"
CAPTIONS = "captions.json"
STEM = "claims_forest_"


def forest_stem(spec: str) -> str:
    """``claims_forest_<spec>``: the file stem of one table's forest plot."""
    return f"{STEM}{spec}"


def _lines(results: Sequence[ClaimResult]) -> list[tuple[str, ClaimResult | None]]:
    """Top-down lines: a statement (no result), then its pairs."""
    out: list[tuple[str, ClaimResult | None]] = []
    text = None
    for r in results:
        if r.claim.text != text:
            out.append((r.claim.text, None))
            text = r.claim.text
        out.append((r.claim.pair or r.claim.label, r))
    return out


def _x_range(results: Sequence[ClaimResult]) -> tuple[float, float]:
    """The measured means and intervals, and zero, with a margin."""
    values = [0.0]
    for r in results:
        s = r.summary
        values += [v for v in (s.low, s.high, s.mean) if v is not None and math.isfinite(v)]
    low, high = min(values), max(values)
    pad = 0.12 * (high - low or 1.0)
    return low - pad, high + pad


def _unmeasured(result: ClaimResult | None) -> str:
    """`` (not run here)`` after the label of a pair with nothing measured (no interval to draw)."""
    if result is None or result.summary.mean is not None:
        return ""
    return " (not run here)" if result.summary.verdict == "not run" else " (no finished runs)"


def forest_caption(
    results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS
) -> str:
    """The caption of one table's forest plot (plain text)."""
    metrics = sorted({r.claim.metric for r in results if r.claim.metric})
    score = f" on {', '.join(metrics)}" if metrics else ""
    encoder = f" of {measured_on(results)}" if measured_on(results) else ""
    return (
        f"Claims of {heading(results[0].claim)}, tested on paired seeds{encoder} (profile {profile}): "
        "for each pair "
        f"of cells (better > worse), the mean per-seed difference{score} and its {analysis.interval} "
        f"({analysis.test}); marker and colour give the verdict (triangle up: holds, triangle down: "
        f"reversed, {_open_markers(analysis)}), an open marker a verdict that does not stand after "
        f"correction across claims ({analysis.described}); the open diamond is the paper's "
        "delta (an arrow with its value where it lies beyond the measured range)." + _flag_caption(results)
    )


def _flag(result: ClaimResult | None) -> str:
    """`` † sign-flip p 0.028`` after the label of a pair whose differences fail the shape check."""
    return flagged(result) if result is not None else ""


def _flag_caption(results: Sequence[ClaimResult]) -> str:
    if not any(_flag(r) for r in results):
        return ""
    return (
        f" {DAGGER}: the pair's per-seed differences do not look normal, as the test assumes (an outlier "
        "seed, or skew); beside it, the exact sign-flip p-value over the seeds, which does not assume it."
    )


def _open_markers(analysis: Analysis) -> str:
    """The caption's words for the markers of claims not decided."""
    if analysis.sequential and analysis.max_seeds:
        return (
            f"square: ruled out, the interval inside \u00b1{analysis.effect.text}; hexagon: not enough "
            "seeds to reach a verdict; circle: undecided"
        )
    return f"square: ruled out, the interval inside \u00b1{analysis.effect.text}; circle: inconclusive"


def draw_forest(
    results: Sequence[ClaimResult],
    profile: str,
    analysis: Analysis = DEFAULT_ANALYSIS,
    *,
    titles: bool = False,
) -> Figure:
    """One table's claims (results of one spec) as a forest plot (no pyplot state)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    lines = _lines(results)
    labels = [plot_text(textwrap.fill(text + _unmeasured(r) + _flag(r), LABEL_CHARS)) for text, r in lines]
    rows = sum(label.count("\n") + 1 for label in labels)
    height = min(MAX_HEIGHT_IN, 0.9 + LINE_IN * rows + 0.06 * len(lines))
    fig = Figure(figsize=(WIDTH_IN, height), layout="constrained")
    ax = fig.subplots()
    low, high = _x_range(results)
    ys = list(range(len(lines) - 1, -1, -1))
    used: list[str] = []
    for y, (_text, r) in zip(ys, lines, strict=True):
        if r is not None:
            _draw_claim(ax, y, r, low, high, used)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlim(low, high)
    ax.set_ylim(-0.7, len(lines) - 0.3)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    for tick, (_text, r) in zip(ax.get_yticklabels(), lines, strict=True):
        if r is None:  # a statement: bold, its pairs below it
            tick.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=X_TICKS))  # labels like "-0.75" apart on half the width
    ax.grid(axis="x", alpha=0.3)
    metrics = sorted({r.claim.metric for r in results if r.claim.metric})
    on = f" on {metrics[0]}" if len(metrics) == 1 else ""
    ax.set_xlabel(f"better {MINUS} worse{on}, paired by seed (score points)", fontsize=8)
    if titles:
        fig.suptitle(f"{heading(results[0].claim)}, profile {profile}", fontsize=9)
    handles = [
        Line2D(
            [],
            [],
            color=VERDICT_STYLE[v][0],
            marker=VERDICT_STYLE[v][1],
            linewidth=2,
            markersize=6,
            label=f"{VERDICT_STYLE[v][2]}: mean, {analysis.interval}",
        )
        for v in VERDICT_STYLE
        if v in used
    ]
    handles.append(
        Line2D(
            [], [], color=PAPER_COLOUR, marker="D", markerfacecolor="none", linestyle="", label="paper delta"
        )
    )
    legend = fig.legend(
        handles=handles,
        fontsize=8,
        loc="outside lower center",
        ncol=min(len(handles), 3),
        frameon=False,
        title=f"open marker: holds or reversed alone, inconclusive after correction ({analysis.label})",
    )
    legend.get_title().set_fontsize(8)
    return fig


def _draw_claim(ax: Any, y: float, r: ClaimResult, low: float, high: float, used: list[str]) -> None:
    """One pair's interval, mean and paper delta at height ``y``."""
    s = r.summary
    shown = s.verdict if s.verdict in ("holds", "reversed") else r.outcome
    style = VERDICT_STYLE.get(shown)
    if style is not None and s.mean is not None:  # nothing measured: the label says so
        colour, marker, _legend = style
        if s.low is not None and s.high is not None:  # an unbounded end runs to the edge
            ends = [max(s.low, low), min(s.high, high)]
            ax.plot(ends, [y, y], color=colour, linewidth=2, solid_capstyle="butt")
        face = "white" if _lost(r) else colour
        ax.plot([s.mean], [y], marker=marker, color=colour, markerfacecolor=face, markersize=6, linestyle="")
        if shown not in used:
            used.append(shown)
    paper = r.claim.paper_delta
    if low <= paper <= high:
        ax.plot([paper], [y], "D", markerfacecolor="none", markeredgecolor=PAPER_COLOUR, markersize=5)
        return
    right = paper > high
    ax.plot(  # beyond the measured range: an arrowhead at that edge
        [1.0 if right else 0.0],
        [y],
        marker=">" if right else "<",
        color=PAPER_COLOUR,
        markersize=5,
        transform=ax.get_yaxis_transform(),
        clip_on=False,
        linestyle="",
    )
    ax.annotate(  # and the paper's value in the margin right of the axes, clear of the intervals
        f"paper {number(paper)}" + (" \u2192" if right else ""),
        xy=(1.0, y),
        xycoords=("axes fraction", "data"),
        xytext=(6, 0),
        textcoords="offset points",
        ha="left",
        va="center",
        fontsize=8,
        color=PAPER_COLOUR,
        annotation_clip=False,
    )


def _lost(result: ClaimResult) -> bool:
    """Holds or reversed on its own interval, inconclusive after the correction across claims."""
    decided = ("holds", "reversed")
    return result.summary.verdict in decided and result.corrected_verdict not in decided


def plot_text(text: str) -> str:
    """Claim text as a figure prints it: ``lambda`` and ``tau_DCL`` as the papers' Greek letters."""
    text = re.sub(r"\blambda\b", "\u03bb", text)
    return re.sub(r"\btau_DCL\b", lambda _m: r"$\tau_\mathrm{DCL}$", text)


def by_spec(results: Sequence[ClaimResult]) -> dict[str, list[ClaimResult]]:
    """The results grouped by table spec, in order of first appearance."""
    out: dict[str, list[ClaimResult]] = {}
    for r in results:
        out.setdefault(r.claim.spec, []).append(r)
    return out


def figures_tex(results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS) -> str:
    """``claims_figures.tex``: one figure float per forest plot, with its caption."""
    out = [
        "% Generated by `harness claims`; the forest plots beside it, with their captions.",
        *TEX_HEADER,
    ]
    for spec, group in by_spec(results).items():
        out += [
            "\\begin{figure*}[t]",
            "\\centering",
            f"\\includegraphics[width=\\textwidth]{{{beside(forest_stem(spec) + '.pdf')}}}",
            f"\\caption{{{latex_text(forest_caption(group, profile, analysis)).replace('>', '$>$')}}}",
            f"\\label{{fig:claims:{spec}}}",
            "\\end{figure*}",
        ]
    return "\n".join(out) + "\n"


def write_forests(
    results: Sequence[ClaimResult],
    profile: str,
    out_dir: Path,
    analysis: Analysis = DEFAULT_ANALYSIS,
    *,
    titles: bool = False,
) -> list[Path]:
    """``claims_forest_<spec>.{png,pdf}`` per table, ``claims_figures.tex`` and ``captions.json``
    (the captions, for the HTML report); forest plots of
    other tables (an earlier run of the command) and the one-figure ``claims_forest.*`` of older
    versions are removed (only files matplotlib wrote: :data:`STALE_PLOT`)."""
    import matplotlib.pyplot as plt

    written: list[Path] = []
    captions: dict[str, str] = {}
    for spec, group in by_spec(results).items():
        captions[forest_stem(spec)] = forest_caption(group, profile, analysis)
        fig = draw_forest(group, profile, analysis, titles=titles)
        try:
            written += save_png_pdf(fig, out_dir / forest_stem(spec))
        finally:
            plt.close(fig)
    written.append(write_text(out_dir / FIGURES_TEX, figures_tex(results, profile, analysis)))
    written.append(write_text(out_dir / CAPTIONS, json.dumps(captions, indent=2) + "\n"))
    keep = {p.name for p in written}
    for stale in [*out_dir.glob(f"{STEM}*"), *out_dir.glob("claims_forest.*")]:
        if stale.name not in keep and stale.suffix in (".png", ".pdf"):
            remove_owned(stale, [out_dir], STALE_PLOT)
    return written


STALE_PLOT = Shape("forest plot", r"claims_forest(_[A-Za-z0-9_.+-]+)?\.(png|pdf)", mark=b"Matplotlib")
"""A forest plot this command wrote earlier (matplotlib names itself in every PNG and PDF it saves):
a file of that name that matplotlib did not write is the user's, and stays."""


__all__ = ["draw_forest", "figures_tex", "forest_caption", "forest_stem", "write_forests"]
