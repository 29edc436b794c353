"""Figures: seed bands, last-step ticks, readable text, thinning at paper scale, vector PDF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.reporting.plots import SeriesData, draw_plot, step_ticks, thin
from harness.specs import PlotSpec, load_plot_specs


def series(label: str, points: int, seeds: int, last: int) -> SeriesData:
    steps = [round(i * last / (points - 1)) for i in range(points)]
    align = [0.3 - 0.001 * i for i in range(points)]
    uniform = [-2.0 - 0.002 * i for i in range(points)]
    sd = [0.01] * points if seeds > 1 else [0.0] * points
    return SeriesData(label, steps, align, uniform, sd, sd, seeds)


def spec(kind: str) -> PlotSpec:
    return next(p for p in load_plot_specs() if p.kind == kind)


def test_step_ticks_end_at_the_last_step() -> None:
    for last in (30, 40, 100, 15625, 17):
        ticks = step_ticks(last)
        assert ticks[0] == 0 and ticks[-1] == last and len(ticks) <= 8


def test_thin_keeps_first_and_last() -> None:
    assert thin(5) == [0, 1, 2, 3, 4]
    kept = thin(126)
    assert len(kept) == 12 and kept[0] == 0 and kept[-1] == 125


@pytest.mark.parametrize(("points", "seeds"), [(3, 1), (126, 3)])
def test_trajectory_figure(points: int, seeds: int) -> None:
    data = [series("SimCSE", points, seeds, 15625), series("WhitenedCSE", points, seeds, 15625)]
    fig = draw_plot(spec("trajectory"), data, "paper")
    axes = fig.axes
    for ax in axes:
        assert list(ax.get_xticks())[-1] == 15625 and ax.get_xlim()[1] == 15625
        bands = [
            c
            for c in ax.collections
            if c.__class__.__name__ in ("PolyCollection", "FillBetweenPolyCollection")
        ]
        assert len(bands) == (2 if seeds > 1 else 0)
    texts = [t for ax in axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), ax.xaxis.label)]
    assert all(float(t.get_fontsize()) >= 8 for t in texts)
    assert fig.get_size_inches()[0] <= 7.0


def test_joint_figure_stays_readable_at_paper_scale() -> None:
    data = [series(name, 126, 3, 15625) for name in ("SimCSE", "WhitenedCSE", "SimCSE++")]
    fig = draw_plot(spec("joint"), data, "paper")
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text()]
    assert len(labels) == 2 * len(data)  # first and last step per series only
    arrows = [t for t in ax.texts if not t.get_text()]
    assert len(arrows) <= 3 * len(data)
    markers = sum(int(np.asarray(c.get_offsets()).shape[0]) for c in ax.collections)
    assert markers == 12 * len(data)
    assert all(float(t.get_fontsize()) >= 8 for t in labels) and fig.get_size_inches()[0] <= 3.5
    x0, x1 = ax.get_xlim()
    assert all(x0 <= a <= x1 for s in data for a in s.align)


def test_pdf_is_vector(tmp_path: Path) -> None:
    fig = draw_plot(spec("joint"), [series("SimCSE", 126, 3, 100)], "cpu")
    path = tmp_path / "joint.pdf"
    fig.savefig(path)
    pdf = path.read_bytes()
    assert pdf.startswith(b"%PDF") and b"/Subtype /Image" not in pdf


def test_plot_specs_draw_the_probes_too() -> None:
    methods = {s.run.method for p in load_plot_specs() for s in p.series}
    assert {"simcse", "whitenedcse", "simcsepp", "barlow_probe", "noise_probe"} <= methods
