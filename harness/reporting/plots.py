"""Plot reporter: run records + plot specs -> PNG and PDF figures (matplotlib, Agg backend).

Two kinds of figure, both read from the trajectories that runs log at every evaluation step
(alignment and uniformity on STS-B dev, Wang and Isola's definitions; lower is better for both):

* ``trajectory``: alignment against the training step and uniformity against the step, side by
  side, one line per series (method);
* ``joint``: alignment on x, uniformity on y, one trajectory per series, with arrows in the
  direction of training and the first and last steps labelled.

A series with several finished seeds is averaged per step. Series without a finished run, or not
valid under the profile, are left out and named in the figure's footnote, so a figure can be drawn
at any time. Nothing here writes files except :func:`write_plots`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.grid import expand
from harness.reporting.tables import index_records
from harness.specs import PlotSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from harness.store import RunStore


@dataclass
class SeriesData:
    """One series' averaged trajectory (empty when it has no finished run)."""

    label: str
    steps: list[int] = field(default_factory=list)
    align: list[float] = field(default_factory=list)
    uniform: list[float] = field(default_factory=list)
    seeds: int = 0
    missing: str = ""


def average_trajectory(records: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[float], list[float]]:
    """Steps and per-step mean alignment and uniformity over the records (seeds) that logged them."""
    align: dict[int, list[float]] = {}
    uniform: dict[int, list[float]] = {}
    for record in records:
        for point in record.get("trajectory") or []:
            a, u, step = point.get("align"), point.get("uniform"), point.get("step")
            if a is None or u is None or step is None:
                continue
            align.setdefault(int(step), []).append(float(a))
            uniform.setdefault(int(step), []).append(float(u))
    steps = sorted(align)
    return steps, [statistics.fmean(align[s]) for s in steps], [statistics.fmean(uniform[s]) for s in steps]


def collect_series(
    spec: PlotSpec,
    store: RunStore,
    profile: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
) -> list[SeriesData]:
    """Resolve each series under ``profile`` and average its finished records' trajectories."""
    plan = expand(
        [],
        profile,
        seeds=1,
        overrides=overrides,
        data_root=data_root,
        extra=[(spec.name, s.label, s.run) for s in spec.series],
    )
    records = index_records(store)
    out: list[SeriesData] = []
    for series in spec.series:
        cell = plan.cell(spec.name, series.label)
        data = SeriesData(series.label)
        if cell.state == "n/a":
            data.missing = f"n/a (d={cell.hidden_size})"
        elif cell.state != "run":
            data.missing = cell.reason
        else:
            found = records.get(cell.group_id or "", [])
            data.steps, data.align, data.uniform = average_trajectory(found)
            data.seeds = len(found)
            if not data.steps:
                data.missing = "no finished run" if not found else "no alignment/uniformity logged"
        out.append(data)
    return out


def _footnote(spec: PlotSpec, series: Sequence[SeriesData], profile: str) -> str:
    parts = [f"profile {profile}"]
    seeds = sorted({s.seeds for s in series if s.steps})
    if seeds and seeds[-1] > 1:
        parts.append("mean over seeds per step")
    missing = [f"{s.label}: {s.missing}" for s in series if s.missing]
    if missing:
        parts.append("not shown: " + "; ".join(missing))
    return " | ".join(parts)


def draw_plot(spec: PlotSpec, series: Sequence[SeriesData], profile: str) -> Figure:
    """Draw one figure (no pyplot state; the caller saves it)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    shown = [s for s in series if s.steps]
    if spec.kind == "trajectory":
        fig = Figure(figsize=(10, 4), layout="constrained")
        ax_a, ax_u = fig.subplots(1, 2)
        for s in shown:
            ax_a.plot(s.steps, s.align, marker="o", markersize=3, label=s.label)
            ax_u.plot(s.steps, s.uniform, marker="o", markersize=3, label=s.label)
        ax_a.set(xlabel="training step", ylabel="alignment (lower is better)", title="Alignment")
        ax_u.set(xlabel="training step", ylabel="uniformity (lower is better)", title="Uniformity")
        for ax in (ax_a, ax_u):
            ax.grid(alpha=0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if shown:
            ax_u.legend(fontsize=8)
    else:
        fig = Figure(figsize=(6, 5), layout="constrained")
        ax = fig.subplots()
        for i, s in enumerate(shown):
            color = f"C{i}"
            ax.plot(s.align, s.uniform, marker="o", markersize=4, color=color, label=s.label, alpha=0.8)
            for j in range(len(s.steps) - 1):
                ax.annotate(
                    "",
                    xy=(s.align[j + 1], s.uniform[j + 1]),
                    xytext=(s.align[j], s.uniform[j]),
                    arrowprops={"arrowstyle": "->", "color": color, "lw": 1.0},
                )
            ax.annotate(f"step {s.steps[0]}", (s.align[0], s.uniform[0]), fontsize=7, color=color)
            if len(s.steps) > 1:
                ax.annotate(f"step {s.steps[-1]}", (s.align[-1], s.uniform[-1]), fontsize=7, color=color)
        ax.set(xlabel="alignment (lower is better)", ylabel="uniformity (lower is better)")
        ax.grid(alpha=0.3)
        if shown:
            ax.legend(fontsize=8)
    if not shown:
        fig.text(0.5, 0.5, "no finished runs yet", ha="center", va="center", fontsize=12, color="gray")
    fig.suptitle(spec.title)
    fig.supxlabel(_footnote(spec, series, profile), fontsize=6, color="gray")
    return fig


def write_plots(
    specs: Sequence[PlotSpec],
    store: RunStore,
    profile: str,
    out_dir: Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
) -> list[Path]:
    """Draw every plot spec and save ``<name>.png`` and ``<name>.pdf``; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for spec in specs:
        series = collect_series(spec, store, profile, overrides=overrides, data_root=data_root)
        fig = draw_plot(spec, series, profile)
        for suffix in ("png", "pdf"):
            path = out_dir / f"{spec.name}.{suffix}"
            fig.savefig(path, dpi=150)
            written.append(path)
    return written
