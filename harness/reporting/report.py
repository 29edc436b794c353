"""One self-contained HTML report: every table, the claims, the plots and each run's provenance.

The page fits any window from a phone's to 1,920 px: a measured cell prints its sd on a smaller line
under its mean, so the tables fit the width; a table still wider than the window scrolls inside its
own box, its label column staying in view (sticky; on a narrow screen wrapped to under a third of
it) and no cell hidden under it; provenance tables scroll in boxes of their own
(``tests/system/test_report_cells.py`` checks every cell in headless Chromium at 390, 1,280 and
1,920 px).
Figures show at their natural size (a 7 in figure is 672 CSS px wide), shrinking only to fit the
window, with the captions their reporters wrote (``captions.json``). Provenance lists every run
with its method, seed and scores, then every key once per distinct value with the runs that share
it, in words (no Python literals) and without the paths of the machine that ran it.

The page has no external reference: CSS is inline, PNG plots are embedded as base64 ``data:`` URIs
and SVG plots inline. Its inputs are the rendered tables (themselves built from run records only),
``results/claims/`` (``claims.md``, else ``claims.json``; "no claims computed" when neither exists),
the images under ``results/plots`` and the run records for the provenance section.

Nothing here writes files except :func:`write_report`.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import write_text
from harness.errors import HarnessError
from harness.reporting.claim_text import number, outcome_note
from harness.reporting.figures import css_width
from harness.reporting.forest import STEM as FOREST_STEM
from harness.reporting.report_provenance import plural, provenance_html
from harness.reporting.tables.model import OURS_MARK, Line, RenderedTable, Text
from harness.stats.correction import Analysis, correct_json_rows
from harness.stats.outcomes import DEFAULT_EFFECT, parse_effect
from harness.stats.sequential import read_design

NO_CLAIMS = "No claims computed."

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 110em; padding: 0 1.5em; color: #1d1d1f; background: #fff; }
h1 { font-size: 1.7em; margin-bottom: .2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2em;
       margin-top: 2em; } h3 { margin-bottom: .3em; }
nav ul { columns: 2; } .meta { color: #555; }
.scroll { overflow-x: auto; max-width: 100%; margin: .6em 0; }
table.results { border-collapse: separate; border-spacing: 0; font-variant-numeric: tabular-nums; }
table.results th, table.results td { padding: .25em .55em; text-align: right; white-space: nowrap;
       background: #fff; vertical-align: top; }
table.results th:first-child, table.results td:first-child { text-align: left; position: sticky; left: 0;
       z-index: 1; }
table.results tr.heading td { font-style: italic; color: #333; padding-top: .8em; text-align: left;
       border-bottom: 1px solid #ccc; }
table.results thead th { border-top: 2px solid #222; border-bottom: 1px solid #222; }
table.results tbody tr:last-child td { border-bottom: 2px solid #222; }
table.results tr.rule td { border-top: 1px solid #888; padding: 0; }
table.results tr.measured td { color: #0b4f8a; } table.results tr.measured td:first-child { padding-left: 2em;
       font-style: italic; }
table.results tr.header td { font-style: italic; border-bottom: 1px solid #aaa; }
td.best { font-weight: 700; } td.second::first-line { text-decoration: underline; }
.sd { display: block; font-size: .78em; color: #555; font-weight: 400; text-decoration: none; }
.pair { display: block; font-style: italic; color: #444; padding-left: 1em; }
table.claims td:first-child, table.claims th:first-child { white-space: normal; min-width: 22em;
       max-width: 34em; text-align: left; }
table.claims th { white-space: normal; }
td.verdict.holds { color: #1b7837; } td.verdict.reversed { color: #b2182b; }
ul.notes { font-size: .85em; color: #444; max-width: 60em; }
figure { display: inline-block; vertical-align: top; margin: .5em 1em 1em 0; max-width: 100%; }
figure img, figure svg { display: block; max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; max-width: 46em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; white-space: pre-wrap; }
table.prov { border-collapse: collapse; font-size: .85em; margin-bottom: 1em; }
table.prov th, table.prov td { border: 1px solid #ddd; padding: .2em .5em; vertical-align: top;
       text-align: left; }
table.prov td:first-child { font-weight: 600; white-space: nowrap; }
table.prov pre { margin: 0; max-height: 24em; overflow: auto; }
details { margin: .4em 0; } summary { cursor: pointer; }
.status-finished { color: #137333; } .status-failed { color: #b3261e; }
@media (max-width: 700px) {
  body { margin: 1em auto; padding: 0 .7em; font-size: 14px; }
  nav ul { columns: 1; }
  table.results th:first-child, table.results td:first-child, table.claims td:first-child,
  table.claims th:first-child { white-space: normal; overflow-wrap: break-word; min-width: 27vw;
       width: 27vw; max-width: 27vw; font-size: .9em; }
  table.results tr.measured td:first-child { padding-left: .8em; }
  table.prov:not(.runs) { table-layout: fixed; width: 100%; }
  table.prov:not(.runs) td, table.prov:not(.runs) th { white-space: normal; overflow-wrap: anywhere; }
}
tr.heading td > .head { position: sticky; left: .55em; display: inline-block; white-space: normal;
       max-width: min(60em, calc(100vw - 4em)); }
"""


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _note(text: str) -> str:
    """A note escaped, with its `code` spans as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _esc(text))


# -- tables ---------------------------------------------------------------------------------------
def _cell(cell: Text) -> str:
    """A cell: the mean, and under it (smaller) the sd and the seed count; bold / underlined."""
    cls = f' class="{cell.style}"' if cell.style else ""
    mean, _, sd = cell.text.partition(" \u00b1 ")
    seeds = f"n = {cell.seeds}" if cell.seeds > 1 else ""
    below = " \u00b7 ".join(x for x in (f"\u00b1 {sd}" if sd else "", seeds) if x)
    extra = f'<span class="sd">{_esc(below)}</span>' if below else ""
    return f"<td{cls}>{_esc(mean)}{extra}</td>"


def _label(line: Line) -> str:
    label = _esc(line.label)
    if line.ours:
        label = f"{OURS_MARK} {label}"
    return label + _esc(line.marks)


def table_html(table: RenderedTable) -> str:
    """One table: paper lines with their labels, the measured line below each, then the notes."""
    ncols = len(table.header)
    out = [
        f'<section class="table" id="table-{_esc(table.name)}">',
        f"<h3>{_esc(table.title)}</h3>",
        f'<p class="meta">{_esc(table.cites)}; profile <code>{_esc(table.profile)}</code>; '
        f"spec <code>{_esc(table.spec_path)}</code></p>",
        '<div class="scroll"><table class="results"><thead><tr>',
        *(f"<th>{_esc(h)}</th>" for h in table.header),
        "</tr></thead><tbody>",
    ]
    for line in table.lines:
        if line.kind == "rule":
            out.append(f'<tr class="rule"><td colspan="{ncols}"></td></tr>')
            continue
        if line.kind == "header":
            cells = [f"<td>{_esc(line.label)}</td>", *(f"<td>{_esc(c.text)}</td>" for c in line.cells)]
        else:
            cells = [f"<td>{_label(line)}</td>", *(_cell(c) for c in line.cells)]
        cells += ["<td></td>"] * (ncols - len(cells))
        out.append(f'<tr class="{line.kind}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    out.append('<ul class="notes">' + "".join(f"<li>{_note(n)}</li>" for n in table.notes) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


# -- claims, plots, provenance ----------------------------------------------------------------------
def _written_analysis(data: Mapping[str, Any]) -> Analysis | None:
    """The analysis a ``claims.json`` names (None for one written before corrections were)."""
    written = data.get("analysis")
    if not isinstance(written, dict):
        return None
    try:
        design = read_design(written, "claims.json: analysis")
        return Analysis(
            correction=written.get("correction", "none"),
            family=written.get("family", "table"),
            sequential=written.get("test") == "sequential",
            effect=parse_effect(str(written.get("effect") or DEFAULT_EFFECT)),
            max_seeds=design.max_seeds,
            mixture_c=design.mixture_c,
        )
    except (ValueError, TypeError, HarnessError):
        return None


CAPTIONS = "captions.json"
"""``{file stem: caption}`` that ``harness claims`` and ``harness plots`` write beside their figures."""


def _num(value: Any, sign: bool = True) -> str:
    """A number of claims.json as the claims tables print it (a real minus)."""
    return number(float(value), sign=sign) if isinstance(value, int | float) else "&ndash;"


def _claims_table(data: Any, correction: Analysis | None = None) -> str | None:
    """``claims.json`` as written by ``harness claims``, as an HTML table (None for another shape):
    grouped under each paper table's heading, every row naming its pair and score.

    Both verdicts are shown, the correction named: as written, or corrected again under
    ``correction`` (its method and family; the test stays the one the file was written with)."""
    rows = data.get("claims") if isinstance(data, dict) else None
    if (
        not isinstance(rows, list)
        or not rows
        or not all(isinstance(r, dict) and "paper_delta" in r for r in rows)
    ):
        return None
    analysis = _written_analysis(data)
    if correction is not None:
        kept = analysis if analysis is not None else Analysis()
        analysis = dataclasses.replace(kept, correction=correction.correction, family=correction.family)
        rows = correct_json_rows(rows, analysis)
    label = _esc(analysis.label if analysis is not None else "none")
    interval = analysis.interval if analysis is not None else "95% CI"
    columns = ["claim: compared cells, score", "paper &Delta;", "measured &Delta;", interval, "seeds"]
    columns += ["verdict", "p", f"p adj. ({label})", f"verdict ({label})", "MDD (80%)"]
    head = "".join(f"<th>{h}</th>" for h in columns)
    body = []
    group = None
    for r in rows:
        title = str(r.get("heading") or r.get("spec", ""))
        if title != group:
            label = f'<span class="head">{_esc(title)}</span>'
            body.append(f'<tr class="heading"><td colspan="{len(columns)}">{label}</td></tr>')
            group = title
        low, high = (r.get("ci95") or [None, None])[:2]
        ci = _interval(low, high, r.get("n"))
        verdict = _esc(str(r.get("verdict", "")))
        repeat = (
            f' <span title="same runs as {_esc(str(r["same_as"]))}">(repeat)</span>'
            if r.get("same_as")
            else ""
        )
        corrected = _esc(str(r.get("outcome") or r.get("verdict_corrected") or r.get("verdict", "")))
        named = r.get("label")
        pair = f'<span class="pair">{_esc(str(named))}</span>' if named else ""
        body.append(
            f"<tr><td>{_esc(str(r.get('text', '')))}{pair}</td>"
            f"<td>{_num(r.get('paper_delta'))}</td><td>{_num(r.get('mean'))}</td><td>{ci}</td>"
            f'<td>{_esc(str(r.get("n", "")))}</td><td class="verdict {verdict}">{verdict}{repeat}</td>'
            f"<td>{_p(r.get('p'))}</td><td>{_p(r.get('p_adjusted'))}</td>"
            f'<td class="verdict {corrected}">{corrected}</td>'
            f"<td>{_num(r.get('mdd80'), sign=False)}</td></tr>"
        )
    test = _esc(analysis.test) if analysis is not None else "Student-t 95% interval"
    described = _esc(analysis.described) if analysis is not None else "no correction"
    note = (
        "<p>Each row names the two cells it compares (better &gt; worse, as the paper has them) and the "
        "score. Measured &Delta;: mean of per-seed paired differences (better &minus; worse, same seed on "
        f"both sides); interval: {test}; p adj. and the second verdict: {described}"
        f"{'; ' + _esc(outcome_note(analysis)) if analysis is not None else ''}; MDD: smallest true "
        "difference the test detects with 80% power at this many seeds and spread.</p>"
    )
    return (
        f'<div class="scroll"><table class="results claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _interval(low: Any, high: Any, n: Any) -> str:
    """``[low, high]``; an end written as null beside paired seeds is unbounded (a confidence
    sequence at its first seeds)."""
    if not isinstance(low, int | float) and not isinstance(high, int | float):
        return "&ndash;" if not (isinstance(n, int) and n > 1) else "[&minus;&infin;, +&infin;]"
    left = _num(low) if isinstance(low, int | float) else "&minus;&infin;"
    right = _num(high) if isinstance(high, int | float) else "+&infin;"
    return f"[{left}, {right}]"


def _p(value: Any) -> str:
    if not isinstance(value, int | float):
        return "&ndash;"
    return "&lt;0.001" if value < 0.001 else f"{value:.3f}"


def captions(folder: Path) -> dict[str, str]:
    """The captions a reporter wrote beside its figures (empty when there are none)."""
    try:
        data = json.loads((folder / CAPTIONS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def claims_html(claims_dir: Path, correction: Analysis | None = None) -> str:
    """The claims and one forest plot per table (``claims_forest_<spec>.png``, with its caption).

    The claims: ``claims.json`` of ``harness claims`` as a table (corrected again under
    ``correction`` when given); else ``claims.md`` (shown as text), else another ``claims.json``
    (pretty-printed), else "no claims computed".
    """
    body = _claims_body(claims_dir, correction)
    written = captions(claims_dir)
    for forest in sorted(claims_dir.glob(f"{FOREST_STEM}*.png")):
        caption = written.get(forest.stem, f"forest plot of {forest.stem.removeprefix(FOREST_STEM)}")
        body += "\n" + _figure(forest, caption)
    return body


def _claims_body(claims_dir: Path, correction: Analysis | None = None) -> str:
    md = claims_dir / "claims.md"
    js = claims_dir / "claims.json"
    if js.is_file():
        try:
            table = _claims_table(json.loads(js.read_text(encoding="utf-8")), correction)
        except json.JSONDecodeError:
            table = None
        if table is not None:
            return table
    if md.is_file():
        return f'<pre class="claims">{_esc(md.read_text(encoding="utf-8"))}</pre>'
    if js.is_file():
        try:
            text = json.dumps(json.loads(js.read_text(encoding="utf-8")), indent=2, sort_keys=True)
        except json.JSONDecodeError:
            text = js.read_text(encoding="utf-8")
        return f'<pre class="claims">{_esc(text)}</pre>'
    return f'<p class="no-claims">{NO_CLAIMS}</p>'


def _figure(path: Path, caption: str, cls: str = "") -> str:
    """One image embedded (PNG as base64 at its natural width, SVG inline) with its caption."""
    if path.suffix.lower() == ".png":
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        width = css_width(path)
        size = f' width="{width}"' if width else ""
        body = f'<img alt="{_esc(caption)}"{size} src="data:image/png;base64,{data}">'
    else:
        body = _svg_inline(path.read_text(encoding="utf-8"))
    attr = f' class="{cls}"' if cls else ""
    return f"<figure{attr}>{body}<figcaption>{_esc(caption)}</figcaption></figure>"


def plot_files(plots_dir: Path) -> list[Path]:
    """The PNG and SVG images under ``plots_dir`` (recursively), sorted; PDFs are skipped."""
    if not plots_dir.is_dir():
        return []
    return sorted(p for p in plots_dir.rglob("*") if p.suffix.lower() in (".png", ".svg") and p.is_file())


def _svg_inline(text: str) -> str:
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def plots_html(plots_dir: Path) -> str:
    """Every plot, embedded (PNG as base64, SVG inline); a line saying so when there is none."""
    files = plot_files(plots_dir)
    if not files:
        return '<p class="no-plots">No plots.</p>'
    written = captions(plots_dir)
    return "\n".join(_figure(path, written.get(path.stem, path.stem)) for path in files)


# -- the page -------------------------------------------------------------------------------------
def render_report(
    tables: Sequence[RenderedTable],
    records: Sequence[Mapping[str, Any]],
    *,
    claims_dir: Path,
    plots_dir: Path,
    profile: str,
    correction: Analysis | None = None,
) -> str:
    """The whole report as one HTML string (no external references); ``correction``: the claims'
    correction (method and family) when not the one ``claims.json`` was written with."""
    toc = "".join(f'<li><a href="#table-{_esc(t.name)}">{_esc(t.title)}</a></li>' for t in tables)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>cse-harness report ({_esc(profile)})</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>cse-harness report</h1>",
        f'<p class="meta">Profile <code>{_esc(profile)}</code>; {plural(len(tables), "table")} from '
        f"{plural(len(records), 'run record')}. "
        "Generated by <code>harness report</code> from run records only.</p>",
        f'<nav><ul>{toc}<li><a href="#claims">Claims</a></li><li><a href="#plots">Plots</a></li>'
        '<li><a href="#provenance">Provenance</a></li></ul></nav>',
        '<h2 id="tables">Tables</h2>',
        *(table_html(t) for t in tables),
        '<h2 id="claims">Claims</h2>',
        claims_html(claims_dir, correction),
        '<h2 id="plots">Plots</h2>',
        plots_html(plots_dir),
        '<h2 id="provenance">Provenance</h2>',
        provenance_html(records),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_report(text: str, out: Path) -> Path:
    """Write the report to ``out`` atomically (folders created); return the path."""
    return write_text(out, text)
