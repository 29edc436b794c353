"""Building a table: a spec's rows and sweeps filled from the run records, with its notes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.evaluation.tasks import year_task_names
from harness.reporting.tables.model import (
    AGGREGATE_TEXT,
    MISSING,
    OURS_MARK,
    PROFILE_MARK,
    QUOTED_MARK,
    Line,
    RenderedTable,
    Text,
    encoder_description,
    measured_cells,
    measured_label,
    paper_cells,
    rank_block,
)
from harness.specs.cells import Cell, reading_plan, records_by_cell
from harness.specs.model import Row, RunSpec, Sweep, TableSpec, format_value, sweep_cell_key

if TYPE_CHECKING:
    from harness.config.settings import RunSettings
    from harness.store.run_config import RunConfig
    from harness.store.run_store import RunStore


# -- building --------------------------------------------------------------------------------------
def _row_lines(
    spec: TableSpec,
    row: Row,
    cell: Cell | None,
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
) -> list[Line]:
    if row.run is None:
        return [Line("quoted", row.label, paper_cells(row.paper), QUOTED_MARK, row.ours)]
    if cell is None or cell.state == "profile":
        return [Line("quoted", row.label, paper_cells(row.paper), PROFILE_MARK, row.ours)]
    measured = [measured_cells(cell, records, spec.scores, c, spec.sts_aggregate) for c in spec.columns]
    return [
        Line("paper", row.label, paper_cells(row.paper), "", row.ours),
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
    measured = [measured_cells(c, records, spec.scores, column, spec.sts_aggregate) for c in keyed]
    first = next((c for c in keyed if c is not None and c.state == "run"), None)
    return [
        Line("paper", sweep.label, paper_cells(sweep.paper), "", sweep.ours),
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


def _number(value: float) -> str:
    """A setting as a reader writes it: ``3e-5``, not ``3e-05``."""
    return format_value(value).replace("e-0", "e-").replace("e+0", "e+")


def _measured_note(spec: TableSpec, config: RunSettings, seeds: Sequence[int]) -> str:
    """What a measured line is, in a reader's words: the encoder, the training, the seeds."""
    steps = "one epoch" if config.max_steps is None else f"{config.max_steps} training steps"
    corpus = config.corpus_id.split(":", 1)[0]
    transfer = (
        f"; transfer by SentEval's {config.transfer_mode} logistic regression"
        if spec.scores == "transfer"
        else ""
    )
    several = sorted({n for n in seeds if n > 1})
    if not seeds:
        spread = "no finished seeds yet"
    elif len(several) == 1:
        spread = f"mean \u00b1 sample sd over {several[0]} seeds" + (
            " (no sd: one run)" if 1 in seeds else ""
        )
    elif several:
        spread = "mean \u00b1 sample sd over the seeds each cell finished (the count follows its sd)"
    else:
        spread = "one seed each"
    return (
        f"Italic 'measured' lines: this harness's run of the row above on "
        f"{encoder_description(config.model)}, {steps} of batch {config.batch_size} on {corpus} "
        f"cut at {config.max_length} tokens, lr {_number(config.lr)}, the best STS-B dev checkpoint of every "
        f"{config.eval_every} steps{transfer}; {spread}."
    )


def build_table(
    spec: TableSpec,
    cells: Sequence[Cell],
    records: Mapping[str, list[Mapping[str, Any]]],
    profile: str,
    reference: RunSettings | None,
) -> RenderedTable:
    """Lay out one table from its resolved cells and the finished records by config id."""
    by_key = {c.key: c for c in cells if c.spec == spec.name}
    if spec.rows:
        header, lines = _row_layout(spec, by_key, records, profile)
    else:
        header, lines = _sweep_layout(spec, by_key, records, profile)
    notes = _table_notes(spec, by_key, records, profile, reference, lines)
    return RenderedTable(
        name=spec.name,
        cites=spec.cites,
        title=spec.title,
        profile=profile,
        spec_path=f"tables/{spec.path.name}",
        header=header,
        lines=lines,
        notes=notes,
        comments=_run_comments(spec, by_key),
        settings=_described_runs(spec, by_key),
        reference=_settings_line(reference) if reference is not None else "",
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
        rank_block(block, ("measured",), by_column=True)
        rank_block(block, ("paper", "quoted"), by_column=True)
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
            rank_block(block, ("measured",), by_column=False)
            rank_block(block, ("paper",), by_column=False)
            lines.append(Line("rule"))
            lines.append(Line("header", sweep.header, [Text(format_value(v)) for v in sweep.values]))
            block = []
            previous = head
        new = _sweep_lines(spec, sweep, by_key, records, profile)
        block.extend(new)
        lines.extend(new)
    rank_block(block, ("measured",), by_column=False)
    rank_block(block, ("paper",), by_column=False)
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
        {len(records.get(c.config_id or "", [])) for c in by_key.values() if c.state == "run"} - {0}
    )
    if reference is not None:
        notes.append(_measured_note(spec, reference, seeds))
    scope = "per column and section" if spec.rows else "per section"
    notes.append(
        "Bold = best, underlined = second, ranked separately among the measured numbers and among "
        f"the paper's, {scope}."
    )
    if spec.scores == "sts" and any(c in year_task_names() or c == "avg" for c in spec.columns):
        notes.append(
            f"Measured STS12-16: SentEval's '{spec.sts_aggregate}' aggregate "
            f"({AGGREGATE_TEXT[spec.sts_aggregate]})."
        )
    untrained = [
        key
        for key, _run in spec.run_cells()
        if (c := by_key.get(key)) and c.configs and c.configs[0].max_steps == 0
    ]
    if untrained:
        notes.append(
            f"Not trained: {', '.join(untrained)}: the measured line scores the encoder as it is (its "
            "pooling, and the post-processing the row names)."
        )
    notes.extend(_mark_notes(spec, by_key, profile, lines))
    notes.extend(spec.notes)
    notes.extend(f"{row.label}: {row.note}." for row in spec.rows if row.note)
    if any(ln.kind == "measured" for ln in lines):
        notes.append("Each row's method settings: the appendix, under this table's title.")
    return notes


def _settings_line(config: RunSettings) -> str:
    """The profile's settings in full (the appendix states them once per table)."""
    steps = "one epoch" if config.max_steps is None else f"{config.max_steps} steps"
    return (
        f"Profile {config.profile}: {encoder_description(config.model)}; {steps}, batch "
        f"{config.batch_size}, max length {config.max_length}, lr {format_value(config.lr)}, warm-up "
        f"{config.warmup_steps} steps, STS-B dev every {config.eval_every} steps, precision "
        f"{config.precision}; corpus {config.corpus_id.replace(':', ' (content hash ')}); transfer "
        f"{config.transfer_mode}."
    )


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
    """What each run row and sweep ran (``row: method(params) with overrides``; the appendix)."""
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
        data_root: data root passed to :func:`~harness.config.settings.resolve_settings`.
    """
    plan = reading_plan(specs, profile, overrides=overrides, data_root=data_root)
    records = records_by_cell(store.records())
    return [build_table(spec, plan.cells, records, profile, plan.settings) for spec in specs]
