"""One self-contained HTML report: every table, the claims, the plots and each run's provenance.

The page fits any window from 1,280 px: a table wider than the window scrolls inside its own box,
its label column and its average column staying in view (sticky); provenance lists every key once
per distinct value, with the runs that share it.

The page has no external reference: CSS is inline, PNG plots are embedded as base64 ``data:`` URIs
and SVG plots inline. Its inputs are the rendered tables (themselves built from run records only),
``results/claims/`` (``claims.md``, else ``claims.json``; "no claims computed" when neither exists),
the images under ``results/plots`` and the run records for the provenance section.

Nothing here writes files except :func:`write_report`.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import write_text
from harness.reporting.correction import Analysis, correct_json_rows
from harness.reporting.tables.model import OURS_MARK, Line, RenderedTable, Text

NO_CLAIMS = "No claims computed."
PROVENANCE_KEYS: tuple[str, ...] = ("code_version", "host", "config")
"""Record keys shown for every run besides every key of ``record["provenance"]``."""

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
table.results.avg th:last-child, table.results.avg td:last-child { position: sticky; right: 0; z-index: 1;
       border-left: 1px solid #ddd; }
table.results thead th { border-top: 2px solid #222; border-bottom: 1px solid #222; }
table.results tbody tr:last-child td { border-bottom: 2px solid #222; }
table.results tr.rule td { border-top: 1px solid #888; padding: 0; }
table.results tr.measured td { color: #0b4f8a; } table.results tr.measured td:first-child { padding-left: 2em;
       font-style: italic; }
table.results tr.header td { font-style: italic; border-bottom: 1px solid #aaa; }
td.best { font-weight: 700; } td.second::first-line { text-decoration: underline; }
.n { display: block; font-size: .75em; color: #666; font-weight: 400; }
table.claims td:nth-child(2), table.claims th:nth-child(2) { white-space: normal; min-width: 16em;
       text-align: left; }
table.claims th { white-space: normal; }
td.verdict.holds { color: #1b7837; } td.verdict.reversed { color: #b2182b; }
ul.notes { font-size: .85em; color: #444; max-width: 60em; }
figure { display: inline-block; vertical-align: top; margin: .5em 1em 1em 0; max-width: 100%; }
figure img, figure svg { display: block; max-width: min(100%, 46em); height: auto; border: 1px solid #eee; }
figure.wide img { max-width: min(100%, 60em); }
figcaption { font-size: .85em; color: #555; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; white-space: pre-wrap; }
table.prov { border-collapse: collapse; font-size: .85em; margin-bottom: 1em; }
table.prov th, table.prov td { border: 1px solid #ddd; padding: .2em .5em; vertical-align: top;
       text-align: left; }
table.prov td:first-child { font-weight: 600; white-space: nowrap; }
table.prov pre { margin: 0; max-height: 24em; overflow: auto; }
details { margin: .4em 0; } summary { cursor: pointer; }
.status-finished { color: #137333; } .status-failed { color: #b3261e; }
"""


def plural(count: int, word: str) -> str:
    """``1 table``, ``2 tables``, ``0 run records``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _note(text: str) -> str:
    """A note escaped, with its `code` spans as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _esc(text))


# -- tables ---------------------------------------------------------------------------------------
def _cell(cell: Text) -> str:
    cls = f' class="{cell.style}"' if cell.style else ""
    seeds = f' <span class="n">(n = {cell.seeds})</span>' if cell.seeds > 1 else ""
    return f"<td{cls}>{_esc(cell.text)}{seeds}</td>"


def _label(line: Line) -> str:
    label = _esc(line.label)
    if line.ours:
        label = f"{OURS_MARK} {label}"
    return label + _esc(line.marks)


def _table_class(table: RenderedTable) -> str:
    """``results``, plus ``avg`` when the last column is the average: it then stays in view (sticky)
    however far the table scrolls, as the label column does on the left."""
    return "results avg" if table.header and table.header[-1].lower().startswith("avg") else "results"


def table_html(table: RenderedTable) -> str:
    """One table: paper lines with their labels, the measured line below each, then the notes."""
    ncols = len(table.header)
    out = [
        f'<section class="table" id="table-{_esc(table.name)}">',
        f"<h3>{_esc(table.title)}</h3>",
        f'<p class="meta">{_esc(table.cites)}; profile <code>{_esc(table.profile)}</code>; '
        f"spec <code>{_esc(table.spec_path)}</code></p>",
        f'<div class="scroll"><table class="{_table_class(table)}"><thead><tr>',
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
        return Analysis(
            correction=written.get("correction", "none"),
            family=written.get("family", "table"),
            sequential=written.get("test") == "sequential",
            **({"mixture_c": float(written["mixture_c"])} if written.get("mixture_c") else {}),
        )
    except (ValueError, TypeError):
        return None


def _claims_table(data: Any, correction: Analysis | None = None) -> str | None:
    """``claims.json`` as written by ``harness claims``, as an HTML table (None for another shape).

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
        sequential = analysis is not None and analysis.sequential
        analysis = Analysis(correction.correction, correction.family, sequential)
        rows = correct_json_rows(rows, analysis)
    label = analysis.label if analysis is not None else "none"

    def num(value: Any, sign: bool = True) -> str:
        return (
            "&ndash;" if not isinstance(value, int | float) else (f"{value:+.2f}" if sign else f"{value:.2f}")
        )

    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "table",
            "claim",
            "paper &Delta;",
            "measured &Delta;",
            analysis.interval if analysis is not None else "95% CI",
            "seeds",
            "verdict",
            "p",
            f"p adj. ({_esc(label)})",
            f"verdict ({_esc(label)})",
            "MDD (80%)",
        )
    )
    body = []
    for r in rows:
        low, high = (r.get("ci95") or [None, None])[:2]
        ci = f"[{num(low)}, {num(high)}]" if isinstance(low, int | float) else "&ndash;"
        verdict = _esc(str(r.get("verdict", "")))
        repeat = (
            f' <span title="same runs as {_esc(str(r["same_as"]))}">(repeat)</span>'
            if r.get("same_as")
            else ""
        )
        corrected = _esc(str(r.get("verdict_corrected", r.get("verdict", ""))))
        body.append(
            f"<tr><td>{_esc(str(r.get('spec', '')))}</td><td>{_esc(str(r.get('text', '')))}</td>"
            f"<td>{num(r.get('paper_delta'))}</td><td>{num(r.get('mean'))}</td><td>{ci}</td>"
            f'<td>{_esc(str(r.get("n", "")))}</td><td class="verdict {verdict}">{verdict}{repeat}</td>'
            f"<td>{_p(r.get('p'))}</td><td>{_p(r.get('p_adjusted'))}</td>"
            f'<td class="verdict {corrected}">{corrected}</td>'
            f"<td>{num(r.get('mdd80'), sign=False)}</td></tr>"
        )
    test = _esc(analysis.test) if analysis is not None else "Student-t 95% interval"
    described = _esc(analysis.described) if analysis is not None else "no correction"
    note = (
        "<p>Measured &Delta;: mean of per-seed paired differences (better &minus; worse, same seed on both "
        f"sides); interval: {test}; p adj. and the second verdict: {described}; MDD: smallest true "
        "difference the test detects with 80% power at this many seeds and spread.</p>"
    )
    return (
        f'<div class="scroll"><table class="results claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{note}"
    )


def _p(value: Any) -> str:
    if not isinstance(value, int | float):
        return "&ndash;"
    return "&lt;0.001" if value < 0.001 else f"{value:.3f}"


FOREST_PLOT = "claims_forest.png"
"""The forest plot ``harness claims`` draws beside claims.json."""


def claims_html(claims_dir: Path, correction: Analysis | None = None) -> str:
    """The claims and their forest plot (``claims_forest.png`` when there is one).

    The claims: ``claims.json`` of ``harness claims`` as a table (corrected again under
    ``correction`` when given); else ``claims.md`` (shown as text), else another ``claims.json``
    (pretty-printed), else "no claims computed".
    """
    body = _claims_body(claims_dir, correction)
    forest = claims_dir / FOREST_PLOT
    if forest.is_file():
        body += "\n" + _figure(
            forest, "claims forest plot: measured interval and mean per claim, paper delta", "wide"
        )
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
    """One image embedded (PNG as base64, SVG inline) with its caption."""
    if path.suffix.lower() == ".png":
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        body = f'<img alt="{_esc(caption)}" src="data:image/png;base64,{data}">'
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
        return f'<p class="no-plots">No plots under {_esc(plots_dir)}.</p>'
    return "\n".join(_figure(path, str(path.relative_to(plots_dir))) for path in files)


def _value(value: Any) -> str:
    if isinstance(value, Mapping | list):
        return f"<pre>{_esc(json.dumps(value, indent=2, sort_keys=True, default=str))}</pre>"
    return _esc(value)


def _provenance_items(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's provenance block, its code_version and host (each once: the block's own are the
    record's) and every setting of its config as ``config.<name>``."""
    items: dict[str, Any] = {}
    provenance = record.get("provenance")
    if isinstance(provenance, Mapping):
        items.update(provenance)
    for key in PROVENANCE_KEYS:
        if key == "config" and isinstance(record.get(key), Mapping):  # one row per setting
            items.update((f"config.{k}", v) for k, v in record[key].items())
        elif key in record and record[key] != items.get(key, record[key]):
            items[f"record {key}"] = record[key]  # differs from the block's: both shown
        elif key in record:
            items[key] = record[key]
    return items


def _runs_text(ids: Sequence[str], total: int) -> str:
    if len(ids) == total:
        return f"all {plural(total, 'run')}" if total > 1 else f"<code>{_esc(ids[0])}</code>"
    return ", ".join(f'<a href="#run-{_esc(i)}"><code>{_esc(i)}</code></a>' for i in ids)


def provenance_html(records: Sequence[Mapping[str, Any]]) -> str:
    """Every run with its status, then every provenance key once per distinct value, with the runs
    that share it (``record["provenance"]`` and code_version, host, config)."""
    if not records:
        return "<p>No run records.</p>"
    ordered = sorted(records, key=lambda r: str(r.get("run_id")))
    runs = "".join(
        f'<tr id="run-{_esc(r.get("run_id"))}"><td><code>{_esc(r.get("run_id"))}</code></td>'
        f'<td class="status-{_esc(r.get("status"))}">{_esc(r.get("status"))}</td></tr>'
        for r in ordered
    )
    values: dict[str, dict[str, tuple[Any, list[str]]]] = {}
    for record in ordered:
        for key, value in _provenance_items(record).items():
            text = json.dumps(value, sort_keys=True, default=str)
            values.setdefault(key, {}).setdefault(text, (value, []))[1].append(str(record.get("run_id")))
    rows = []
    for key in sorted(values, key=lambda k: (k.startswith("config."), k)):  # the settings last
        for value, ids in values[key].values():
            shared = _runs_text(ids, len(ordered))
            rows.append(f"<tr><td>{_esc(key)}</td><td>{_value(value)}</td><td>{shared}</td></tr>")
    return (
        '<table class="prov runs"><thead><tr><th>run</th><th>status</th></tr></thead>'
        f"<tbody>{runs}</tbody></table>"
        '<table class="prov"><thead><tr><th>key</th><th>value</th><th>runs</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


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
