"""harness.stats.correction: families, adjusted p-values and corrected verdicts, by hand; every
claims output names the correction; a forest plot marks a claim the correction leaves open; the
report corrects claims.json again. (``--correction none`` on the committed records:
tests/commands/test_claims_cmd.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.reporting.claims import render_markdown, to_json
from harness.reporting.claims_latex import render_latex
from harness.reporting.forest import draw_forest
from harness.specs.claim import Claim
from harness.stats.correction import Analysis, Member, correct, correct_json_rows, correct_tested, family_of
from harness.stats.paired import ClaimResult, adjust_pvalues
from tests.helpers import claim_result

VERDICT_MARKERS = ("^", "v", "o", "s")
"""The forest plot's verdict markers (the paper's delta is a diamond)."""


def test_corrected_verdicts_by_hand() -> None:
    items = [
        Member("t1", "a", 0.01, "holds"),
        Member("t1", "b", 0.04, "reversed"),
        Member("t1", "c", 0.03, "holds"),
        Member("t1", "d", 0.2, "inconclusive"),
        Member("t1", "a", 0.01, "holds"),  # a repeat of "a": one hypothesis, counted once
        Member("t2", "a", 0.04, "holds"),  # the same comparison in another family: its own member
        Member("t2", "e", None, "not run"),
    ]
    holm = correct_tested(items, "holm")
    # t1 has four hypotheses: Holm gives 0.04, 0.09, 0.09, 0.2 (tests/stats/test_paired.py)
    assert [p for p, _ in holm] == pytest.approx([0.04, 0.09, 0.09, 0.2, 0.04, 0.04, None])
    assert [v for _, v in holm] == [
        "holds",
        "inconclusive",
        "inconclusive",
        "inconclusive",
        "holds",
        "holds",
        "not run",
    ]
    bh = correct_tested(items, "bh")
    assert [v for _, v in bh][:4] == ["holds", "inconclusive", "inconclusive", "inconclusive"]
    assert bh[1][0] == pytest.approx(0.16 / 3)
    none = correct_tested(items, "none")
    assert [v for _, v in none] == [i.verdict for i in items]
    assert [p for p, _ in none] == [i.p for i in items]


def test_a_correction_never_decides_what_the_interval_left_open() -> None:
    # a p-value at the boundary: the raw verdict says inconclusive, so the corrected one does too
    items = [Member("t", "a", 0.0499999, "inconclusive"), Member("t", "b", 0.001, "reversed")]
    assert [v for _, v in correct_tested(items, "bh")] == ["inconclusive", "reversed"]


def test_families() -> None:
    assert family_of("cpu_demo", "WhitenedCSE", "table") == "cpu_demo"
    assert family_of("cpu_demo", "WhitenedCSE", "paper") == "WhitenedCSE"
    assert family_of("cpu_demo", "WhitenedCSE", "all") == "all"
    with pytest.raises(ConfigError, match="--correction"):
        Analysis(correction="bonferroni")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--family"):
        Analysis(family="night")  # type: ignore[arg-type]


def _result(spec: str, paper: str, diffs: list[float], text: str = "a > b") -> ClaimResult:
    claim = Claim(spec, "a", "b", "avg", 1.0, text, paper)
    return claim_result(claim, diffs, comparison=(spec, text))


def test_correct_groups_claims_by_the_family_asked() -> None:
    results = [
        _result("t1", "P", [0.5, 0.6, 0.55, 0.45], "x"),  # p ~ 0.0002
        _result("t1", "P", [0.3, -0.1, 0.5, 0.2], "y"),  # p ~ 0.14
        _result("t2", "Q", [0.2, 0.25, 0.1, 0.3, 0.15], "z"),  # p ~ 0.004
    ]
    raw = [r.summary.p for r in results]
    assert all(p is not None for p in raw)
    by_table = correct(results, Analysis("holm", "table"))
    assert [r.family for r in by_table] == ["t1", "t1", "t2"]
    assert by_table[2].adjusted == pytest.approx(raw[2])  # alone in its family
    assert [r.adjusted for r in by_table[:2]] == pytest.approx(adjust_pvalues([raw[0], raw[1]], "holm"))  # type: ignore[list-item]
    every = correct(results, Analysis("holm", "all"))
    assert [r.adjusted for r in every] == pytest.approx(adjust_pvalues(raw, "holm"))  # type: ignore[arg-type]
    by_paper = correct(results, Analysis("bh", "paper"))
    assert [r.family for r in by_paper] == ["P", "P", "Q"]
    assert [r.corrected_verdict for r in correct(results, Analysis("none"))] == [
        r.summary.verdict for r in results
    ]


def test_every_output_names_the_correction() -> None:
    results = correct([_result("t1", "P", [0.5, 0.6, 0.55, 0.45]), _result("t1", "P", [0.05, 0.06, 0.04])])
    analysis = Analysis("bh", "paper")
    md = render_markdown(results, "demo", analysis)
    assert "| p adj. (BH per paper) | verdict (BH per paper) |" in md
    assert "Benjamini-Hochberg within each paper" in md
    tex = render_latex(results, "demo", analysis)
    assert "Benjamini-Hochberg within each paper" in tex and "Corrected" in tex
    data = to_json(results, "demo", analysis)
    assert data["analysis"]["correction"] == "bh" and data["analysis"]["family"] == "paper"
    assert {"p", "p_adjusted", "verdict_corrected", "family", "paper"} <= set(data["claims"][0])
    legend = draw_forest(results, "demo", analysis).legends[0]
    assert "BH per paper" in legend.get_title().get_text()


def test_a_forest_marks_a_claim_that_the_correction_leaves_open() -> None:
    # two claims of one table at p = 0.033 and 0.049: each holds alone, neither after Holm
    shaky = [0.4, 0.05, 0.5, 0.1, 0.35]
    results = correct([_result("t", "P", shaky, "u"), _result("t", "P", [0.3, 0.0, 0.5, 0.1, 0.35], "v")])
    assert [r.summary.verdict for r in results] == ["holds", "holds"]
    assert [r.corrected_verdict for r in results] == ["inconclusive", "inconclusive"]
    fig = draw_forest(results, "demo")
    faces = [line.get_markerfacecolor() for line in fig.axes[0].lines if line.get_marker() in VERDICT_MARKERS]
    assert faces == ["white", "white"]  # open: not decided after the correction
    decided = draw_forest(correct(results, Analysis("none")), "demo")
    faces = [
        line.get_markerfacecolor() for line in decided.axes[0].lines if line.get_marker() in VERDICT_MARKERS
    ]
    assert faces and "white" not in faces


def test_the_report_corrects_claims_json_again(tmp_path: Path) -> None:
    from harness.reporting.report import claims_html

    results = correct(
        [
            _result("t1", "P", [0.4, 0.05, 0.5, 0.1, 0.35], "u"),
            _result("t2", "P", [0.3, 0.0, 0.5, 0.1, 0.35], "v"),
        ]
    )
    (tmp_path / "claims.json").write_text(json.dumps(to_json(results, "demo")), encoding="utf-8")
    written = claims_html(tmp_path)
    assert "p adj. (Holm per table)" in written and written.count('class="verdict holds"') == 4
    again = claims_html(tmp_path, Analysis("holm", "paper"))
    assert "p adj. (Holm per paper)" in again and 'class="verdict inconclusive"' in again
    rows = correct_json_rows(
        json.loads((tmp_path / "claims.json").read_text())["claims"], Analysis("holm", "all")
    )
    assert {r["family"] for r in rows} == {"all"}
