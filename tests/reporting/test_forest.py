"""The forest plots (harness.reporting.forest): each pair named under its statement, the x range the
measured intervals', a paper delta beyond it written in the margin, the verdicts told apart by marker
shape as well as colour, no title inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.reporting.claim_text import MINUS
from harness.reporting.claims import build_claims
from harness.reporting.forest import VERDICT_STYLE, WIDTH_IN, draw_forest, forest_caption, write_forests
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore
from tests.helpers import NIGHT, manifest_of


def test_the_forest_plot_names_each_pair_under_its_statement(night: list) -> None:
    group = [r for r in night if r.claim.spec == "simcsepp_table5"]
    fig = draw_forest(group, "night")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0] == "m = 0.9 is the best of its sweep" and labels[1] == "m = 0.9 > m = 0.5"
    assert "\u03bb = 0.1 > \u03bb = 0.02" in labels  # the papers' letters
    assert len(labels) == len(group) + 3  # three statements, each over its pairs
    assert "STS-B dev" in fig.axes[0].get_xlabel() and MINUS in fig.axes[0].get_xlabel()
    caption = forest_caption(group, "night")
    assert caption.startswith("Claims of SimCSE++ Table 5 (Xu et al., EMNLP 2023): Hyper-parameter search")


def test_every_text_of_a_forest_plot_prints_at_7pt_in_a_papers_text_width(night_claims: list) -> None:
    """A forest plot is 7 in wide; a paper prints it at its text width, 6.3 in for ACL's two columns
    (the narrowest of the venues), so each text needs 7 * 7 / 6.3 = 7.8 pt in the figure."""
    from matplotlib.text import Text

    table5 = [r for r in night_claims if r.claim.spec == "simcsepp_table5"]
    fig = draw_forest(table5, "night")
    fig.canvas.draw()
    texts = [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert any(t.get_text().startswith("paper ") for t in texts)  # the margin notes are among them
    smallest = min(float(t.get_fontsize()) for t in texts)
    assert smallest * 6.3 / WIDTH_IN >= 7.0, smallest


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
    outcomes = {r.outcome for r in table5}
    assert {"holds", "reversed", "ruled out"} <= outcomes  # the night's Table 5 has each
    assert {VERDICT_STYLE[v][1] for v in ("holds", "reversed", "ruled out")} <= markers
    legend = [t.get_text() for t in ax.figure.legends[0].get_texts()]
    assert "ruled out: mean, 95% CI" in legend and not any("inconclusive" in t for t in legend)
    assert len({VERDICT_STYLE[v][1] for v in VERDICT_STYLE}) == len(VERDICT_STYLE) - 1  # circle: two names
    figure = draw_forest(table5, "night")
    assert not ax.get_title() and figure._suptitle is None  # type: ignore[attr-defined]  # caption: LaTeX, report


@pytest.fixture(scope="module")
def night_claims(data_root: Path) -> list:

    manifest = manifest_of(NIGHT)
    specs = [s for s in load_table_specs(["simcsepp_table5"])]
    return build_claims(
        specs, RunStore(NIGHT / "runs"), "night", overrides=manifest["overrides"], data_root=data_root
    )


def test_stale_forest_plots_go_and_a_file_of_the_user_s_under_their_name_stays(
    night_claims: list, tmp_path: Path
) -> None:
    import matplotlib.pyplot as plt

    from harness.reporting.figures import save_png_pdf

    figure = plt.figure()
    stale = save_png_pdf(figure, tmp_path / "claims_forest_gone_table")  # an earlier run's table
    plt.close(figure)
    user = tmp_path / "claims_forest_mine.png"
    user.write_bytes(b"\x89PNG drawn in another program")
    with pytest.warns(RuntimeWarning, match=f"left {user} alone.*not that of a forest plot") as caught:
        written = write_forests(night_claims, "night", tmp_path)
    assert len(caught) == 1 and user.read_bytes().startswith(b"\x89PNG drawn")
    assert not any(p.exists() for p in stale) and all(p.exists() for p in written)


def test_a_pair_whose_differences_fail_the_shape_check_carries_the_dagger_and_its_sign_flip_p(
    night_claims: list,
) -> None:
    import dataclasses

    from harness.reporting.claim_text import DAGGER

    table5 = [r for r in night_claims if r.claim.spec == "simcsepp_table5"]
    assert not any(r.shape for r in table5)
    plain = forest_caption(table5, "night")
    assert DAGGER not in plain
    marked = [dataclasses.replace(table5[0], shape="seed 44 an outlier", sign_flip=0.0625), *table5[1:]]
    labels = [t.get_text() for t in draw_forest(marked, "night").axes[0].get_yticklabels()]
    assert " ".join(labels[1].split()) == f"m = 0.9 > m = 0.5 {DAGGER} sign-flip p 0.062"
    assert not any(DAGGER in label for label in labels[2:])
    caption = forest_caption(marked, "night")
    assert (
        caption.startswith(plain)
        and f"{DAGGER}: the pair's per-seed differences do not look normal" in caption
    )
