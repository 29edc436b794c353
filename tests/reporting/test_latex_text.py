"""Plain text to LaTeX: every special character escaped, code spans in typewriter with their dashes
kept apart, and the papers' typography (quotes, lambda, tau_DCL, x100)."""

from __future__ import annotations

import pytest

from harness.reporting.latex_text import latex_escape, latex_text


def test_every_special_character_is_escaped() -> None:
    assert latex_escape(r"a\b&c%d$e#f_g{h}i~j^k") == (
        r"a\textbackslash{}b\&c\%d\$e\#f\_g\{h\}i\textasciitilde{}j\textasciicircum{}k"
    )
    assert latex_escape("61.00 \u00b1 1.41 \u2020\u2021") == r"61.00 $\pm$ 1.41 $\dagger$$\ddagger$"
    assert latex_escape("plain words, 3.5 (n = 2)") == "plain words, 3.5 (n = 2)"


def test_code_spans_are_typewriter_with_separate_dashes() -> None:
    assert latex_text("run `harness grid cpu_demo --seeds 3` first") == (
        r"run \texttt{harness grid cpu\_demo -{}-{}seeds 3} first"
    )
    assert latex_text("`a` and `b_c`") == r"\texttt{a} and \texttt{b\_c}"


@pytest.mark.parametrize(
    ("text", "latex"),
    [
        ("'measured' lines", "`measured' lines"),
        ("the paper's 'ours'", "the paper's `ours'"),
        ("lambda = 0.1", r"$\lambda$ = 0.1"),
        ("lambda_dcl=0.1", r"lambda\_dcl=0.1"),  # a parameter name, not the symbol
        ("tau_DCL = 5", r"$\tau_{\mathrm{DCL}}$ = 5"),
        ("Spearman x100", r"Spearman $\times 100$"),
        ("Spearman x 100", r"Spearman $\times 100$"),
        ("a -- b", "a -- b"),
        ("--profile smoke", "-{}-{}profile smoke"),
        ("50% of a_b & c", r"50\% of a\_b \& c"),
    ],
)
def test_the_papers_typography(text: str, latex: str) -> None:
    assert latex_text(text) == latex
