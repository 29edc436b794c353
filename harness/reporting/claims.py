"""Claims reporter: table specs' claims + run records -> claims.md, claims.tex, claims.json, forest plot.

Over 450 lines on purpose: the three outputs, Markdown, LaTeX and JSON, render the same rows
and stay beside the one function that builds them; the forest plots live in
:mod:`harness.reporting.forest`.

For every claim of every spec, under one profile: the paper's delta, the measured paired difference
over seeds (mean and 95 % interval), the number of paired seeds, the verdict, its p-value, the p-value
adjusted within the claim's family and the verdict after that correction (the family and the method
named: :mod:`harness.reporting.correction`), and the smallest difference this many seeds could detect
at the observed spread (see :mod:`harness.reporting.statistics`). The forest plots:
:mod:`harness.reporting.forest`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_text
from harness.grid.plan import expand
from harness.reporting.claim_text import MINUS, heading, number
from harness.reporting.correction import DEFAULT_ANALYSIS, Analysis, correct
from harness.reporting.forest import write_forests
from harness.reporting.latex_text import latex_text
from harness.reporting.statistics import ClaimResult, evaluate, seed_values
from harness.reporting.tables.build import index_records
from harness.reporting.tables.latex import text_em

if TYPE_CHECKING:
    from harness.specs.model import TableSpec
    from harness.store.run_store import RunStore

VERDICT_TEXT = {
    "holds": "holds",
    "reversed": "reversed",
    "inconclusive": "inconclusive",
    "1 seed": "1 seed: no interval",
    "no data": "no finished runs",
    "not run": "not run here",
}


def build_claims(
    specs: Sequence[TableSpec],
    store: RunStore,
    profile: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
    analysis: Analysis = DEFAULT_ANALYSIS,
) -> list[ClaimResult]:
    """Evaluate every claim of ``specs`` on the store's finished records under ``profile`` with
    ``analysis``'s test, then correct them within their families."""
    plan = expand(specs, profile, seeds=1, overrides=overrides, data_root=data_root)
    records = index_records(store)
    cells = {(c.spec, c.key): c for c in plan.cells}
    out: list[ClaimResult] = []
    seen: dict[tuple[str, ...], str] = {}
    for spec in specs:
        for claim in spec.claims:
            values: list[dict[int, float]] = []
            reasons: list[str] = []
            groups: list[str] = []
            fixed: list[bool] = []
            for key in (claim.better, claim.worse):
                cell = cells.get((spec.name, key))
                if cell is None or cell.state != "run":
                    state = cell.state if cell is not None else "missing"
                    reasons.append(f"{key}: {state} ({cell.reason if cell is not None else 'no cell'})")
                    values.append({})
                    continue
                groups.append(cell.group_id or "")
                fixed.append(cell.configs[0].max_steps == 0)
                runs = records.get(cell.group_id or "", [])
                values.append(seed_values(runs, spec.scores, claim.column, spec.sts_aggregate))
            if not reasons:
                values = _broadcast_untrained(values, fixed)
            result = evaluate(claim, values[0], values[1], "; ".join(reasons), analysis.summariser())
            if not reasons:  # the same runs compared on the same score: a repeat, counted once
                comparison = (*groups, spec.scores, claim.column, spec.sts_aggregate)
                result = dataclasses.replace(result, comparison=comparison)
                if comparison in seen:
                    result = dataclasses.replace(result, same_as=seen[comparison])
                else:
                    seen[comparison] = f"{spec.name}: {claim.label}"
            out.append(result)
    return correct(out, analysis)


def _broadcast_untrained(values: list[dict[int, float]], fixed: list[bool]) -> list[dict[int, float]]:
    """A cell that does not train (``max_steps = 0``) runs once, whatever the seeds: it has no seed
    to vary, so its one value stands against every seed of the other cell (the paired differences
    are then the other cell's values minus a constant)."""
    out = list(values)
    for side in (0, 1):
        other = values[1 - side]
        if fixed[side] and not fixed[1 - side] and len(values[side]) == 1 and other:
            (value,) = values[side].values()
            out[side] = dict.fromkeys(other, value)
    return out


def _interval(result: ClaimResult) -> str:
    s = result.summary
    if s.low is None or s.high is None:
        return "--"
    return f"[{_bound(s.low)}, {_bound(s.high)}]"


def _bound(value: float) -> str:
    """An interval's end (a confidence sequence is unbounded at the first few seeds)."""
    if math.isinf(value):
        return "+inf" if value > 0 else f"{MINUS}inf"
    return number(value)


def p_text(value: float | None) -> str:
    """A p-value as the outputs print it: three decimals, ``<0.001`` below that, ``--`` for none."""
    if value is None:
        return "--"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _rows(results: Sequence[ClaimResult]) -> list[list[str]]:
    rows = []
    for r in results:
        s = r.summary
        rows.append(
            [
                r.claim.spec,
                r.claim.text,
                r.claim.label,
                number(r.claim.paper_delta),
                number(s.mean),
                _interval(r),
                str(s.n),
                VERDICT_TEXT[s.verdict] + (" (repeat)" if r.same_as else ""),
                p_text(s.p),
                p_text(r.adjusted),
                VERDICT_TEXT[r.corrected_verdict],
                number(s.mdd, sign=False),
            ]
        )
    return rows


def header(analysis: Analysis = DEFAULT_ANALYSIS) -> list[str]:
    """The claims table's columns; the interval's kind and the correction are named in them."""
    return [
        "table",
        "claim",
        "compared",
        "paper delta",
        "measured",
        analysis.interval,
        "seeds",
        "verdict",
        "p",
        f"p adj. ({analysis.label})",
        f"verdict ({analysis.label})",
        "MDD (80%)",
    ]


HEADER = header()
"""The columns under the default analysis (every analysis has as many)."""


def totals(results: Sequence[ClaimResult], corrected: bool = False) -> str:
    """``Totals: holds 2, reversed 1`` over the distinct comparisons (repeats are not counted); with
    ``corrected``, the verdicts after correction."""
    counts: dict[str, int] = {}
    for r in results:
        if not r.same_as:
            verdict = r.corrected_verdict if corrected else r.summary.verdict
            counts[verdict] = counts.get(verdict, 0) + 1
    repeats = sum(1 for r in results if r.same_as)
    head = "Totals" if not repeats else f"Totals over {len(results) - repeats} distinct comparisons"
    return f"{head}: " + ", ".join(f"{VERDICT_TEXT[k]} {v}" for k, v in sorted(counts.items()))


def corrected_totals(results: Sequence[ClaimResult], analysis: Analysis = DEFAULT_ANALYSIS) -> str:
    """The totals after correction, the correction named."""
    return f"After {analysis.described}: " + totals(results, corrected=True).split(": ", 1)[1]


def _interval_note(analysis: Analysis) -> str:
    """What the interval and p are, in the outputs' notes."""
    if analysis.sequential:
        return (
            f"{analysis.interval} = {analysis.test}, valid however many seeds were added and whenever "
            "they stopped; p = its anytime-valid p-value"
        )
    return f"{analysis.interval} = Student-t interval; p = the two-sided paired t-test's p-value"


def render_markdown(
    results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS
) -> str:
    """The claims as one Markdown table with a note on how to read it."""
    columns = header(analysis)
    mdd_test = "the sequence" if analysis.sequential else "a two-sided paired t-test (alpha 0.05)"
    lines = [
        f"# Claims under profile {profile}",
        "",
        "Compared = the two cells (better > worse, as the paper has them) and the score; measured = mean of "
        "per-seed paired differences (better \u2212 worse, same seed on both sides); "
        f"{_interval_note(analysis)}; holds / reversed = the interval excludes 0 on the claimed / the "
        "other side; p adj. and the second verdict: corrected for testing the claims together, "
        f"{analysis.described} (a comparison that several rows repeat counts once; holds / reversed "
        f"where p adj. < 0.05); MDD = the smallest true difference {mdd_test} detects with 80% power at "
        "this many seeds and the observed spread. A cell that does not train runs once; its value stands "
        "against every seed of the other cell.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in _rows(results):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    repeats = [r for r in results if r.same_as]
    lines += ["", totals(results), "", corrected_totals(results, analysis)]
    if repeats:
        lines += ["", "Repeats (the same runs compared on the same score as an earlier row; not counted):"]
        lines += [f"- {r.claim.spec}: {r.claim.label} = {r.same_as}" for r in repeats]
    return "\n".join(lines) + "\n"


def _tex(text: str) -> str:
    """The table reporter's LaTeX typesetting (escapes, lambda/tau as math), ``>`` as math."""
    return latex_text(text).replace(">", r"$>$")


def _tex_number(text: str) -> str:
    """A printed difference in LaTeX: the sign as math (``$-$0.18``, ``$+$0.54``), an en dash for none."""
    if text.startswith(MINUS):
        return "$-$" + text[1:]
    if text.startswith("+"):
        return "$+$" + text[1:]
    return text.replace(MINUS, "$-$")


CLAIM_COLUMN = r"p{0.27\linewidth}"
"""The claim column of claims.tex: it wraps, so that the table spans the page at footnotesize type."""
FLOAT_LINES = 52
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
    _spec, _text, _label, paper, measured, ci, n, verdict, _p, adjusted, corrected, mdd = _rows([result])[0]
    ci = ci if ci == "--" else "[" + ", ".join(_tex_number(x) for x in ci[1:-1].split(", ")) + "]"
    return [
        _tex_number(paper),
        _tex_number(measured),
        ci.replace("$+$inf", "$+\\infty$").replace(
            "$-$inf", "$-\\infty$"
        ),  # an unbounded end of a confidence sequence
        n,
        _tex(verdict),
        _tex(adjusted),
        _tex(corrected),
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
            f"Claims of the papers tested on paired seeds, profile {_tex(profile)}. Each row names the two "
            "cells it compares (better $>$ worse, as the paper has them) and the score. Measured $\\Delta$: "
            f"mean per-seed difference (better $-$ worse); {interval}: {_tex(analysis.test)}; "
            f"adj.\\ $p$ and Corrected: {_tex(analysis.described)}; MDD: smallest difference "
            "detectable with 80\\% power at this $n$ and spread."
        )
        lines += [
            "\\begin{table*}[t]",
            "\\centering",
            "\\footnotesize",
            "\\setbox0=\\hbox{%",
            f"\\begin{{tabular}}{{@{{}}{CLAIM_COLUMN}rrlrlrlr@{{}}}}",
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


def to_json(
    results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS
) -> dict[str, Any]:
    """Every claim with its numbers, for other reporters (the HTML report); ``analysis`` names the
    test and the correction, each claim its family, raw and adjusted p-value and both verdicts."""
    return {
        "profile": profile,
        "analysis": analysis.to_json(),
        "claims": [
            {
                "spec": r.claim.spec,
                "heading": heading(r.claim),
                "text": r.claim.text,
                "label": r.claim.label,
                "pair": r.claim.pair,
                "metric": r.claim.metric,
                "better": r.claim.better,
                "worse": r.claim.worse,
                "column": r.claim.column,
                "paper_delta": r.claim.paper_delta,
                "n": r.summary.n,
                "seeds": list(r.paired.seeds),
                "unpaired_seeds": list(r.paired.unpaired),
                "diffs": list(r.paired.diffs),
                "mean": r.summary.mean,
                "sd": r.summary.sd,
                "ci95": [_finite(r.summary.low), _finite(r.summary.high)],
                "verdict": r.summary.verdict,
                "p": r.summary.p,
                "family": r.family,
                "p_adjusted": r.adjusted,
                "verdict_corrected": r.corrected_verdict,
                "mdd80": r.summary.mdd,
                "reason": r.reason,
                "same_as": r.same_as,
                "paper": r.claim.paper,
                "comparison": list(r.comparison),
            }
            for r in results
        ],
    }


def _finite(value: float | None) -> float | None:
    """A bound for JSON: an unbounded end (a confidence sequence at its first seeds) as null."""
    return value if value is not None and math.isfinite(value) else None


def write_claims(
    results: Sequence[ClaimResult],
    profile: str,
    out_dir: Path,
    analysis: Analysis = DEFAULT_ANALYSIS,
    *,
    titles: bool = False,
) -> list[Path]:
    """Write claims.md, claims.tex, claims.json and one forest plot per table
    (``claims_forest_<spec>.{png,pdf}``, their captions in ``claims_figures.tex``) into ``out_dir``,
    each file atomically (a failure leaves that file and the ones after it as they were). Forest
    plots of tables no longer among the results are removed, so the folder shows these claims only."""
    texts = {
        "claims.md": render_markdown(results, profile, analysis),
        "claims.tex": render_latex(results, profile, analysis),
        "claims.json": json.dumps(to_json(results, profile, analysis), indent=2) + "\n",
    }
    paths = [write_text(out_dir / name, text) for name, text in texts.items()]
    return paths + write_forests(results, profile, out_dir, analysis, titles=titles)


__all__ = [
    "MINUS",
    "build_claims",
    "corrected_totals",
    "header",
    "heading",
    "number",
    "p_text",
    "render_latex",
    "render_markdown",
    "to_json",
    "totals",
    "write_claims",
]
