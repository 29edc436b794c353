"""Figures: seed bands, last-step ticks, readable text, thinning at paper scale, vector PDF, captions
outside the figure, legends outside the data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.reporting.plots import (
    SeriesData,
    average_trajectory,
    draw_plot,
    not_drawn,
    plot_caption,
    step_ticks,
    thin,
    write_plots,
)
from harness.specs.find import load_plot_specs
from harness.specs.model import PlotSpec
from tests.helpers import filled_store


def test_average_trajectory_means_over_seeds() -> None:
    records: list[dict[str, Any]] = [
        {
            "trajectory": [
                {"step": 0, "align": 1.0, "uniform": -1.0},
                {"step": 2, "align": 0.5, "uniform": -2.0},
            ]
        },
        {
            "trajectory": [
                {"step": 0, "align": 3.0, "uniform": -3.0},
                {"step": 2, "align": None, "uniform": None},
            ]
        },
    ]
    assert average_trajectory(records) == ([0, 2], [2.0, 0.5], [-2.0, -2.0])


def test_plots_from_fixture_records(tmp_path: Path) -> None:
    store, data_root = filled_store(tmp_path)
    paths = write_plots(load_plot_specs(), store, "smoke", tmp_path / "plots", data_root=data_root)
    names = sorted(p.name for p in paths)
    assert names == [
        "align_uniform_joint.pdf",
        "align_uniform_joint.png",
        "align_uniform_steps.pdf",
        "align_uniform_steps.png",
        "captions.json",
        "figures.tex",
    ]
    assert all(p.stat().st_size > 200 for p in paths)


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
    assert [t.get_text() for t in labels] == ["0"]  # one start (shared), the ends at one step: the caption
    apart = [series("SimCSE", 126, 3, 15625), series("WhitenedCSE", 100, 3, 12000)]
    ends = [t.get_text() for t in draw_plot(spec("joint"), apart, "paper").axes[0].texts if t.get_text()]
    assert ends == ["0", "15625", "12000"]  # series that end apart: each end labelled
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


def test_trajectory_marks_the_evaluated_steps() -> None:
    """A few evaluations: a marker and a labelled tick at each, nothing suggesting steps in between."""
    data = [series("SimCSE", 3, 3, 40), series("WhitenedCSE", 3, 3, 40)]
    fig = draw_plot(spec("trajectory"), data, "demo")
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if str(ln.get_label()).endswith("(n=3)")]
        assert len(lines) == 2
        assert all(
            ln.get_marker() == "o" and np.asarray(ln.get_xdata()).tolist() == [0, 20, 40] for ln in lines
        )
        assert list(ax.get_xticks()) == [0, 20, 40] and list(ax.get_xticks(minor=True)) == []
    # many evaluations: round labelled ticks, every evaluated step a minor tick, no marker clutter
    dense = [series("SimCSE", 126, 3, 15625)]
    ax = draw_plot(spec("trajectory"), dense, "paper").axes[0]
    assert len(ax.get_xticks()) <= 8 and ax.get_xticks()[-1] == 15625
    assert set(dense[0].steps) == {*ax.get_xticks(), *ax.get_xticks(minor=True)}
    assert ax.get_lines()[0].get_marker() in ("None", "", None)


def test_captions_speak_only_of_what_is_drawn() -> None:
    drawn = series("SimCSE", 3, 3, 40)
    missing = SeriesData("Barlow probe", missing="no finished run")
    for kind in ("trajectory", "joint"):
        caption = plot_caption(spec(kind), [drawn, missing], "demo")
        assert "Barlow" not in caption and "not shown" not in caption and "+-" not in caption
        assert "SimCSE n=3" in caption and caption.startswith(spec(kind).title)
        fig = draw_plot(spec(kind), [drawn, missing], "demo")  # no title or caption inside by default
        assert fig._suptitle is None and fig._supxlabel is None  # type: ignore[attr-defined]
        titled = draw_plot(spec(kind), [drawn, missing], "demo", titles=True)
        assert titled._suptitle.get_text() == spec(kind).title  # type: ignore[attr-defined]
    assert "mean \u00b1 1 sd" in plot_caption(spec("trajectory"), [drawn], "demo")
    assert not_drawn([drawn, missing]) == ["Barlow probe: no finished run"]


def test_the_joint_legend_draws_each_series_as_plotted() -> None:
    data = [series(name, 3, 3, 40) for name in ("SimCSE", "WhitenedCSE")]
    fig = draw_plot(spec("joint"), data, "demo")
    legend = fig.axes[0].get_legend()  # above the axes, clear of the paths
    assert legend is not None
    assert legend.get_title().get_text() == ""  # no "light to dark" beside single-colour samples
    assert [t.get_text() for t in legend.get_texts()] == ["SimCSE", "WhitenedCSE"]
    assert "light (early) to dark (late)" in plot_caption(spec("joint"), data, "demo")


def test_the_joint_plot_keeps_its_step_labels_inside_the_axes() -> None:
    data = [series(name, 3, 3, 40) for name in ("SimCSE", "WhitenedCSE")]
    fig = draw_plot(spec("joint"), data, "demo")
    fig.draw_without_rendering()  # runs the constrained layout
    ax = fig.axes[0]
    box = ax.get_window_extent()
    for text in (t for t in ax.texts if t.get_text()):
        extent = text.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1


# -- camera-ready: legends outside the data ------------------------------------------------------------
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
