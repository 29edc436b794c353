"""The claims as LaTeX: booktabs ``table*`` floats of the rows the other outputs print
(:func:`~harness.reporting.claim_text.claim_rows`), grouped under their paper table and continued
under one table number when a page cannot hold them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.reporting.claim_text import MINUS, claim_rows, heading, measured_on, outcome_note, shape_notes
from harness.reporting.latex_text import latex_text
from harness.reporting.tables.latex import text_em
from harness.stats.correction import DEFAULT_ANALYSIS, Analysis
from harness.stats.paired import ClaimResult


def _tex(text: str) -> str:
    """The table reporter's LaTeX typesetting (escapes, lambda/tau as math), ``>`` as math, the shape
    check's dagger as a superscript."""
    return (
        latex_text(text)
        .replace(">", r"$>$")
        .replace(r" $\dagger$", r"$^\dagger$")  # latex_text sets the dagger as math
    )


def _tex_number(text: str) -> str:
    """A printed difference in LaTeX: the sign as math (``$-$0.18``, ``$+$0.54``), an en dash for none."""
    if text.startswith(MINUS):
        return "$-$" + text[1:]
    if text.startswith("+"):
        return "$+$" + text[1:]
    return text.replace(MINUS, "$-$")


CLAIM_COLUMN = r"p{0.27\linewidth}"
"""The claim column of claims.tex: it wraps, so that the table spans the page at footnotesize type."""
VERDICT_COLUMN = r"p{5.3em}"
"""The two verdict columns wrap (``inconclusive (repeat)``, ``not enough seeds`` on two lines), so that
the night's claims print at full size across a two-column paper's page."""
TABCOLSEP = "4pt"
"""The space either side of a column (LaTeX's default is 6pt), for the same reason."""
FLOAT_LINES = 47
"""Estimated lines per claims float: a longer list continues in the next float. The estimate
(:func:`_printed_lines`) is generous: 52 of its lines fill a two-column article's page under a
three-line caption (the night's claims print unshrunk at 7 pt, nothing too large for the page)."""
COLUMN_EM = 14.2
"""The claim column's width in em of its 8 pt type (0.27 of a 469 pt text width, less the indent),
for :func:`_printed_lines`."""


def _printed_lines(text: str) -> int:
    """How many lines ``text`` takes in the claim column (estimated from glyph widths)."""
    return max(1, math.ceil(text_em(text) / COLUMN_EM))


def _groups(results: Sequence[ClaimResult]) -> list[list[ClaimResult]]:
    """Consecutive claims of one spec with one statement (an order, a sweep: several pairs)."""
    out: list[list[ClaimResult]] = []
    for r in results:
        if out and (out[-1][0].claim.spec, out[-1][0].claim.text) == (r.claim.spec, r.claim.text):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def _numbers(result: ClaimResult) -> list[str]:
    _spec, _text, _label, paper, measured, ci, n, verdict, _p, adjusted, corrected, mdd = claim_rows(
        [result]
    )[0]
    ci = ci if ci == "--" else "[" + ", ".join(_tex_number(x) for x in ci[1:-1].split(", ")) + "]"
    return [
        _tex_number(paper),
        _tex_number(measured),
        ci.replace("$+$inf", "$+\\infty$").replace(
            "$-$inf", "$-\\infty$"
        ),  # an unbounded end of a confidence sequence
        n,
        "\\raggedright " + _tex(verdict.split(" sign-flip")[0]),  # the p-value: the caption's shape notes
        _tex(adjusted),
        "\\raggedright " + _tex(corrected),
        _tex_number(mdd),
    ]


def _latex_chunks(results: Sequence[ClaimResult]) -> list[list[str]]:
    """The claims as tabular rows under their paper table's heading; a statement that covers several
    pairs is a line of its own with its pairs below it (indented, wrapped lines too); cut into floats
    a page holds."""
    chunks: list[list[str]] = [[]]
    lines = 0
    spec = None
    for group in _groups(results):
        first = group[0].claim
        pairs = [(r, _tex(r.claim.label)) for r in group]
        cost = _printed_lines(first.text) + sum(_printed_lines(r.claim.label) for r in group)
        cost += 2 * (first.spec != spec)  # the heading and the space above it
        if lines + cost > FLOAT_LINES and chunks[-1]:
            chunks.append([])
            lines, spec = 0, None
        if first.spec != spec:
            if chunks[-1]:
                chunks[-1].append("\\addlinespace")
            chunks[-1].append(
                f"\\multicolumn{{{COLUMNS}}}{{@{{}}l}}{{\\textit{{{_tex(heading(first))}}}}} \\\\"
            )
            spec = first.spec
        if len(group) == 1:
            result, pair = pairs[0]
            cell = rf"\raggedright {_tex(first.text)}\par\leftskip=1em\relax\textit{{{pair}}}"
            chunks[-1].append(" & ".join([cell, *_numbers(result)]) + " \\\\")
        else:
            chunks[-1].append(f"\\multicolumn{{{COLUMNS}}}{{@{{}}l}}{{{_tex(first.text)}}} \\\\")
            for result, pair in pairs:
                cell = rf"\raggedright\leftskip=1em\relax\textit{{{pair}}}"
                chunks[-1].append(" & ".join([cell, *_numbers(result)]) + " \\\\")
        lines += cost
    return chunks


COLUMNS = 9
"""Columns of claims.tex: claim, paper, measured, interval, n, verdict, adj. p, corrected, MDD."""


def _on(results: Sequence[ClaimResult]) -> str:
    """`` of all-MiniLM-L6-v2`` for the caption: the encoder the runs used."""
    return f" of {_tex(measured_on(results))}" if measured_on(results) else ""


def render_latex(results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS) -> str:
    """Booktabs ``table*`` floats of the claims, grouped under their paper table, at footnotesize type
    with the claim text wrapping and every row naming its pair and score; a list longer than a page
    continues in further floats under the same table number. Shrunk to the line width only where a
    document's line is narrower than the table. The caption names the test and the correction
    (family and method)."""
    interval = "95\\% CS" if analysis.sequential else "95\\% CI"
    cols = ["Claim: compared cells, score", "Paper $\\Delta$", "Measured $\\Delta$", interval, "$n$"]
    cols += ["Verdict", "adj.\\ $p$", "Corrected", "MDD"]
    chunks = _latex_chunks(results)
    lines = [
        "% Generated by `harness claims` from run records; do not edit by hand.",
        "% needs \\usepackage{booktabs,graphicx}",
    ]
    for i, chunk in enumerate(chunks):
        caption = (
            f"Claims of the papers tested on paired seeds{_on(results)}, profile {_tex(profile)}. Each "
            "row names the two cells it compares (better $>$ worse, as the paper has them) and the score. "
            "Measured $\\Delta$: "
            f"mean per-seed difference (better $-$ worse); {interval}: {_tex(analysis.test)}; "
            f"adj.\\ $p$ and Corrected: {_tex(analysis.described)}; in Corrected, "
            f"{_tex(outcome_note(analysis))}; MDD: smallest difference "
            "detectable with 80\\% power at this $n$ and spread."
        )
        notes = shape_notes(results)
        if notes:
            caption += " " + _tex(notes[0]) + " " + "; ".join(_tex(line) for line in notes[1:]) + "."
        lines += [
            "\\begin{table*}[t]",
            "\\centering",
            "\\footnotesize",
            "\\setbox0=\\hbox{%",
            f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP}}}%",
            f"\\begin{{tabular}}{{@{{}}{CLAIM_COLUMN}rrlr{VERDICT_COLUMN}r{VERDICT_COLUMN}r@{{}}}}",
            "\\toprule",
            " & ".join(cols) + " \\\\",
            "\\midrule",
            *chunk,
            "\\bottomrule",
            "\\end{tabular}}%",
            "\\leavevmode\\ifdim\\wd0>\\linewidth\\resizebox{\\linewidth}{!}{\\box0}\\else\\box0\\fi",
        ]
        if i:  # one table continued: its number again, not the next one
            lines += ["\\addtocounter{table}{-1}", "\\caption{Claims of the papers, continued.}"]
        else:
            lines += [f"\\caption{{{caption}}}", "\\label{tab:claims}"]
        lines.append("\\end{table*}")
    return "\n".join(lines) + "\n"
