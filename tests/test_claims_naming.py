"""Claims name their pair everywhere: every row of claims.md, claims.tex, claims.json, the HTML report
and the forest plots says which two cells it compares and on which score, under its paper table's
citation, with a real minus sign; the label is unique within its table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.claim_text import MINUS, heading, number
from harness.reporting.claims import build_claims, render_latex, render_markdown, to_json
from harness.reporting.forest import draw_forest, forest_caption
from harness.reporting.report import claims_html
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore

ROOT = Path(__file__).resolve().parents[1]
NIGHT = ROOT / "docs" / "night"


def test_every_claim_label_is_unique_within_its_table() -> None:
    claims = [c for spec in load_table_specs() for c in spec.claims]
    assert len(claims) >= 55
    twice = [key for key, n in Counter((c.spec, c.label) for c in claims).items() if n > 1]
    assert twice == []
    assert all(c.pair and c.metric and c.label.endswith(f" on {c.metric}") for c in claims)


def test_pairs_read_as_the_table_names_them() -> None:
    by = {(c.spec, c.better, c.worse): c for spec in load_table_specs() for c in spec.claims}
    assert (
        by[("simcsepp_table5", "STS-B dev [m=0.9]", "STS-B dev [m=0.5]")].label
        == "m = 0.9 > m = 0.5 on STS-B dev"
    )
    table4 = by[("whitenedcse_table4", "STS-Avg. (shuffled) [num_groups=32]", "w/o shuffled [num_groups=32]")]
    assert table4.label == "STS-Avg. (shuffled) > w/o shuffled at Group size = 32 on STS avg"
    transfer = by[("whitenedcse_table2", "WhitenedCSE-BERT-base", "SimCSE-BERT-base")]
    assert transfer.label == "WhitenedCSE-BERT-base > SimCSE-BERT-base on transfer avg"
    assert heading(table4) == (
        "WhitenedCSE Table 4 (Zhuo et al., ACL 2023): Number of groups and shuffling (STS average)"
    )


def test_numbers_print_a_real_minus_and_no_signed_zero() -> None:
    assert number(-0.18) == f"{MINUS}0.18" and number(0.54) == "+0.54"
    assert number(-0.004) == f"{MINUS}0.004" and number(0.0) == "0.00" and number(-0.0001) == "0.00"
    assert number(0.24, sign=False) == "0.24" and number(None) == "--"


@pytest.fixture(scope="module")
def night(data_root: Path) -> list:
    manifest = json.loads((NIGHT / "manifest.json").read_text(encoding="utf-8"))
    specs = [s for s in load_table_specs(manifest["specs"]) if s.claims]
    store = RunStore(NIGHT / "runs")
    return build_claims(
        specs, store, manifest["profile"], overrides=manifest["overrides"], data_root=data_root
    )


def test_every_output_names_the_pair_and_the_score(night: list, tmp_path: Path) -> None:
    md = render_markdown(night, "night")
    tex = render_latex(night, "night")
    for r in night:
        assert f"| {r.claim.spec} | {r.claim.text} | {r.claim.label} |" in md
    # LaTeX: every pair in italics under its statement, the group headed by its paper's citation
    assert tex.count(r"\textit{") >= len(night)
    assert r"\textit{m = 0.9 $>$ m = 0.5 on STS-B dev}" in tex
    assert (
        r"\multicolumn{9}{@{}l}{\textit{WhitenedCSE Table 4 (Zhuo et al., ACL 2023): Number of groups" in tex
    )
    assert "whitenedcse_table4" not in tex.replace(r"\_", "_")  # no file names as headings
    assert "$-$0.18" in tex and "-0.18" not in tex.replace("$-$", "")  # a minus, not a hyphen
    data = to_json(night, "night")
    assert all(c["label"] and c["metric"] and c["heading"] for c in data["claims"])
    (tmp_path / "claims.json").write_text(json.dumps(data), encoding="utf-8")
    page = claims_html(tmp_path)
    assert page.count('<span class="pair">') == len(night)
    assert '<tr class="heading"><td colspan="10">SimCSE++ Table 5 (Xu et al., EMNLP 2023)' in page
    assert f"[{MINUS}0.36, {MINUS}0.01]" in page and "[-0.36" not in page


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


def test_claims_writes_one_forest_plot_per_table_and_drops_stale_ones(
    tmp_path: Path, data_root: Path
) -> None:
    manifest = json.loads((NIGHT / "manifest.json").read_text(encoding="utf-8"))
    overrides = [a for k, v in manifest["overrides"].items() for a in ("--override", f"{k}={v}")]
    out = tmp_path / "claims"
    out.mkdir()
    (out / "claims_forest.png").write_bytes(b"old")  # the one big figure of earlier versions
    args = ["claims", "cpu_demo", "whitenedcse_table4", "--profile", "night", *overrides]
    args += ["--runs-dir", str(NIGHT / "runs"), "--data-dir", str(data_root), "--out", str(out)]
    assert main(args) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "captions.json",
        "claims.json",
        "claims.md",
        "claims.tex",
        "claims_figures.tex",
        "claims_forest_cpu_demo.pdf",
        "claims_forest_cpu_demo.png",
        "claims_forest_whitenedcse_table4.pdf",
        "claims_forest_whitenedcse_table4.png",
    ]
    figures = (out / "claims_figures.tex").read_text(encoding="utf-8")
    assert r"\includegraphics[width=\textwidth]{claims_forest_whitenedcse_table4.pdf}" in figures
    assert set(json.loads((out / "captions.json").read_text(encoding="utf-8"))) == {
        "claims_forest_cpu_demo",
        "claims_forest_whitenedcse_table4",
    }
