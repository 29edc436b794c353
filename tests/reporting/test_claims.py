"""Claims rendered: forest-plot labels, an untrained cell paired with every seed of a trained one;
every output names the pair and the score (the LaTeX floats: test_claims_latex.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.claim_text import MINUS
from harness.reporting.claims import render_markdown, to_json
from harness.reporting.claims_latex import render_latex
from harness.reporting.report import claims_html
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.stats.paired import t_interval
from harness.store.run_store import RunStore
from tests.helpers import make_record, spec_text, write_spec

UNTRAINED_SPEC = spec_text(
    """
[[rows]]
label = "BERT-base (first-last avg.)"
method = "simcse"
overrides = {max_steps = 0, eval_pooler = "avg_first_last"}
paper = [56.70]

[[rows]]
label = "SimCSE-BERT-base"
method = "simcse"
paper = [76.25]

[[claims]]
better = "SimCSE-BERT-base"
worse = "BERT-base (first-last avg.)"
""",
    cites="SimCSE++ Table 3",
    title="A trained cell against one that does not train",
)


def test_an_untrained_cell_stands_against_every_seed(corpus_root: Path, tmp_path: Path) -> None:
    data = corpus_root
    spec_path = write_spec(tmp_path / "untrained.toml", UNTRAINED_SPEC)
    plan = expand([load_table_spec(spec_path)], "smoke", seeds=3, data_root=data)
    untrained = plan.cell("untrained", "BERT-base (first-last avg.)").configs
    assert len(untrained) == 1  # runs once, whatever --seeds says
    store = RunStore(tmp_path / "runs")
    store.save(make_record(untrained[0], final={"sts": {"avg": 60.0}}, best_stsb_dev=60.0))
    trained = {42: 70.0, 43: 71.0, 44: 75.0}
    for config in plan.cell("untrained", "SimCSE-BERT-base").configs:
        avg = trained[config.seed]
        store.save(make_record(config, final={"sts": {"avg": avg}}, best_stsb_dev=avg))
    out = tmp_path / "claims"
    args = ["claims", str(spec_path), "--profile", "smoke", "--runs-dir", str(store.root)]
    assert main([*args, "--data-dir", str(data), "--out", str(out)]) == 0
    claim = json.loads((out / "claims.json").read_text(encoding="utf-8"))["claims"][0]
    assert claim["seeds"] == [42, 43, 44] and claim["diffs"] == [10.0, 11.0, 15.0]
    low, high = t_interval([10.0, 11.0, 15.0])
    assert claim["ci95"] == pytest.approx([low, high]) and claim["verdict"] == "holds"


# -- every output names the pair and the score ---------------------------------------------------------
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
    heading = '<span class="head">SimCSE++ Table 5 (Xu et al., EMNLP 2023)'
    assert f'<tr class="heading"><td colspan="10">{heading}' in page
    assert f"[{MINUS}0.36, {MINUS}0.01]" in page and "[-0.36" not in page
