"""A table as booktabs LaTeX, laid out for a two-column paper from an estimate of its size."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from harness.reporting.latex_text import latex_escape, latex_text
from harness.reporting.tables.model import Line, RenderedTable, Text

LATEX_OURS_MARK = "{*}"
"""The own-method mark in LaTeX, braced: after ``\\\\`` a bare ``*`` would be read as ``\\\\*``."""


COLUMN_PT = 219.0
"""One column of a two-column paper, in pt, a little under article's 229.5 (ACL's is 219.1)."""


TEXT_PT = 455.0
"""The full text width of a two-column paper, in pt, a little under article's 469 (ACL's is 455.2)."""


FLOAT_PT = 500.0
"""The most height a table's float may take (article's text height is 592 pt, ACL's 666 pt)."""


TALL_ESTIMATE_PT = 680.0
"""The estimated height (:func:`_height_pt` at footnotesize, full width) above which a table may
overflow a page in its most compact setting (footnotesize). Calibrated on the committed night
tables: WhitenedCSE Table 1 at an estimate of 716 overflowed by 17 pt, the tallest that fit was
estimated at 545; 680 leaves a margin below the first. Such a table prints as two floats under one
number (:func:`_latex_parts`)."""


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
    compact: bool = False
    """The most compact setting (footnotesize, rows unstretched), for a table that fits no other;
    it may still print as two floats (:func:`_latex_parts`)."""


_SIZES = (("small", 9.0), ("footnotesize", 8.0))
SD_SIZE = {"small": r"\footnotesize", "footnotesize": r"\fontsize{7}{8}\selectfont"}
"""The sd row under a row of means, a step smaller than the table: 8 pt under 9 pt means, 7 pt under
8 pt ones (the smallest text a table prints)."""


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
    rows = 2 + sum(_line_rows(ln) for ln in table.lines)
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
    return LatexLayout(True, "footnotesize", 3.5, label, seeds, compact=True)


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
    """The table's notes, and what the compact LaTeX cells leave out (differing seed counts)."""
    notes = list(table.notes)
    if layout.seeds is None and any(c.seeds > 1 for ln in table.lines for c in ln.cells):
        notes.insert(1, "(k) after an sd: the number of seeds behind that mean.")
    return notes


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
            if any(sds):  # a step smaller: the row keeps its height, so an underline above stays clear
                small = SD_SIZE[layout.size]
                out.append(row(["", *(f"{{{small} {latex_text(sd)}}}" if sd else "" for sd in sds)]))
    return out


def _latex_parts(table: RenderedTable, layout: LatexLayout) -> list[list[Line]]:
    """The table's lines as one float, or as two when even the most compact setting is too tall for
    a page (:data:`TALL_ESTIMATE_PT`). The first part carries the notes (the legend belongs where the
    table starts), so the cut balances its rows and notes against the second part's rows; it falls
    before a row (never between a paper row and its measured line), at a section rule where one is
    about as good (the rule itself is dropped)."""
    lines = list(table.lines)
    if not layout.compact or _height_pt(table, 8.0, TEXT_PT) <= TALL_ESTIMATE_PT:
        return [lines]
    note_lines = sum(-(-text_em(n) * 8.0 // TEXT_PT) for n in table.notes) + 3
    rows = [_line_rows(ln) for ln in lines]  # a mean over its sd takes two
    cuts = [i for i in range(1, len(lines)) if lines[i].kind != "measured"]
    if not cuts:
        return [lines]

    def badness(cut: int) -> float:
        rule = lines[cut].kind == "rule"
        second = sum(rows[cut + 1 :] if rule else rows[cut:])
        return abs(sum(rows[:cut]) + note_lines - second) - (RULE_BONUS if rule else 0.0)

    cut = min(cuts, key=badness)
    return [lines[:cut], lines[cut + 1 :] if lines[cut].kind == "rule" else lines[cut:]]


RULE_BONUS = 3.0
"""Rows of imbalance a cut at a section rule may cost over a cut between two rows."""


def _line_rows(line: Line) -> float:
    """Printed rows of one table line: two for measured means with their sd beneath, one else."""
    return 1 + (line.kind == "measured" and any("\u00b1" in c.text for c in line.cells))


def caption(table: RenderedTable) -> str:
    """The caption: the table's title, then where its two kinds of numbers come from."""
    title = latex_text(table.title).rstrip(".")
    return (
        f"{title}. Paper numbers from {latex_text(table.cites)}; measured lines from this harness, "
        f"profile {latex_text(table.profile)}."
    )


def render_latex(table: RenderedTable) -> str:
    """A ``table`` (one column) or ``table*`` (full width) float with a booktabs ``tabular``.

    Needs ``\\usepackage{booktabs}`` and ``\\usepackage{graphicx}``. :func:`latex_layout` picks the
    float and the type size from the table's estimated width; the notes are set in the table's own
    size under the first part; a table still wider than the line (another document class) is shrunk
    to fit. A table too tall for a page prints as two floats under one table number, the second
    captioned "..., continued." (:func:`_latex_parts`).
    """
    layout = latex_layout(table)
    env = "table*" if layout.wide else "table"
    out = [
        "% Generated by `harness tables` from run records; do not edit by hand.",
        f"% spec: {table.spec_path}; cites: {table.cites}; profile: {table.profile}",
        "% needs \\usepackage{booktabs} and \\usepackage{graphicx}",
        *(f"% {c}" for c in table.comments),
    ]
    parts = _latex_parts(table, layout)
    for k, lines in enumerate(parts):
        out += [
            rf"\begin{{{env}}}[t]",
            r"\centering",
            rf"\{layout.size}",
            rf"\setlength{{\tabcolsep}}{{{layout.tabcolsep_pt:g}pt}}",
            rf"\renewcommand{{\arraystretch}}{{{1.0 if layout.compact else 1.15}}}",
            "% shrunk to \\linewidth only when its natural width exceeds it",
            r"\setbox0=\hbox{%",
            r"\begin{tabular}{l" + "c" * (len(table.header) - 1) + "}",
            r"\toprule",
            " & ".join(latex_text(h) for h in table.header) + r" \\",
            r"\midrule",
            *_latex_rows(dataclasses.replace(table, lines=lines), layout),
            r"\bottomrule",
            r"\end{tabular}}%",
            r"\leavevmode\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\box0}\else\box0\fi",
        ]
        if k == 0:  # the legend where the table starts
            out += [
                r"\par\smallskip",
                r"\begin{minipage}{\linewidth}\raggedright",
                *(latex_text(n) + r"\par" for n in _latex_notes(table, layout)),
                r"\end{minipage}",
                rf"\caption{{{caption(table)}}}",
                rf"\label{{tab:{table.name}}}",
            ]
        else:  # the same table continued: its number again, not the next one
            out += [
                r"\addtocounter{table}{-1}",
                rf"\caption{{{latex_text(table.title).rstrip('.')}, continued.}}",
            ]
        out.append(rf"\end{{{env}}}")
    return "\n".join(out) + "\n"


def render_settings_latex(tables: Sequence[RenderedTable]) -> str:
    """The appendix file: every table's profile settings and each measured row's method, its
    parameters (switches included) and overrides, under the table's title."""
    out = [
        "% Generated by `harness tables` from run records; \\input it in an appendix.",
        "% The settings behind every measured line of the tables beside it.",
    ]
    for table in tables:
        if not table.settings:
            continue
        out += [
            rf"\subsection*{{Run settings: {latex_text(table.title).rstrip('.')}}}",
            rf"{latex_text(table.cites)}, Table~\ref{{tab:{table.name}}}. {latex_text(table.reference)}",
            r"\begin{itemize}\small\renewcommand{\labelitemi}{$\bullet$}",  # textcomp's bullet is Type 3
            *(_settings_item(line) for line in table.settings),
            r"\end{itemize}",
        ]
    return "\n".join(out) + "\n"


def _settings_item(line: str) -> str:
    """One row's settings in typewriter type, breakable after ``(`` and ``=`` (a parameter list has
    few spaces and is wider than a column)."""
    label, _, described = line.partition(": ")
    code = latex_escape(described).replace("(", r"(\allowbreak{}").replace("=", r"=\allowbreak{}")
    return rf"\item {latex_text(label)}: \texttt{{{code}}}"
