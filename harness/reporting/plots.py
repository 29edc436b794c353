"""Plot reporter: run records + plot specs -> PNG and PDF figures (matplotlib, Agg backend).

Two kinds of figure, both read from the trajectories that runs log at every evaluation step
(alignment and uniformity on STS-B dev, Wang and Isola's definitions; lower is better for both):

* ``trajectory``: alignment against the training step and uniformity against the step, side by
  side, one line per series (method or probe); with several seeds, the line is the per-step mean
  and a band spans mean ± one sample standard deviation across seeds; a marker and a labelled tick
  at every evaluated step when there are few (else round ticks, the evaluated steps as minor
  ticks), so no line suggests a trajectory between samples; the step axis ends at the last step;
* ``joint``: alignment on x, uniformity on y, one trajectory per series. It stays readable at
  paper scale (126 dev evaluations per run): markers are thinned to at most 12 per series, their shading
  goes from light (early) to full (late) instead of per-point labels (the legend draws them so),
  a few arrows show the direction of training; the shared first step is labelled once (the series
  start from one encoder) and the last step of each series only where they end apart, inside the
  axes.

Figures are sized for a paper (the trajectory pair for a full text width of 7 in, the joint plot
for one column of 3.4 in) with no text below 8 pt and the legends outside the data, saved as vector
PDF with TrueType fonts and as 300 dpi PNG (:mod:`harness.reporting.figures`). A figure holds no
title or caption unless asked (``titles``): :func:`plot_caption` is its caption, which
``figures.tex`` (a figure float per plot) and ``captions.json`` (for the HTML report) carry. Series
without a finished run, or not valid under the profile, are left out (the caption speaks only of
what is drawn; :func:`not_drawn` names the rest), so a figure can be drawn at any time.
Nothing here writes files except :func:`write_plots`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_text
from harness.reporting.figures import TEX_HEADER, beside, save_png_pdf
from harness.reporting.latex_text import latex_text
from harness.specs.cells import reading_plan, records_by_cell
from harness.specs.model import PlotSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from harness.store.run_store import RunStore


@dataclass
class SeriesData:
    """One series' averaged trajectory (empty when it has no finished run)."""

    label: str
    steps: list[int] = field(default_factory=list)
    align: list[float] = field(default_factory=list)
    uniform: list[float] = field(default_factory=list)
    align_sd: list[float] = field(default_factory=list)
    uniform_sd: list[float] = field(default_factory=list)
    seeds: int = 0
    missing: str = ""


def _per_step(records: Sequence[Mapping[str, Any]]) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    align: dict[int, list[float]] = {}
    uniform: dict[int, list[float]] = {}
    for record in records:
        for point in record.get("trajectory") or []:
            a, u, step = point.get("align"), point.get("uniform"), point.get("step")
            if a is None or u is None or step is None:
                continue
            align.setdefault(int(step), []).append(float(a))
            uniform.setdefault(int(step), []).append(float(u))
    return align, uniform


def average_trajectory(records: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[float], list[float]]:
    """Steps and per-step mean alignment and uniformity over the records (seeds) that logged them."""
    align, uniform = _per_step(records)
    steps = sorted(align)
    return steps, [statistics.fmean(align[s]) for s in steps], [statistics.fmean(uniform[s]) for s in steps]


def trajectory_spread(records: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[float]]:
    """Per-step sample standard deviation of alignment and uniformity across seeds (0 with one)."""
    align, uniform = _per_step(records)

    def sd(values: list[float]) -> float:
        return statistics.stdev(values) if len(values) > 1 else 0.0

    steps = sorted(align)
    return [sd(align[s]) for s in steps], [sd(uniform[s]) for s in steps]


def collect_series(
    spec: PlotSpec,
    store: RunStore,
    profile: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
) -> list[SeriesData]:
    """Resolve each series under ``profile`` and average its finished records' trajectories."""
    extra = [(spec.name, s.label, s.run) for s in spec.series]
    plan = reading_plan([], profile, overrides=overrides, data_root=data_root, extra=extra)
    records = records_by_cell(store.records())
    out: list[SeriesData] = []
    for series in spec.series:
        cell = plan.cell(spec.name, series.label)
        data = SeriesData(series.label)
        if cell.state == "n/a":
            data.missing = f"n/a (d={cell.hidden_size})"
        elif cell.state != "run":
            data.missing = cell.reason
        else:
            found = records.get(cell.config_id or "", [])
            data.steps, data.align, data.uniform = average_trajectory(found)
            data.align_sd, data.uniform_sd = trajectory_spread(found)
            data.seeds = len(found)
            if not data.steps:
                data.missing = "no finished run" if not found else "no alignment/uniformity logged"
        out.append(data)
    return out


def plot_caption(spec: PlotSpec, series: Sequence[SeriesData], profile: str) -> str:
    """The figure's caption: its title, then what it shows, and only that: the profile, the seeds
    behind each drawn series, and how to read the marks (series without runs are not drawn and not
    mentioned: see :func:`not_drawn`)."""
    shown = [s for s in series if s.steps]
    parts = [f"{spec.title} (profile {profile})."]
    seeds = sorted({s.seeds for s in shown})
    if seeds and seeds[-1] > 1:
        counts = ", ".join(f"{s.label} n={s.seeds}" for s in shown)
        band = "; the band spans mean \u00b1 1 sd across seeds" if spec.kind == "trajectory" else ""
        parts.append(f"Each line is the mean over seeds per step{band} ({counts}).")
    if shown and spec.kind == "trajectory":
        marks = "a marker at" if _marked(shown) else "ticks below mark"
        parts.append(f"{marks[0].upper()}{marks[1:]} every evaluated step.")
    elif shown:
        lasts = sorted({s.steps[-1] for s in shown})
        end = f"step {lasts[0]}" if len(lasts) == 1 else "its last step (labelled)"
        parts.append(
            "Markers are evaluated steps, light (early) to dark (late), from the first step (labelled) "
            f"to {end}; arrows show the direction of training."
        )
    return " ".join(parts)


def not_drawn(series: Sequence[SeriesData]) -> list[str]:
    """``label: reason`` for every series the figure leaves out (no finished run, not valid here)."""
    return [f"{s.label}: {s.missing}" for s in series if s.missing]


MIN_FONT = 8.0
MAX_MARKERS = 12
MARKED_POINTS = 30
"""A trajectory line of up to this many evaluated steps has a marker at each; denser ones show the
steps as minor ticks instead."""
LABELLED_TICKS = 8
"""Up to this many evaluated steps are each a labelled tick; beyond, round ticks are labelled."""


def _marked(shown: Sequence[SeriesData]) -> bool:
    return max(len(s.steps) for s in shown) <= MARKED_POINTS


def eval_ticks(steps: Sequence[int]) -> tuple[list[int], list[int]]:
    """Labelled and minor x ticks for the evaluated ``steps``: every step labelled when there are few,
    else round ticks ending at the last step (:func:`step_ticks`) with every evaluated step a minor tick."""
    points = sorted(set(steps))
    if len(points) <= LABELLED_TICKS:
        return points, []
    return step_ticks(points[-1], points[0]), points


def step_ticks(last: int, first: int = 0, target: int = 6) -> list[int]:
    """Round tick positions from ``first`` to ``last`` that always include ``last``."""
    from matplotlib.ticker import MaxNLocator

    ticks = [
        int(t) for t in MaxNLocator(nbins=target, integer=True).tick_values(first, last) if first <= t <= last
    ]
    if ticks and last - ticks[-1] < 0.35 * (ticks[1] - ticks[0] if len(ticks) > 1 else last or 1):
        ticks = ticks[:-1]  # too close to the last step to label both
    return sorted({*ticks, last})


def thin(n: int, keep: int = MAX_MARKERS) -> list[int]:
    """At most ``keep`` indices of ``range(n)``, evenly spread, first and last included."""
    if n <= keep:
        return list(range(n))
    return sorted({round(i * (n - 1) / (keep - 1)) for i in range(keep)})


def draw_plot(spec: PlotSpec, series: Sequence[SeriesData], profile: str, *, titles: bool = False) -> Figure:
    """Draw one figure (no pyplot state; the caller saves it); with ``titles``, the spec's title
    above it and :func:`plot_caption` below it (a paper sets the caption in LaTeX instead)."""
    shown = [s for s in series if s.steps]
    fig = _draw_trajectory(shown) if spec.kind == "trajectory" else _draw_joint(shown)
    if not shown:
        fig.text(0.5, 0.5, "no finished runs yet", ha="center", va="center", fontsize=12, color="gray")
    if titles:
        fig.suptitle(spec.title, fontsize=9)
        caption = plot_caption(spec, series, profile).split(". ", 1)[-1]
        fig.supxlabel(caption, fontsize=MIN_FONT, color="gray", wrap=True)
    return fig


def _draw_trajectory(shown: Sequence[SeriesData]) -> Figure:
    """Alignment and uniformity against the step, side by side; a band of ±1 sd over seeds; a marker
    (or, for many, a minor tick) at every evaluated step."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.0), layout="constrained")
    ax_a, ax_u = fig.subplots(1, 2)
    last = max((s.steps[-1] for s in shown), default=0)
    marker = "o" if shown and _marked(shown) else None
    major, minor = eval_ticks([step for s in shown for step in s.steps])
    for i, s in enumerate(shown):
        colour = f"C{i}"
        for ax, mean, sd in ((ax_a, s.align, s.align_sd), (ax_u, s.uniform, s.uniform_sd)):
            ax.plot(
                s.steps,
                mean,
                color=colour,
                linewidth=1.4,
                marker=marker,
                markersize=3.5,
                clip_on=False,  # whole markers at the first and last step
                label=f"{s.label} (n={s.seeds})",
            )
            if s.seeds > 1:
                lo = [m - d for m, d in zip(mean, sd, strict=True)]
                hi = [m + d for m, d in zip(mean, sd, strict=True)]
                ax.fill_between(s.steps, lo, hi, color=colour, alpha=0.2, linewidth=0)
    ax_a.set_ylabel("alignment (lower is better)", fontsize=MIN_FONT)
    ax_u.set_ylabel("uniformity (lower is better)", fontsize=MIN_FONT)
    for ax, title in ((ax_a, "Alignment"), (ax_u, "Uniformity")):
        ax.set_xlabel("training step", fontsize=MIN_FONT)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=MIN_FONT)
        if last:
            ax.set_xticks(major)
            ax.set_xticks(minor, minor=True)
            ax.set_xlim(0, last)
    if shown:  # below both axes, outside the data the lines and bands may cover
        handles, labels = ax_u.get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            fontsize=MIN_FONT,
            frameon=False,
            loc="outside lower center",
            ncol=min(len(shown), 3),
        )
    return fig


def _draw_joint(shown: Sequence[SeriesData]) -> Figure:
    """Alignment on x, uniformity on y: one path per series, light (early) to dark (late)."""
    import matplotlib as mpl
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(3.4, 3.4), layout="constrained")
    ax = fig.subplots()
    aligns = [a for s in shown for a in s.align]
    middle = (min(aligns) + max(aligns)) / 2 if aligns else 0.0
    ends_apart = len({s.steps[-1] for s in shown}) > 1
    labelled: list[tuple[float, float]] = []
    for i, s in enumerate(shown):
        _draw_joint_series(ax, s, mpl.colors.to_rgba(f"C{i}"), middle, labelled, ends_apart)
    ax.set_xlabel("alignment (lower is better)", fontsize=MIN_FONT)
    ax.set_ylabel("uniformity (lower is better)", fontsize=MIN_FONT)
    ax.tick_params(labelsize=MIN_FONT)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # five labels fit 3.4 in without touching
    ax.grid(alpha=0.3)
    ax.margins(x=0.12, y=0.15)  # room inside the axes for the step numbers
    if shown:
        _joint_legend(ax, shown)
    return fig


def _joint_legend(ax: Any, shown: Sequence[SeriesData]) -> None:
    """One entry per series drawn as the series is: its line and its markers, light to dark."""
    import matplotlib as mpl
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.lines import Line2D

    handles = []
    for i, s in enumerate(shown):
        rgba = mpl.colors.to_rgba(f"C{i}")
        shades = (0.25, 0.625, 1.0) if len(s.steps) > 2 else (0.25, 1.0)
        marks = [
            Line2D([], [], linestyle="", marker="o", markersize=3.5, color=(*rgba[:3], a)) for a in shades
        ]
        handles.append((Line2D([], [], color=rgba, linewidth=1.0, alpha=0.7), *marks))
    ax.legend(  # above the axes, outside them: the paths may cross any part of the axes
        handles,
        [s.label for s in shown],
        handler_map={tuple: HandlerTuple(ndivide=None, pad=0.0)},
        fontsize=MIN_FONT,
        frameon=False,
        handlelength=3.0,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.01),
        ncol=2,
        columnspacing=1.0,
    )


def _draw_joint_series(
    ax: Any,
    s: SeriesData,
    rgba: tuple[float, float, float, float],
    middle: float,
    labelled: list[tuple[float, float]],
    ends_apart: bool,
) -> None:
    """One series of the joint plot: its path, shaded markers, a few arrows, and its step numbers:
    the first step unless another series already labelled the same point (they start from one
    encoder: one label, in black), the last step only where the series end at different steps
    (each number on the side of its point towards the middle of the plot, ``middle`` on x)."""
    ax.plot(s.align, s.uniform, color=rgba, linewidth=1.0, alpha=0.7, label=s.label)
    keep = thin(len(s.steps))
    shades = [0.25 + 0.75 * k / max(1, len(keep) - 1) for k in range(len(keep))]
    ax.scatter(
        [s.align[k] for k in keep],
        [s.uniform[k] for k in keep],
        s=12,
        color=[(*rgba[:3], a) for a in shades],
        edgecolors="none",
        zorder=3,
    )
    for k in thin(len(s.steps), 4)[1:]:  # a few arrows: the direction of training
        ax.annotate(
            "",
            xy=(s.align[k], s.uniform[k]),
            xytext=(s.align[k - 1], s.uniform[k - 1]),
            arrowprops={"arrowstyle": "->", "color": rgba, "lw": 0.9},
        )
    start = (s.align[0], s.uniform[0])
    shared = any(abs(start[0] - x) < 1e-9 and abs(start[1] - y) < 1e-9 for x, y in labelled)
    marks = [] if shared else [(0, 4, "black" if not labelled else rgba)]
    labelled.append(start)
    if ends_apart and len(s.steps) > 1:
        marks.append((len(s.steps) - 1, -10, rgba))
    for k, dy, colour in marks:
        right = s.align[k] <= middle
        ax.annotate(
            f"{s.steps[k]}",
            (s.align[k], s.uniform[k]),
            xytext=(4 if right else -4, dy),
            textcoords="offset points",
            ha="left" if right else "right",
            fontsize=MIN_FONT,
            color=colour,
        )


FIGURES_TEX = "figures.tex"
CAPTIONS = "captions.json"


def write_plots(
    specs: Sequence[PlotSpec],
    store: RunStore,
    profile: str,
    out_dir: Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
    note: Callable[[str], None] | None = None,
    titles: bool = False,
) -> list[Path]:
    """Draw every plot spec and save ``<name>.png`` and ``<name>.pdf``, and their captions as
    ``figures.tex`` (one figure float per plot) and ``captions.json`` (``{name: caption}``, what the
    HTML report sets under each image); return the paths.

    ``note`` (when given) hears ``<name>: not drawn: <series>: <reason>`` for every series left out.
    """
    import matplotlib.pyplot as plt

    written: list[Path] = []
    captions: dict[str, str] = {}
    for spec in specs:
        series = collect_series(spec, store, profile, overrides=overrides, data_root=data_root)
        if note is not None:
            for line in not_drawn(series):
                note(f"{spec.name}: not drawn: {line}")
        fig = draw_plot(spec, series, profile, titles=titles)
        try:
            written += save_png_pdf(fig, out_dir / spec.name)
        finally:
            plt.close(fig)
        captions[spec.name] = plot_caption(spec, series, profile)
    written.append(write_text(out_dir / FIGURES_TEX, figures_tex(specs, captions)))
    written.append(write_text(out_dir / CAPTIONS, json.dumps(captions, indent=2) + "\n"))
    return written


def figures_tex(specs: Sequence[PlotSpec], captions: Mapping[str, str]) -> str:
    """One figure float per plot: the trajectory pair at the full text width, the joint plot in a
    column, each with its caption."""
    out = ["% Generated by `harness plots`; the figures beside it, with their captions.", *TEX_HEADER]
    for spec in specs:
        wide = spec.kind == "trajectory"
        env = "figure*" if wide else "figure"
        width = "\\textwidth" if wide else "\\columnwidth"
        out += [
            f"\\begin{{{env}}}[t]",
            "\\centering",
            f"\\includegraphics[width={width}]{{{beside(spec.name + '.pdf')}}}",
            f"\\caption{{{latex_text(captions[spec.name])}}}",
            f"\\label{{fig:{spec.name}}}",
            f"\\end{{{env}}}",
        ]
    return "\n".join(out) + "\n"
