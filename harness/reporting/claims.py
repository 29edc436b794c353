"""Claims reporter: table specs' claims + run records -> claims.md, claims.tex, claims.json, forest plot.

For every claim of every spec, under one profile: the paper's delta, the measured paired difference
over seeds (mean and 95 % interval), the number of paired seeds, the verdict, its p-value, the p-value
adjusted within the claim's family and the verdict after that correction (the family and the method
named: :mod:`harness.reporting.correction`), and the smallest difference this many seeds could detect
at the observed spread (see :mod:`harness.reporting.statistics`).

Over 450 lines on purpose: the four outputs (Markdown, LaTeX, JSON, forest plot) render the same
rows, so they stay beside the one function that builds them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import save_figure, write_text
from harness.grid.plan import expand
from harness.reporting.correction import DEFAULT_ANALYSIS, Analysis, correct
from harness.reporting.latex_text import latex_text
from harness.reporting.statistics import ClaimResult, evaluate, seed_values
from harness.reporting.tables.build import index_records

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
                    seen[comparison] = f"{spec.name}: {claim.text}"
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


def _num(value: float | None, digits: int = 2, sign: bool = True) -> str:
    if value is None:
        return "--"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _interval(result: ClaimResult) -> str:
    s = result.summary
    if s.low is None or s.high is None:
        return "--"
    return f"[{_bound(s.low)}, {_bound(s.high)}]"


def _bound(value: float) -> str:
    """An interval's end (a confidence sequence is unbounded at the first few seeds)."""
    return f"{value:+.2f}" if abs(value) != float("inf") else ("+inf" if value > 0 else "-inf")


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
                f"{r.claim.better} > {r.claim.worse}",
                _num(r.claim.paper_delta),
                _num(s.mean),
                _interval(r),
                str(s.n),
                VERDICT_TEXT[s.verdict] + (" (repeat)" if r.same_as else ""),
                p_text(s.p),
                p_text(r.adjusted),
                VERDICT_TEXT[r.corrected_verdict],
                _num(s.mdd, sign=False),
            ]
        )
    return rows


def header(analysis: Analysis = DEFAULT_ANALYSIS) -> list[str]:
    """The claims table's columns; the interval's kind and the correction are named in them."""
    return [
        "table",
        "claim",
        "cells",
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


def render_markdown(
    results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS
) -> str:
    """The claims as one Markdown table with a note on how to read it."""
    columns = header(analysis)
    if analysis.sequential:
        interval = (
            f"{analysis.interval} = {analysis.test}, valid however many seeds were added and whenever "
            "they stopped; p = its anytime-valid p-value"
        )
    else:
        interval = f"{analysis.interval} = Student-t interval; p = the two-sided paired t-test's p-value"
    mdd_test = "the sequence" if analysis.sequential else "a two-sided paired t-test (alpha 0.05)"
    lines = [
        f"# Claims under profile {profile}",
        "",
        "Measured = mean of per-seed paired differences (better - worse, same seed on both sides); "
        f"{interval}; "
        "holds / reversed = the interval excludes 0 on the claimed / the other side; "
        f"p adj. and the second verdict: corrected for testing the claims together, {analysis.described} "
        "(a comparison that several rows repeat counts once; holds / reversed where p adj. < 0.05); "
        f"MDD = the smallest true difference {mdd_test} detects with 80% power "
        "at this many seeds and the observed spread. A cell that does not train runs once; its value "
        "stands against every seed of the other cell.",
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
        lines += [f"- {r.claim.spec}: {r.claim.text} = {r.same_as}" for r in repeats]
    return "\n".join(lines) + "\n"


def _tex(text: str) -> str:
    """The table reporter's LaTeX typesetting (escapes, lambda/tau as math), and ``>`` as math."""
    return latex_text(text).replace(">", r"$>$")


CLAIM_COLUMN = r"p{0.28\linewidth}"
"""The claim column of claims.tex: it wraps, so that the table spans the page at footnotesize type."""
FLOAT_LINES = 44
"""Printed lines per claims float: a longer list continues in the next float (one page holds ~50)."""


def _latex_chunks(results: Sequence[ClaimResult]) -> list[list[str]]:
    """The claims as tabular rows, grouped under their table's name, cut into floats a page holds."""
    chunks: list[list[str]] = [[]]
    lines = 0
    spec = None
    for row in _rows(results):
        table, claim, _cells, paper, measured, ci, n, verdict, _p, adjusted, corrected, mdd = row
        cost = 1 + len(claim) // 36 + (table != spec)
        if lines + cost > FLOAT_LINES and chunks[-1]:
            chunks.append([])
            lines, spec = 0, None
        if table != spec:
            if chunks[-1]:
                chunks[-1].append("\\addlinespace")
            chunks[-1].append(f"\\multicolumn{{9}}{{@{{}}l}}{{\\textit{{{_tex(table)}}}}} \\\\")
            spec = table
        cells = [
            r"\raggedright " + _tex(claim),
            paper,
            measured,
            ci,
            n,
            _tex(verdict),
            _tex(adjusted),
            _tex(corrected),
            mdd,
        ]
        chunks[-1].append(" & ".join(c.replace("--", "-{}-") if c == "--" else c for c in cells) + " \\\\")
        lines += cost
    return chunks


def render_latex(results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS) -> str:
    """Booktabs ``table*`` floats of the claims, grouped by table, at footnotesize type with the claim
    text wrapping; a list longer than a page continues in further floats. Shrunk to the line width
    only where a document's line is narrower than the table. The caption names the test and the
    correction (family and method)."""
    interval = "95\\% CS" if analysis.sequential else "95\\% CI"
    cols = [
        "Claim",
        "Paper $\\Delta$",
        "Measured $\\Delta$",
        interval,
        "$n$",
        "Verdict",
        "adj.\\ $p$",
        "Corrected",
        "MDD",
    ]
    chunks = _latex_chunks(results)
    lines = [
        "% Generated by `harness claims` from run records; do not edit by hand.",
        "% needs \\usepackage{booktabs,graphicx}",
    ]
    for i, chunk in enumerate(chunks):
        more = " (continued)" if i else ""
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
            f"\\caption{{Claims of the papers tested on paired seeds (profile {_tex(profile)}){more}. "
            "Measured $\\Delta$: mean per-seed difference (better $-$ worse); "
            f"{interval}: {_tex(analysis.test)}; "
            f"adj.\\ $p$ and Corrected: {_tex(analysis.described)}; "
            "MDD: smallest difference detectable with 80\\% power at this $n$ and spread.}",
            f"\\label{{tab:claims{'' if not i else f'-{i + 1}'}}}",
            "\\end{table*}",
        ]
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
                "text": r.claim.text,
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


def claim_label(result: ClaimResult, results: Sequence[ClaimResult], with_spec: bool = True) -> str:
    """``spec: text`` (``text`` alone without ``with_spec``); where one statement stands for several
    pairs (an order, a sweep over another), the pair is named too, so that every line of the plot
    says what it compares."""
    claim = result.claim
    label = f"{claim.spec}: {claim.text}" if with_spec else claim.text
    twins = sum(1 for r in results if r.claim.spec == claim.spec and r.claim.text == claim.text)
    return f"{label} ({claim.better} > {claim.worse})" if twins > 1 else label


def forest_plot(
    results: Sequence[ClaimResult], profile: str, stem: Path, analysis: Analysis = DEFAULT_ANALYSIS
) -> list[Path]:
    """Draw :func:`draw_forest` and save it as ``<stem>.png`` and ``<stem>.pdf``; return the paths."""
    import matplotlib.pyplot as plt

    fig = draw_forest(results, profile, analysis)
    try:  # each file atomically: a failure leaves it as it was
        return [
            save_figure(fig, stem.with_suffix(suffix), dpi=dpi)
            for suffix, dpi in ((".png", 300), (".pdf", None))
        ]
    finally:
        plt.close(fig)


LABEL_CHARS = 64
"""A forest plot's claim labels wrap at this many characters, so the intervals keep most of the width."""


def draw_forest(
    results: Sequence[ClaimResult], profile: str, analysis: Analysis = DEFAULT_ANALYSIS
) -> Figure:
    """One line per claim: measured interval and mean, the paper's delta marked.

    The interval's colour is the raw verdict; the mean's marker is filled where the claim holds or is
    reversed after the correction and open where it is not (the legend's title names the correction,
    its family and method). Claims of one table are labelled by their text alone (the table is named
    in the title); claims of several tables carry the table's name. The figure is as wide as its
    labels need plus a fixed width for the intervals, laid out by matplotlib's constrained layout; an
    unbounded end of a confidence sequence runs to the edge.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    shown = list(results)
    specs = sorted({r.claim.spec for r in shown})
    labels = [
        textwrap.fill(claim_label(r, shown, with_spec=len(specs) > 1), LABEL_CHARS) for r in reversed(shown)
    ]
    lines = sum(label.count("\n") + 1 for label in labels)
    height = max(2.0, 0.16 * lines + 0.12 * len(shown) + 1.3)
    width = 4.2 + 0.058 * max((len(line) for label in labels for line in label.splitlines()), default=0)
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    colours = {"holds": "#1b7837", "reversed": "#b2182b", "inconclusive": "#555555"}
    finite = [
        abs(v)
        for r in shown
        for v in (r.summary.low, r.summary.high, r.summary.mean, r.claim.paper_delta)
        if v is not None and math.isfinite(v)
    ]
    edge = 1.05 * max(finite, default=1.0)
    for i, r in enumerate(shown):
        y = len(shown) - 1 - i
        s = r.summary
        colour = colours.get(s.verdict, "#999999")
        if s.low is not None and s.high is not None:
            ax.plot([max(s.low, -edge), min(s.high, edge)], [y, y], color=colour, linewidth=2)
        if s.mean is not None:
            decided = r.corrected_verdict in ("holds", "reversed")
            face = colour if decided else "white"
            ax.plot([s.mean], [y], "o", color=colour, markerfacecolor=face, markersize=4)
        ax.plot(
            [r.claim.paper_delta], [y], "D", markerfacecolor="none", markeredgecolor="#2166ac", markersize=5
        )
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.margins(x=0.08)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("better \u2212 worse, paired by seed (score points)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    title = f"Claims of {specs[0]}" if len(specs) == 1 else "Claims"
    ax.set_title(f"{title}, profile {profile}", fontsize=9)
    used = {r.summary.verdict for r in shown}
    handles = [
        Line2D(
            [],
            [],
            color=colour,
            linewidth=2,
            marker="o",
            markersize=4,
            label=f"{verdict}: mean, {analysis.interval}",
        )
        for verdict, colour in colours.items()
        if verdict in used
    ]
    handles.append(
        Line2D([], [], color="#2166ac", marker="D", markerfacecolor="none", linestyle="", label="paper delta")
    )
    legend = fig.legend(
        handles=handles,
        fontsize=8,
        loc="outside lower center",
        ncol=len(handles),
        frameon=False,
        title=f"colour: raw verdict; filled mean: holds or reversed after correction ({analysis.label})",
    )
    legend.get_title().set_fontsize(8)
    return fig


def write_claims(
    results: Sequence[ClaimResult], profile: str, out_dir: Path, analysis: Analysis = DEFAULT_ANALYSIS
) -> list[Path]:
    """Write claims.md, claims.tex, claims.json and the forest plot (PNG, PDF) into ``out_dir``
    (each file atomically: a failure leaves that file and the ones after it as they were)."""
    texts = {
        "claims.md": render_markdown(results, profile, analysis),
        "claims.tex": render_latex(results, profile, analysis),
        "claims.json": json.dumps(to_json(results, profile, analysis), indent=2) + "\n",
    }
    paths = [write_text(out_dir / name, text) for name, text in texts.items()]
    paths += forest_plot(results, profile, out_dir / "claims_forest", analysis)
    return paths


__all__ = [
    "build_claims",
    "claim_label",
    "corrected_totals",
    "draw_forest",
    "header",
    "p_text",
    "render_latex",
    "render_markdown",
    "to_json",
    "totals",
    "write_claims",
]
