"""Claims reporter: table specs' claims + run records -> claims.md, claims.tex, claims.json, forest plot.

For every claim of every spec, under one profile: the paper's delta, the measured paired difference
over seeds (mean and 95 % interval), the number of paired seeds, the verdict, its p-value, the p-value
adjusted within the claim's family and the verdict after that correction (the family and the method
named: :mod:`harness.stats.correction`), and the smallest difference this many seeds could detect
at the observed spread (see :mod:`harness.stats.paired`). Every output prints the cells of
:func:`~harness.reporting.claim_text.claim_rows`; the LaTeX floats: :mod:`harness.reporting.claims_latex`;
the forest plots: :mod:`harness.reporting.forest`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_text
from harness.reporting.claim_text import (
    MINUS,
    VERDICT_TEXT,
    claim_rows,
    heading,
    measured_on,
    measured_pair,
    number,
    outcome_note,
    p_text,
    shape_notes,
)
from harness.reporting.claims_latex import render_latex
from harness.reporting.forest import write_forests
from harness.reporting.tables.model import encoder_name
from harness.specs.cells import reading_plan, records_by_cell
from harness.specs.claim import Claim
from harness.stats.correction import DEFAULT_ANALYSIS, Analysis, correct
from harness.stats.paired import ClaimResult, evaluate, seed_values

if TYPE_CHECKING:
    from harness.specs.model import TableSpec
    from harness.store.run_store import RunStore


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
    plan = reading_plan(specs, profile, overrides=overrides, data_root=data_root)
    records = records_by_cell(store.records())
    cells = {(c.spec, c.key): c for c in plan.cells}
    out: list[ClaimResult] = []
    seen: dict[tuple[str, ...], str] = {}
    for spec in specs:
        for claim in spec.claims:
            values: list[dict[int, float]] = []
            reasons: list[str] = []
            config_ids: list[str] = []
            fixed: list[bool] = []
            encoder = ""
            for key in (claim.better, claim.worse):
                cell = cells.get((spec.name, key))
                if cell is None or cell.state != "run":
                    state = cell.state if cell is not None else "missing"
                    reasons.append(f"{key}: {state} ({cell.reason if cell is not None else 'no cell'})")
                    values.append({})
                    continue
                config_ids.append(cell.config_id or "")
                fixed.append(cell.configs[0].max_steps == 0)
                runs = records.get(cell.config_id or "", [])
                values.append(seed_values(runs, spec.scores, claim.column, spec.sts_aggregate))
            if not reasons:
                values = _broadcast_untrained(values, fixed)
                both = [cells[(spec.name, k)] for k in (claim.better, claim.worse)]
                encoders = {encoder_name(c.configs[0].model) for c in both if c.configs}
                encoder = encoders.pop() if len(encoders) == 1 else ""
                claim = _as_measured(claim, encoder)
            result = evaluate(claim, values[0], values[1], "; ".join(reasons), analysis.summariser())
            if encoder:
                result = dataclasses.replace(result, encoder=encoder)
            if not reasons:  # the same runs compared on the same score: a repeat, counted once
                comparison = (*config_ids, spec.scores, claim.column, spec.sts_aggregate)
                result = dataclasses.replace(result, comparison=comparison)
                if comparison in seen:
                    result = dataclasses.replace(result, same_as=seen[comparison])
                else:
                    seen[comparison] = f"{spec.name}: {claim.label}"
            out.append(result)
    return correct(out, analysis)


def _as_measured(claim: Claim, encoder: str) -> Claim:
    """The claim with its pair naming the encoder its cells run (:func:`measured_pair`), the paper's
    pair kept in ``paper_pair``; as it is where the two cells run different encoders (``encoder``
    empty)."""
    if not encoder or not claim.pair:
        return claim
    pair = measured_pair(claim.pair, encoder)
    return claim if pair == claim.pair else dataclasses.replace(claim, pair=pair, paper_pair=claim.pair)


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
    ``corrected``, the outcomes after correction (ruled out, not enough seeds, ... where not decided)."""
    counts: dict[str, int] = {}
    for r in results:
        if not r.same_as:
            verdict = r.outcome if corrected else r.summary.verdict
            counts[verdict] = counts.get(verdict, 0) + 1
    repeats = sum(1 for r in results if r.same_as)
    head = "Totals" if not repeats else f"Totals over {len(results) - repeats} distinct comparisons"
    order = list(VERDICT_TEXT)
    ranked = sorted(counts.items(), key=lambda kv: order.index(kv[0]))
    return f"{head}: " + ", ".join(f"{VERDICT_TEXT[k]} {v}" for k, v in ranked)


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
        *([f"Measured on {measured_on(results)}.", ""] if measured_on(results) else []),
        "Compared = the two cells (better > worse, as the paper has them) and the score; measured = mean of "
        "per-seed paired differences (better \u2212 worse, same seed on both sides); "
        f"{_interval_note(analysis)}; holds / reversed = the interval excludes 0 on the claimed / the "
        "other side; p adj. and the second verdict: corrected for testing the claims together, "
        f"{analysis.described} (a comparison that several rows repeat counts once; holds / reversed "
        f"where p adj. < 0.05; {outcome_note(analysis)}); MDD = the smallest true difference {mdd_test} "
        "detects with 80% power at this many seeds and the observed spread. A cell that does not train "
        "runs once; its value stands against every seed of the other cell.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in claim_rows(results):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    repeats = [r for r in results if r.same_as]
    lines += ["", totals(results), "", corrected_totals(results, analysis)]
    notes = shape_notes(results)
    if notes:
        lines += ["", notes[0], *(f"- {line}" for line in notes[1:])]
    if repeats:
        lines += ["", "Repeats (the same runs compared on the same score as an earlier row; not counted):"]
        lines += [f"- {r.claim.spec}: {r.claim.label} = {r.same_as}" for r in repeats]
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
                "paper_pair": r.claim.paper_pair or None,
                "encoder": r.encoder or None,
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
                "outcome": r.outcome,
                "open_outcome": r.open_outcome,
                "effect": analysis.effect.of(r.claim.paper_delta),
                "mdd80": r.summary.mdd,
                "shape": r.shape or None,
                "sign_flip_p": r.sign_flip,
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
