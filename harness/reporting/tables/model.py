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
* notes under the table say what a measured line is in a reader's words (encoder, training steps,
  seeds) and what the marks mean; every run row's method parameters and readings go to an appendix
  file (``run_settings.tex`` / ``.md``), not under the table;
* in LaTeX, a table prints for a two-column paper without shrinking its type: one column when its
  estimated width allows, else the full width (``table*``), at small or footnotesize type; a
  measured mean ± sd prints its sd on a row below the mean, and the notes are in the table's size.

Nothing here writes files except :func:`write_tables`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.specs.cells import Cell
from harness.store.record import record_metric

Style = Literal["", "best", "second"]


LineKind = Literal["header", "measured", "paper", "quoted", "rule"]


MISSING = "--"


QUOTED_MARK = "\u2020"  # dagger


PROFILE_MARK = "\u2021"  # double dagger


OURS_MARK = "*"


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
    settings: list[str] = field(default_factory=list)
    """``row: method(params) with overrides`` of every run row and sweep (the appendix file)."""
    reference: str = ""
    """The profile's settings in one line (the appendix states them once per table)."""


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


def measured_cells(
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
        for r in records.get(cell.config_id or "", [])
        if (v := _metric(r, scores, column, aggregate)) is not None
    ]
    if not values:
        return Text(MISSING)
    mean = statistics.fmean(values)
    return Text(format_mean_std(values), value=round(mean, 2), seeds=len(values))


def paper_cells(values: Sequence[float]) -> list[Text]:
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


def rank_block(lines: Sequence[Line], kinds: tuple[LineKind, ...], by_column: bool) -> None:
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


ENCODER_NOTES: dict[str, str] = {
    "minilm": "already sentence-trained, unlike the papers' BERT",
    "random:tiny": "random weights, for tests only",
}
"""What a reader should know about a profile's encoder (the table notes say it)."""


def encoder_description(model: str) -> str:
    """``all-MiniLM-L6-v2 (already trained on sentence pairs, ...)`` for a table note."""
    note = ENCODER_NOTES.get(model)
    return f"{encoder_name(model)} ({note})" if note else encoder_name(model)


def encoder_name(model: str) -> str:
    """A short display name for a ``config.model`` value."""
    return ENCODER_NAMES.get(model, model.rstrip("/").rsplit("/", 1)[-1] or model)


def measured_label(cell: Cell | None, records: Mapping[str, list[Mapping[str, Any]]], profile: str) -> str:
    """``measured: <encoder> (<profile>)``, the encoder taken from the records' ``config.model``."""
    models = sorted(
        {
            str(m)
            for r in records.get((cell.config_id if cell else None) or "", [])
            if (m := (r.get("config") or {}).get("model"))
        }
    )
    if not models and cell is not None and cell.configs:
        models = [cell.configs[0].model]
    names = ", ".join(encoder_name(m) for m in models) or "no run"
    return f"measured: {names} ({profile})"
