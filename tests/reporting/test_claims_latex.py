"""The claims as LaTeX floats: they compile and fit, signs typeset as math, a long list continued
under one table number."""

from __future__ import annotations

from pathlib import Path

from harness.reporting.claim_text import MINUS
from harness.reporting.claims import build_claims
from harness.reporting.claims_latex import render_latex
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore
from tests.helpers import make_corpus_root
from tests.pages import latex_problems, pdflatex


def test_claims_table_compiles_and_fits(tmp_path: Path) -> None:
    pdflatex()
    data_root = make_corpus_root(tmp_path / "real" / "data")
    specs = [s for s in load_table_specs() if s.claims]
    results = build_claims(specs, RunStore(tmp_path / "real" / "runs"), "cpu", data_root=data_root)
    assert len(results) >= 50
    tex = render_latex(results, "cpu")
    assert r"$\lambda$" in tex and r"$\tau_{\mathrm{DCL}}$" in tex
    assert latex_problems(tex, tmp_path / "claims") == []


def test_a_long_list_continues_under_one_table_number(night: list) -> None:
    tex = render_latex(night, "night")
    floats = tex.count(r"\begin{table*}")
    assert floats >= 2  # the night's 56 claims do not fit one page
    assert tex.count(r"\addtocounter{table}{-1}") == floats - 1
    assert tex.count(r"\label{tab:claims}") == 1 and tex.count("continued") == floats - 1
    assert "$-$" in tex and MINUS not in tex  # every minus sign typeset as math
