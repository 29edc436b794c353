"""The LaTeX tables: golden files, booktabs and escaping, typography, and every table compiles in a
two-column paper without an overfull box."""

from __future__ import annotations

import re
from pathlib import Path

from harness.reporting.latex_text import latex_escape
from harness.reporting.tables.build import build_tables
from harness.reporting.tables.latex import SD_SIZE, latex_layout, render_latex
from harness.reporting.tables.model import RenderedTable
from harness.store.run_store import RunStore
from tests.helpers import check_golden, make_corpus_root
from tests.pages import latex_problems, pdflatex


def test_golden_tex(rendered: list[RenderedTable]) -> None:
    for table in rendered:
        check_golden(f"{table.name}.tex", render_latex(table))


def test_latex_is_booktabs_and_escaped(rendered: list[RenderedTable]) -> None:
    tex = render_latex(rendered[0])
    for piece in (
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
        r"\textbf{",
        r"\underline{",
        r"$\pm$",
        r"$\dagger$",  # full size: a superscript would print below 7 pt
    ):
        assert piece in tex
    assert r"100\% \& more\_stuff" in tex
    assert "profile smoke" in tex and "SimCSE++ Table 3" in tex
    assert latex_escape("a_b & c%") == r"a\_b \& c\%"


# -- LaTeX typography and fit ----------------------------------------------------------------------
def test_latex_typography(rendered: list[RenderedTable]) -> None:
    from harness.reporting.latex_text import latex_text

    tex = render_latex(rendered[0])
    # the own-method mark after a row end: `\\*` would be LaTeX's starred line break, swallowing it
    assert not re.search(r"\\\\\s*\*", tex)
    assert "{*}\\,SimCSE++-BERT-base" in tex
    assert r"\texttt{harness grid report\_rows -{}-{}profile smoke}" in tex
    assert "--profile" not in tex.split("\\begin{table")[1]
    assert "'paper'" not in tex and "`measured'" in tex
    assert latex_text("'paper' lines") == "`paper' lines"
    assert latex_text("SimCSE++'s 'released' values") == "SimCSE++'s `released' values"  # a possessive stays
    assert latex_text("lambda") == r"$\lambda$" and latex_text("lambda_dcl=0.1") == r"lambda\_dcl=0.1"
    assert latex_text("tau_DCL = 5") == r"$\tau_{\mathrm{DCL}}$ = 5"
    assert latex_text("Spearman x100, all") == r"Spearman $\times 100$, all"
    assert latex_text("a -- b") == "a -- b"  # a real en dash stays one
    assert latex_text("run --seeds 3") == "run -{}-{}seeds 3"
    # several seeds: mean $\pm$ std with the seed count
    # the sd on the row below the means, the seed count in a note (or after each sd where they differ)
    assert r"\quad\textit{measured} & \textbf{61.00} & \underline{70.50} & \textbf{65.50} \\" in tex
    small = "{" + SD_SIZE[latex_layout(rendered[0]).size]  # the sd a step smaller than the means
    assert f" & {small} $\\pm$1.41}} & {small} $\\pm$0.71}} & {small} $\\pm$0.71}} \\\\" in tex
    assert "mean $\\pm$ sample sd over 2 seeds" in tex
    from harness.reporting.tables.latex import _split_cell
    from harness.reporting.tables.model import Text

    assert _split_cell(Text("61.00 \u00b1 1.41", seeds=2), None) == ("61.00", "\u00b11.41 (2)")
    assert _split_cell(Text("61.00 \u00b1 1.41", seeds=2), 2) == ("61.00", "\u00b11.41")
    assert _split_cell(Text("61.00"), None) == ("61.00", "")
    assert "ranked separately among the measured numbers and among the paper's" in tex
    # one pair of parentheses at most in the caption: the title's own
    assert r"\caption{Fixture: rows \& sections. Paper numbers from SimCSE++ Table 3; measured lines" in tex


def test_latex_check_catches_overfull_and_errors(tmp_path: Path) -> None:
    wide = r"\noindent\hbox{" + "wide " * 40 + r"}\par"
    assert any(p.startswith("Overfull") for p in latex_problems(wide, tmp_path / "wide"))
    assert any(p.startswith("!") for p in latex_problems(r"\undefinedmacro", tmp_path / "err"))


def test_every_table_compiles_and_fits_two_columns(rendered: list[RenderedTable], tmp_path: Path) -> None:
    from harness.specs.find import load_table_specs

    pdflatex()
    data_root = make_corpus_root(tmp_path / "real" / "data")
    real = build_tables(load_table_specs(), RunStore(tmp_path / "real" / "runs"), "cpu", data_root=data_root)
    body = "\n\\clearpage\n".join(render_latex(t) for t in [*rendered, *real])
    assert latex_problems(body, tmp_path / "tex") == []
