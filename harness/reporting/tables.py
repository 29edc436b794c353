"""Table reporter: run records + table specs -> booktabs LaTeX and a combined Markdown preview.

Layout, for every table:

* a run row shows the measured numbers on its own line and the paper's numbers on a line below it
  (``paper``), so paper and measured sit side by side;
* a quoted row (a method outside this harness) shows the paper's numbers, marked with a dagger;
* a row that runs under another profile only (BERT-large, RoBERTa, SBERT-large) is shown like a quoted
  row, marked with a double dagger;
* several finished seeds give ``mean ± std`` (sample standard deviation); a cell without a finished
  run shows ``--``; a cell whose parameters do not suit the profile's encoder shows ``n/a (d=384)``
  and a note gives the reason;
* per column and per section, the best measured value is bold and the second underlined, and the
  paper's numbers are ranked the same way among themselves (as the papers print them);
* notes under the table state the profile (encoder, corpus, budget), the seeds and, for every run
  row, the method parameters and readings that produced it;
* in LaTeX, a table prints for a two-column paper without shrinking its type: one column when its
  estimated width allows, else the full width (``table*``), at small or footnotesize type; a
  measured mean ± sd prints its sd on a row below the mean, and the notes are in the table's size.

Nothing here writes files except :func:`write_tables`.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.atomic import write_text
from harness.evaluation.tasks import year_task_names
from harness.grid import Cell, expand
from harness.record import record_metric
from harness.specs import Row, RunSpec, Sweep, TableSpec, format_value, sweep_cell_key

if TYPE_CHECKING:
    from harness.config import RunConfig, RunSettings
    from harness.store import RunStore

Style = Literal["", "best", "second"]
LineKind = Literal["header", "measured", "paper", "quoted", "rule"]

MISSING = "--"
QUOTED_MARK = "\u2020"  # dagger
PROFILE_MARK = "\u2021"  # double dagger
OURS_MARK = "*"
RUNS_NOTE = "Runs: "
"""How the last note, the method parameters of every run row, starts."""


@dataclass
class Text:
    """One cell of a rendered line: text plus a rank style."""

    text: str
    style: Style = ""
    value: float | None = None
    seeds: int = 1
    """Finished seeds behind the number (the renderers print ``n = seeds`` when above one)."""


@dataclass
class Line:
    """One line of a rendered table."""

    kind: LineKind
    label: str = ""
    cells: list[Text] = field(default_factory=list)
    marks: str = ""
    ours: bool = False


@dataclass
class RenderedTable:
    """A table ready to print as LaTeX or Markdown."""

    name: str
    cites: str
    title: str
    profile: str
    spec_path: str
    header: list[str]
    lines: list[Line]
    notes: list[str]
    comments: list[str]


# -- measured values ----------------------------------------------------------------------------------
AGGREGATE_TEXT: dict[str, str] = {
    "all": "one Spearman over all subsets' pairs together",
    "mean": "unweighted mean of the subsets' Spearman",
    "wmean": "mean of the subsets' Spearman weighted by subset size",
}


_metric = record_metric


def format_mean_std(values: Sequence[float]) -> str:
    """``76.25`` for one value, ``76.25 ± 0.31`` (sample std) for several."""
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} \u00b1 {statistics.stdev(values):.2f}"


def _measured(
    cell: Cell | None,
    records: Mapping[str, list[Mapping[str, Any]]],
    scores: str,
    column: str,
    aggregate: str = "all",
) -> Text:
    if cell is None or cell.state == "profile":
        return Text(MISSING)
    if cell.state == "n/a":
        return Text(f"n/a (d={cell.hidden_size})")
    values = [
        v
        for r in records.get(cell.group_id or "", [])
        if (v := _metric(r, scores, column, aggregate)) is not None
    ]
    if not values:
        return Text(MISSING)
    mean = statistics.fmean(values)
    return Text(format_mean_std(values), value=round(mean, 2), seeds=len(values))


def _paper(values: Sequence[float]) -> list[Text]:
    return [Text(f"{v:.2f}", value=round(v, 2)) for v in values]


def _rank(cells: Sequence[Text]) -> None:
    """Bold the best value(s), underline the second (higher is better), in place.

    Ranks count ties the competition way: two values tied for best are both bold and nothing is
    underlined.
    """
    values = [c.value for c in cells if c.value is not None]
    for c in cells:
        if c.value is None:
            continue
        rank = 1 + sum(v > c.value for v in values)
        c.style = "best" if rank == 1 else "second" if rank == 2 else ""


def _rank_block(lines: Sequence[Line], kinds: tuple[LineKind, ...], by_column: bool) -> None:
    chosen = [ln for ln in lines if ln.kind in kinds]
    if not chosen:
        return
    if by_column:
        for j in range(len(chosen[0].cells)):
            _rank([ln.cells[j] for ln in chosen if j < len(ln.cells)])
    else:
        _rank([c for ln in chosen for c in ln.cells])


ENCODER_NAMES: dict[str, str] = {
    "minilm": "all-MiniLM-L6-v2",
    "bert-base-uncased": "BERT-base",
    "random:tiny": "random tiny encoder",
}
"""Display names of the profiles' encoders (others show the last part of their name or path)."""


def encoder_name(model: str) -> str:
    """A short display name for a ``config.model`` value."""
    return ENCODER_NAMES.get(model, model.rstrip("/").rsplit("/", 1)[-1] or model)


def measured_label(cell: Cell | None, records: Mapping[str, list[Mapping[str, Any]]], profile: str) -> str:
    """``measured: <encoder> (<profile>)``, the encoder taken from the records' ``config.model``."""
    models = sorted(
        {
            str(m)
            for r in records.get((cell.group_id if cell else None) or "", [])
            if (m := (r.get("config") or {}).get("model"))
        }
    )
    if not models and cell is not None and cell.configs:
        models = [cell.configs[0].model]
    names = ", ".join(encoder_name(m) for m in models) or "no run"
    return f"measured: {names} ({profile})"


# -- building --------------------------------------------------------------------------------------
def index_records(store: RunStore) -> dict[str, list[Mapping[str, Any]]]:
    """Finished records by group id (all seeds of one configuration together)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for record in store.records():
        if record.get("status") == "finished":
            out.setdefault(str(record.get("group_id")), []).append(record)
    return out


def _row_lines(
    spec: TableSpec,
    row: Row,
    cell: Cell | None,
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
) -> list[Line]:
    if row.run is None:
        return [Line("quoted", row.label, _paper(row.paper), QUOTED_MARK, row.ours)]
    if cell is None or cell.state == "profile":
        return [Line("quoted", row.label, _paper(row.paper), PROFILE_MARK, row.ours)]
    measured = [_measured(cell, records, spec.scores, c, spec.sts_aggregate) for c in spec.columns]
    return [
        Line("paper", row.label, _paper(row.paper), "", row.ours),
        Line("measured", measured_label(cell, records, profile), measured),
    ]


def _sweep_lines(
    spec: TableSpec,
    sweep: Sweep,
    cells: Mapping[str, Cell],
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
) -> list[Line]:
    column = spec.columns[0]
    keyed = [cells.get(sweep_cell_key(sweep, v)) for v in sweep.values]
    measured = [_measured(c, records, spec.scores, column, spec.sts_aggregate) for c in keyed]
    first = next((c for c in keyed if c is not None and c.state == "run"), None)
    return [
        Line("paper", sweep.label, _paper(sweep.paper), "", sweep.ours),
        Line("measured", measured_label(first, records, profile), measured),
    ]


def _sections(rows: Sequence[Row]) -> list[list[Row]]:
    out: list[list[Row]] = []
    current: str | None = None
    for row in rows:
        if current is None or row.section != current:
            out.append([])
            current = row.section
        out[-1].append(row)
    return out


def _describe_run(config: RunConfig, run: RunSpec) -> str:
    """The spec's parameters plus every paper-vs-released-code switch the method declares."""
    shown = dict(run.params)
    values = config.params.to_dict()
    for key in config.params.switches():
        shown[key] = values[key]
    params = ", ".join(f"{k}={format_value(v)}" for k, v in sorted(shown.items()))
    text = f"{config.method}({params})"
    overrides = run.overrides_for(config.profile)
    if overrides:
        text += " with " + ", ".join(f"{k}={format_value(v)}" for k, v in sorted(overrides.items()))
    return text


def _profile_note(config: RunSettings, seeds: int) -> str:
    steps = "one epoch" if config.max_steps is None else f"{config.max_steps} steps"
    return (
        f"Measured under profile {config.profile}: model {config.model}, corpus {config.corpus_id}, "
        f"batch {config.batch_size}, max length {config.max_length}, {steps}, lr {format_value(config.lr)}, "
        f"STS-B dev every {config.eval_every} steps, transfer {config.transfer_mode}; "
        f"finished seeds per cell: {f'up to {seeds}' if seeds else 'none yet'}."
    )


def build_table(
    spec: TableSpec,
    cells: Sequence[Cell],
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
    reference: RunSettings | None,
) -> RenderedTable:
    """Lay out one table from its resolved cells and the finished records by group id."""
    by_key = {c.key: c for c in cells if c.spec == spec.name}
    if spec.rows:
        header, lines = _row_layout(spec, by_key, records, profile)
    else:
        header, lines = _sweep_layout(spec, by_key, records, profile)
    notes = _table_notes(spec, by_key, records, profile, reference, lines)
    described = _described_runs(spec, by_key)
    return RenderedTable(
        name=spec.name,
        cites=spec.cites,
        title=spec.title,
        profile=profile,
        spec_path=f"tables/{spec.path.name}",
        header=header,
        lines=lines,
        notes=notes + ([f"{RUNS_NOTE}{'; '.join(described)}."] if described else []),
        comments=_run_comments(spec, by_key),
    )


def _row_layout(
    spec: TableSpec,
    by_key: Mapping[str, Cell],
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
) -> tuple[list[str], list[Line]]:
    """A rows table: header and lines, ranked per column within each section."""
    lines: list[Line] = []
    for i, section in enumerate(_sections(spec.rows)):
        if i:
            lines.append(Line("rule"))
        block: list[Line] = []
        for row in section:
            block.extend(_row_lines(spec, row, by_key.get(row.label), records, profile))
        _rank_block(block, ("measured",), by_column=True)
        _rank_block(block, ("paper", "quoted"), by_column=True)
        lines.extend(block)
    return ["Model", *spec.column_labels], lines


def _sweep_layout(
    spec: TableSpec,
    by_key: Mapping[str, Cell],
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
) -> tuple[list[str], list[Line]]:
    """A sweeps table: header and lines; a sweep over other values starts a section with its own
    header line; each section is ranked as a whole."""
    width = max(len(s.values) for s in spec.sweeps)
    first = spec.sweeps[0]
    header = [first.header, *(format_value(v) for v in first.values)]
    header += [""] * (width + 1 - len(header))
    lines: list[Line] = []
    block: list[Line] = []
    previous = (first.header, first.values)
    for sweep in spec.sweeps:
        head = (sweep.header, sweep.values)
        if head != previous:
            _rank_block(block, ("measured",), by_column=False)
            _rank_block(block, ("paper",), by_column=False)
            lines.append(Line("rule"))
            lines.append(Line("header", sweep.header, [Text(format_value(v)) for v in sweep.values]))
            block = []
            previous = head
        new = _sweep_lines(spec, sweep, by_key, records, profile)
        block.extend(new)
        lines.extend(new)
    _rank_block(block, ("measured",), by_column=False)
    _rank_block(block, ("paper",), by_column=False)
    return header, lines


def _table_notes(
    spec: TableSpec,
    by_key: Mapping[str, Cell],
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
    reference: RunSettings | None,
    lines: Sequence[Line],
) -> list[str]:
    """The notes under a table: profile, how to read it, marks used, then the spec's own notes."""
    notes: list[str] = []
    seeds = sorted(
        {len(records.get(c.group_id or "", [])) for c in by_key.values() if c.state == "run"} - {0}
    )
    if reference is not None:
        notes.append(_profile_note(reference, max(seeds) if seeds else 0))
    scope = "per column and section" if spec.rows else "per section"
    notes.append(
        f"Labelled lines: the numbers {spec.cites} reports; 'measured' lines: this harness, with the "
        "encoder and profile they ran on. Bold = best, underlined = second, ranked separately among "
        f"measured numbers and among paper numbers, {scope}."
    )
    if len(seeds) and max(seeds) > 1:
        notes.append(
            "Cells with several finished seeds show mean \u00b1 sample standard deviation over n seeds."
        )
    if spec.scores == "sts" and any(c in year_task_names() or c == "avg" for c in spec.columns):
        notes.append(
            f"Measured STS12-16: SentEval's '{spec.sts_aggregate}' aggregate "
            f"({AGGREGATE_TEXT[spec.sts_aggregate]})."
        )
    notes.extend(_mark_notes(spec, by_key, profile, lines))
    notes.extend(spec.notes)
    notes.extend(f"{row.label}: {row.note}." for row in spec.rows if row.note)
    return notes


def _mark_notes(
    spec: TableSpec, by_key: Mapping[str, Cell], profile: str, lines: Sequence[Line]
) -> list[str]:
    """One note per mark the table uses (dagger, double dagger, ours, missing, n/a)."""
    notes: list[str] = []
    if any(ln.marks == QUOTED_MARK for ln in lines):
        notes.append(f"{QUOTED_MARK} quoted from the paper: outside this harness, not run.")
    if any(ln.marks == PROFILE_MARK for ln in lines):
        reasons = sorted({c.reason for c in by_key.values() if c.state == "profile"})
        notes.append(
            f"{PROFILE_MARK} not run under profile {profile} ({'; '.join(reasons)}): paper numbers shown."
        )
    if any(ln.ours for ln in lines):
        notes.append(f"{OURS_MARK} the paper's own method.")
    if any(c.text == MISSING for ln in lines if ln.kind == "measured" for c in ln.cells):
        notes.append(f"{MISSING} no finished run yet (run `harness grid {spec.name} --profile {profile}`).")
    for reason in sorted({c.reason for c in by_key.values() if c.state == "n/a"}):
        hidden = next(c.hidden_size for c in by_key.values() if c.reason == reason)
        notes.append(f"n/a: not valid for this profile's encoder (d = {hidden}): {reason}.")
    return notes


def _run_comments(spec: TableSpec, by_key: Mapping[str, Cell]) -> list[str]:
    """``run settings: <cell>: <method(params) with overrides>`` for every cell that resolved."""
    comments: list[str] = []
    for key, run in spec.run_cells():
        cell = by_key.get(key)
        if cell is not None and cell.configs:
            comments.append(f"run settings: {key}: {_describe_run(cell.configs[0], run)}")
    return comments


def _described_runs(spec: TableSpec, by_key: Mapping[str, Cell]) -> list[str]:
    """What each run row and sweep ran (the table's last note, "Runs: ...")."""
    described: list[str] = []
    for row in spec.rows:
        row_cell = by_key.get(row.label)
        if row.run is not None and row_cell is not None and row_cell.configs:
            described.append(f"{row.label}: {_describe_run(row_cell.configs[0], row.run)}")
    for sweep in spec.sweeps:
        done = [by_key[k] for v in sweep.values if (k := sweep_cell_key(sweep, v)) in by_key]
        first_cell = next((c for c in done if c.configs), None)
        if first_cell is not None:
            text = _describe_run(first_cell.configs[0], sweep.run)
            described.append(f"{sweep.label} ({sweep.header}): {text}, varying {sweep.vary}")
    return described


def build_tables(
    specs: Sequence[TableSpec],
    store: RunStore,
    profile: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
) -> list[RenderedTable]:
    """Resolve every spec under ``profile`` and lay its tables out from the store's finished records.

    Args:
        specs: validated table specs.
        store: the run store to read records from (never written).
        profile: the profile whose runs to show.
        overrides: the same command-line overrides the grid ran with (they are part of run ids).
        data_root: data root passed to :func:`~harness.config.resolve_settings`.
    """
    plan = expand(specs, profile, seeds=1, overrides=overrides, data_root=data_root)
    records = index_records(store)
    return [build_table(spec, plan.cells, records, profile, plan.settings) for spec in specs]


# -- LaTeX ----------------------------------------------------------------------------------------
_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\u00b1": r"$\pm$",
    "\u2020": r"$\dagger$",
    "\u2021": r"$\ddagger$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (and write ±, dagger, double dagger as math)."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


_CODE = re.compile(r"`([^`]+)`")
_TYPOGRAPHY = re.compile(
    r"(?P<tau>\btau_DCL\b)|(?P<lam>\blambda\b)|(?P<times>\bx ?100\b)"
    r"|(?P<dashes>--+(?=[A-Za-z]))|(?P<quote>(?<![\w`])'(?=\w))"
)
_TYPOGRAPHY_LATEX = {
    "tau": r"$\tau_{\mathrm{DCL}}$",
    "lam": r"$\lambda$",
    "times": r"$\times 100$",
    "quote": "`",
}


def _latex_plain(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _TYPOGRAPHY.finditer(text):
        out.append(latex_escape(text[pos : m.start()]))
        kind = m.lastgroup or ""
        out.append("-{}" * len(m.group()) if kind == "dashes" else _TYPOGRAPHY_LATEX[kind])
        pos = m.end()
    out.append(latex_escape(text[pos:]))
    return "".join(out)


def latex_text(text: str) -> str:
    """Escape ``text`` for LaTeX and typeset it the way the papers print it.

    ``code`` spans become ``\\texttt`` with dashes kept apart (``--profile`` would otherwise be an
    en dash); an opening quote is a backquote (``'paper'`` -> `` `paper' ``); ``lambda`` and
    ``tau_DCL`` are math; ``x100`` is ``$\\times 100$``.
    """
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_latex_plain(text[pos : m.start()]))
        out.append(r"\texttt{" + latex_escape(m.group(1)).replace("-", "-{}") + "}")
        pos = m.end()
    out.append(_latex_plain(text[pos:]))
    return "".join(out)


LATEX_OURS_MARK = "{*}"
"""The own-method mark in LaTeX, braced: after ``\\\\`` a bare ``*`` would be read as ``\\\\*``."""

COLUMN_PT = 219.0
"""One column of a two-column paper, in pt, a little under article's 229.5 (ACL's is 219.1)."""
TEXT_PT = 455.0
"""The full text width of a two-column paper, in pt, a little under article's 469 (ACL's is 455.2)."""
FLOAT_PT = 500.0
"""The most height a table's float may take (article's text height is 592 pt, ACL's 666 pt)."""
MIN_SCALE = 0.875
"""The most a table is shrunk to fit: 8 pt footnotesize type prints at 7 pt or more."""

_EM = {"digit": 0.52, "lower": 0.51, "upper": 0.74, "space": 0.34, "narrow": 0.3, "sign": 0.78}
"""Widths of Computer Modern glyphs in em, slightly generous, for estimating a table's width."""


def _char_em(ch: str) -> float:
    if ch.isdigit():
        return _EM["digit"]
    if ch.isupper():
        return _EM["upper"]
    if ch.isalpha():
        return _EM["lower"]
    if ch == " ":
        return _EM["space"]
    if ch in ".,:;()[]-'`!|/":
        return _EM["narrow"]
    return _EM["sign"]


def text_em(text: str, bold: bool = False) -> float:
    """Estimated width of ``text`` in em (Computer Modern, upright or italic; bold 20 % wider)."""
    width = sum(_char_em(ch) for ch in text)
    return width * 1.2 if bold else width


@dataclass(frozen=True)
class LatexLayout:
    """How one table is set: one column or the full text width, at which size and column padding."""

    wide: bool
    size: str
    tabcolsep_pt: float
    measured_label: str | None
    """The measured lines' label when all of them share it (they then print ``measured`` and a note
    names encoder and profile once); None when they differ."""
    seeds: int | None
    """The seed count of every measured number with a spread, when they all share it (a note says it
    once); None when they differ (each cell then says its own)."""
    runs_note: bool = True
    """False for a table too tall for a page with its "Runs: ..." note: the note is left to the
    ``% run settings`` comments above the float (the Markdown preview keeps it)."""


_SIZES = (("small", 9.0), ("footnotesize", 8.0))


def _split_cell(cell: Text, seeds: int | None) -> tuple[str, str]:
    """A measured cell as LaTeX prints it: the mean, and below it ``±sd`` (with ``(k)`` seeds when
    the table's cells differ in seed count); ``""`` for the second part without a spread."""
    mean, _, sd = cell.text.partition(" \u00b1 ")
    if not sd:
        return mean, ""
    return mean, f"\u00b1{sd}" + (f" ({cell.seeds})" if seeds is None and cell.seeds > 1 else "")


def _column_ems(table: RenderedTable, layout_seeds: int | None, short_label: bool) -> list[float]:
    """Estimated natural width of every column, in em of the table's font."""
    widths = [text_em(h) for h in table.header]
    widths += [0.0] * (len(table.header) - len(widths))
    for line in table.lines:
        if line.kind == "rule":
            continue
        label = "measured" if line.kind == "measured" and short_label else line.label
        texts = [(label + line.marks, False)]
        texts += [(max(_split_cell(c, layout_seeds), key=len), c.style == "best") for c in line.cells]
        for j, (text, bold) in enumerate(texts[: len(widths)]):
            extra = 1.0 if j == 0 and line.kind == "measured" else 0.0  # the \quad
            widths[j] = max(widths[j], text_em(text, bold) + extra)
    return widths


def _height_pt(table: RenderedTable, pt: float, width: float) -> float:
    """Estimated height of the table and its notes at ``pt`` type, notes wrapped to ``width``."""
    rows = 2 + sum(
        1 + (ln.kind == "measured" and any("\u00b1" in c.text for c in ln.cells)) for ln in table.lines
    )
    note_lines = sum(-(-text_em(n) * pt // width) for n in table.notes) + 3  # + the notes LaTeX adds
    return 1.2 * pt * (1.15 * rows + note_lines) + 40.0  # + rules, skips and the caption


def latex_layout(table: RenderedTable) -> LatexLayout:
    """Choose the float (``table`` or ``table*``), the type size and the column padding.

    The smallest setting that needs no shrinking wins: one column at small type, else the full
    width at small type, else the full width at footnotesize with narrow padding (shrunk, if it is
    still too wide, no further than :data:`MIN_SCALE`).
    """
    labels = {ln.label for ln in table.lines if ln.kind == "measured"}
    short = len(labels) == 1
    spread = {c.seeds for ln in table.lines if ln.kind == "measured" for c in ln.cells if c.seeds > 1}
    seeds = next(iter(spread)) if len(spread) == 1 else None
    ems = _column_ems(table, seeds, short)
    label = next(iter(labels)) if short else None
    for wide, limit in ((False, COLUMN_PT), (True, TEXT_PT)):
        for size, pt in _SIZES:
            sep = 6.0 if size == "small" else 3.5
            if sum(e * pt + 2 * sep for e in ems) <= limit and _height_pt(table, pt, limit) <= FLOAT_PT:
                return LatexLayout(wide, size, sep, label, seeds)
    return LatexLayout(True, "footnotesize", 3.5, label, seeds, runs_note=False)


def _latex_cell(cell: Text, text: str) -> str:
    text = latex_text(text)
    if cell.style == "best":
        return rf"\textbf{{{text}}}"
    if cell.style == "second":
        return rf"\underline{{{text}}}"
    return text


def _latex_label(line: Line, layout: LatexLayout) -> str:
    if line.kind == "measured":
        label = "measured" if layout.measured_label is not None else line.label
        return r"\quad\textit{" + latex_text(label) + "}"
    label = latex_text(line.label)
    if line.ours:
        label = f"{LATEX_OURS_MARK}\\,{label}"
    if line.marks:
        label += latex_escape(line.marks)
    return label


def _latex_notes(table: RenderedTable, layout: LatexLayout) -> list[str]:
    """The table's notes, and what the compact LaTeX cells leave out (encoder, seed counts)."""
    notes = []
    if layout.measured_label is not None:
        notes.append(f"'measured' lines: {layout.measured_label.removeprefix('measured: ')}.")
    if layout.seeds is not None:
        notes.append(f"Every mean \u00b1 sd is over n = {layout.seeds} finished seeds.")
    elif any(c.seeds > 1 for ln in table.lines for c in ln.cells):
        notes.append("(k) after a mean \u00b1 sd: the number of finished seeds behind it.")
    if not layout.runs_note:
        notes.append("Run settings: in the comments of this table's .tex file (too long to print here).")
    return [*notes, *(n for n in table.notes if layout.runs_note or not n.startswith(RUNS_NOTE))]


def _latex_rows(table: RenderedTable, layout: LatexLayout) -> list[str]:
    """The tabular's body; a measured line with a spread takes two rows: means, then ``±sd`` below."""
    ncols = len(table.header)

    def row(cells: list[str], end: str = r" \\") -> str:
        return " & ".join([*cells, *[""] * (ncols - len(cells))]) + end

    out = []
    for line in table.lines:
        if line.kind == "rule":
            out.append(r"\midrule")
        elif line.kind == "header":
            out.append(row([latex_text(line.label), *(latex_text(c.text) for c in line.cells)]))
            out.append(r"\cmidrule(lr){2-" + str(ncols) + "}")
        else:
            parts = [_split_cell(c, layout.seeds) for c in line.cells]
            sds = [sd for _, sd in parts]
            means = [_latex_cell(c, mean) for c, (mean, _) in zip(line.cells, parts, strict=True)]
            out.append(row([_latex_label(line, layout), *means]))
            if any(sds):
                out.append(row(["", *(latex_text(sd) for sd in sds)]))
    return out


def render_latex(table: RenderedTable) -> str:
    """A ``table`` (one column) or ``table*`` (full width) float with a booktabs ``tabular``.

    Needs ``\\usepackage{booktabs}`` and ``\\usepackage{graphicx}``. :func:`latex_layout` picks the
    float and the type size from the table's estimated width; the notes are set in the table's own
    size; a table still wider than the line (another document class) is shrunk to fit.
    """
    layout = latex_layout(table)
    env = "table*" if layout.wide else "table"
    out = [
        "% Generated by `harness tables` from run records; do not edit by hand.",
        f"% spec: {table.spec_path}; cites: {table.cites}; profile: {table.profile}",
        "% needs \\usepackage{booktabs} and \\usepackage{graphicx}",
        *(f"% {c}" for c in table.comments),
        rf"\begin{{{env}}}[t]",
        r"\centering",
        rf"\{layout.size}",
        rf"\setlength{{\tabcolsep}}{{{layout.tabcolsep_pt:g}pt}}",
        rf"\renewcommand{{\arraystretch}}{{{1.15 if layout.runs_note else 0.92}}}",  # crowded: tighter
        "% shrunk to \\linewidth only when its natural width exceeds it",
        r"\setbox0=\hbox{%",
        r"\begin{tabular}{l" + "c" * (len(table.header) - 1) + "}",
        r"\toprule",
        " & ".join(latex_text(h) for h in table.header) + r" \\",
        r"\midrule",
        *_latex_rows(table, layout),
        r"\bottomrule",
        r"\end{tabular}}%",
        r"\leavevmode\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\box0}\else\box0\fi",
        r"\par\smallskip",
        r"\begin{minipage}{\linewidth}\raggedright",
        *(latex_text(n) + r"\par" for n in _latex_notes(table, layout)),
        r"\end{minipage}",
        rf"\caption{{{latex_text(table.title)} ({latex_text(table.cites)}; "
        rf"profile {latex_text(table.profile)}).}}",
        rf"\label{{tab:{table.name}}}",
        rf"\end{{{env}}}",
    ]
    return "\n".join(out) + "\n"


# -- Markdown -------------------------------------------------------------------------------------
def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def _md_cell(cell: Text) -> str:
    text = _md_escape(cell.text) + (f" (n = {cell.seeds})" if cell.seeds > 1 else "")
    if cell.style == "best":
        return f"**{text}**"
    if cell.style == "second":
        return f"<u>{text}</u>"
    return text


def render_markdown(table: RenderedTable) -> str:
    """One table as a Markdown section (bold = best, underlined = second)."""
    ncols = len(table.header)
    out = [
        f"## {table.title}",
        "",
        f"{table.cites}; profile `{table.profile}`; spec `{table.spec_path}`.",
        "",
        "| " + " | ".join(_md_escape(h) for h in table.header) + " |",
        "|" + "---|" * ncols,
    ]
    for line in table.lines:
        if line.kind == "rule":
            continue
        if line.kind == "header":
            cells = [f"*{_md_escape(line.label)}*", *(f"*{_md_escape(c.text)}*" for c in line.cells)]
        else:
            if line.kind == "measured":
                label = f"&nbsp;&nbsp;_{_md_escape(line.label)}_"
            else:
                label = (
                    (f"{OURS_MARK} " if line.ours else "").replace("*", "\\*")
                    + _md_escape(line.label)
                    + line.marks
                )
            cells = [label, *(_md_cell(c) for c in line.cells)]
        cells += [""] * (ncols - len(cells))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.extend(f"- {n}" for n in table.notes)
    return "\n".join(out) + "\n"


def render_markdown_preview(tables: Sequence[RenderedTable]) -> str:
    """Every table in one Markdown document."""
    head = [
        "# Tables (preview)",
        "",
        "Generated by `harness tables` from run records; the .tex files beside it hold the same numbers.",
        "",
    ]
    return "\n".join(head) + "\n".join(render_markdown(t) for t in tables)


def write_tables(tables: Sequence[RenderedTable], out_dir: Path) -> list[Path]:
    """Write ``<name>.tex`` per table and ``tables.md`` with all of them; return the paths.

    Everything is rendered first, then each file is written atomically
    (:func:`harness.atomic.write_text`): a failure leaves that file and the ones after it as they were.
    """
    texts = {out_dir / f"{table.name}.tex": render_latex(table) for table in tables}
    texts[out_dir / "tables.md"] = render_markdown_preview(tables)
    return [write_text(path, text) for path, text in texts.items()]
