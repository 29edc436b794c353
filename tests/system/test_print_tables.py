"""The LaTeX tables print readably in a two-column paper, measured in the PDF pdflatex makes.

Every rendered table (the fixture records', every real spec without records, and the committed
``docs/demo`` and ``docs/night`` records') is compiled alone in ``\\documentclass[twocolumn]{article}``
with uncompressed PDF output; the page's content stream is then read back: every ``Tf`` (a font
selected at a size) times the scale of the ``cm`` transforms around it gives the size the text prints
at, and those transforms' scale is how much the table was shrunk. A table must not be shrunk below
85 %, its text must print at 7 pt or more (math sub- and superscripts, such as the DCL of
tau_DCL, at 5 pt or more), and it must fit its page: no overfull box, no float too large.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.reporting.latex_text import latex_escape
from harness.reporting.tables.build import build_tables
from harness.reporting.tables.latex import SD_SIZE, latex_layout, render_latex
from harness.reporting.tables.model import Line, RenderedTable, Text
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore
from tests.helpers import REPO_ROOT, fixture_tables, make_corpus_root, manifest_of
from tests.pages import LATEX_DOC, compile_latex, pdflatex

MIN_SCALE = 0.85
MIN_TEXT_PT = 7.0 * 72 / 72.27 - 1e-3
"""7 pt: TeX's points (1/72.27 in; the sd rows under 8 pt means) in the PDF's (1/72 in)."""
MIN_SCRIPT_PT = 5.0
SCRIPT_FONT = re.compile(r"\+?CM(?:R|MI|SY|EX|BX|SS|TT)[5-7]$")
"""Computer Modern math fonts at script sizes (sub- and superscripts in math)."""

_TOKEN = re.compile(rb"\[|\]|\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f]*>|/[^\s/\[\]()<>]+|[^\s/\[\]()<>]+")


@dataclass
class Printed:
    """What one compiled page prints: the smallest text and script sizes, the smallest scale."""

    text_pt: float
    script_pt: float
    scale: float
    problems: list[str]


def _font_names(pdf: bytes) -> dict[bytes, str]:
    """Resource name (``/F12``) -> base font name ("" for a Type 3 bitmap font without one)."""
    objects = {
        m.group(1): m.group(2) for m in re.finditer(rb"\n(\d+) 0 obj\s*(.*?)endobj", pdf, flags=re.DOTALL)
    }
    names: dict[bytes, str] = {}
    for m in re.finditer(rb"/Font\s*<<(.*?)>>", pdf, flags=re.DOTALL):
        for key, ref in re.findall(rb"(/F\d+)\s+(\d+) 0 R", m.group(1)):
            base = re.search(rb"/BaseFont\s*/([^\s/>]+)", objects.get(ref, b""))
            names[key] = base.group(1).decode() if base else ""
    return names


def measure_pdf(pdf: bytes) -> tuple[list[float], list[float], list[float]]:
    """Printed sizes of text fonts, of script-size math fonts, and every ``cm`` scale, in order."""
    fonts = _font_names(pdf)
    text: list[float] = []
    script: list[float] = []
    scales: list[float] = [1.0]
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", pdf, flags=re.DOTALL):
        stack = [1.0]
        recent: list[bytes] = []
        for token in _TOKEN.findall(m.group(1)):
            if token == b"q":
                stack.append(stack[-1])
            elif token == b"Q":
                stack.pop()
            elif token == b"cm":
                a, b = float(recent[-6]), float(recent[-5])
                stack[-1] *= (a * a + b * b) ** 0.5
                scales.append(stack[-1])
            elif token == b"Tf":
                size = float(recent[-1]) * stack[-1]
                (script if SCRIPT_FONT.search(fonts.get(recent[-2], "")) else text).append(size)
            recent = [*recent[-7:], token]
    return text, script, scales


def print_check(body: str, workdir: Path) -> Printed:
    """Compile ``body`` in a two-column article with uncompressed output and measure what it prints."""
    doc = "\\pdfcompresslevel=0\\pdfobjcompresslevel=0\n" + LATEX_DOC % body
    problems = compile_latex(doc, workdir, also="Float too large")
    if not (workdir / "doc.pdf").exists():
        return Printed(0.0, 0.0, 0.0, problems or ["no PDF"])
    text, script, scales = measure_pdf((workdir / "doc.pdf").read_bytes())
    return Printed(min(text, default=0.0), min(script, default=99.0), min(scales), problems)


def _committed_tables(folder: Path, data_root: Path) -> list[RenderedTable]:
    manifest = manifest_of(folder)
    specs = [s for s in load_table_specs() if s.name in manifest["specs"]]
    store = RunStore(folder / "runs")
    return build_tables(
        specs, store, manifest["profile"], overrides=manifest["overrides"], data_root=data_root
    )


def test_the_print_check_sees_shrinking_and_small_type(tmp_path: Path) -> None:
    """The measurement itself: a box shrunk to half and scriptsize type are seen as such."""
    shrunk = print_check(
        r"\noindent\resizebox{0.5\hsize}{!}{\hbox to \hsize{wide text\hfil}}", tmp_path / "a"
    )
    assert shrunk.problems == [] and shrunk.scale == pytest.approx(0.5, abs=0.01)
    assert shrunk.text_pt == pytest.approx(10.0 * 0.5, abs=0.1)
    small = print_check(r"{\scriptsize tiny words} and $x_{\mathrm{sub}}$", tmp_path / "b")
    assert small.scale == 1.0 and small.text_pt == pytest.approx(7.0, abs=0.1)
    assert small.script_pt == pytest.approx(7.0, abs=0.1)  # cmr7 in the subscript of 10 pt math


def test_every_table_prints_at_7pt_unshrunk_in_a_two_column_paper(tmp_path: Path, data_root: Path) -> None:
    pdflatex()
    real = build_tables(
        load_table_specs(),
        RunStore(tmp_path / "real" / "runs"),
        "cpu",
        data_root=make_corpus_root(tmp_path / "data"),
    )
    tables = [
        *(("fixture", t) for t in fixture_tables(tmp_path / "fixture")),
        *(("no records", t) for t in real),
        *(("docs/demo", t) for t in _committed_tables(REPO_ROOT / "docs" / "demo", data_root)),
        *(("docs/night", t) for t in _committed_tables(REPO_ROOT / "docs" / "night", data_root)),
    ]
    assert len(tables) >= 2 + 12 + 1 + 12  # every spec, and every table of the committed records
    bad = []
    for i, (source, table) in enumerate(tables):
        printed = print_check(render_latex(table), tmp_path / f"t{i}")
        if (
            printed.problems
            or printed.scale < MIN_SCALE
            or printed.text_pt < MIN_TEXT_PT
            or printed.script_pt < MIN_SCRIPT_PT
        ):
            bad.append(f"{source} {table.name}: {printed}")
    assert not bad, bad


@pytest.mark.parametrize("folder", ["demo", "night"])
def test_the_claims_print_at_7pt_unshrunk(tmp_path: Path, data_root: Path, folder: str) -> None:
    """claims.tex: full width at full size (the claim text and the verdicts wrapping), a list longer
    than a page in several floats."""
    from harness.reporting.claims import build_claims
    from harness.reporting.claims_latex import render_latex as render_claims

    pdflatex()
    manifest = manifest_of(REPO_ROOT / "docs" / folder)
    specs = sorted(
        (s for s in load_table_specs() if s.name in manifest["specs"]),
        key=lambda s: manifest["specs"].index(s.name),
    )
    store = RunStore(REPO_ROOT / "docs" / folder / "runs")
    results = build_claims(
        specs, store, manifest["profile"], overrides=manifest["overrides"], data_root=data_root
    )
    tex = render_claims(results, manifest["profile"])
    printed = print_check(tex, tmp_path / "claims")
    assert printed.problems == [] and printed.scale == 1.0, printed  # at full size, never shrunk
    assert printed.text_pt >= MIN_TEXT_PT and printed.script_pt >= MIN_SCRIPT_PT, printed
    floats = tex.count(r"\begin{table*}")
    assert floats == 1 if folder == "demo" else floats > 1, floats  # the night's 58 claims take several
    assert tex.count(r"\addtocounter{table}{-1}") == floats - 1  # continued under one number


def test_a_table_too_wide_for_a_column_spans_the_page(tmp_path: Path, data_root: Path) -> None:
    demo = _committed_tables(REPO_ROOT / "docs" / "demo", data_root)[0]
    assert latex_layout(demo).wide and r"\begin{table*}[t]" in render_latex(demo)
    # eight columns of mean over sd: its measured cells print the sd on a second row, n = 3 in a note
    tex = render_latex(demo)
    small = SD_SIZE[latex_layout(demo).size]  # the sd a step smaller than the means
    assert r"\textbf{75.92} \\" in tex and f"{{{small} $\\pm$0.07}} \\\\" in tex
    assert "mean $\\pm$ sample sd over 3 seeds" in tex
    assert "`measured' lines: this harness's run of the row above on all-MiniLM-L6-v2" in tex
    night = _committed_tables(REPO_ROOT / "docs" / "night", data_root)
    narrow = [t.name for t in night if not latex_layout(t).wide]  # a column or two: one column
    assert "whitenedcse_table5" in narrow and len(narrow) < len(night)
    assert all(r"\begin{table}[t]" in render_latex(t) for t in night if t.name in narrow)


def _tall_table(rows: int) -> RenderedTable:
    lines: list[Line] = []
    for i in range(rows):
        if i and i % 6 == 0:
            lines.append(Line("rule"))
        lines.append(Line("quoted", f"Method {i}", [Text(f"{70 + i % 10}.{i:02d}") for _ in range(8)], "†"))
    header = ["Model", *(f"STS{k}" for k in range(8))]
    notes = [
        f"Note {k}: a sentence of some length that explains one more thing about the rows." for k in range(6)
    ]
    return RenderedTable("tall", "Paper Table 1", "Tall", "cpu", "tables/tall.toml", header, lines, notes, [])


def test_a_table_too_tall_for_a_page_prints_as_two_floats(tmp_path: Path) -> None:
    tall, short = _tall_table(70), _tall_table(12)
    assert render_latex(short).count(r"\begin{table") == 1
    text = render_latex(tall)
    assert text.count(r"\begin{table") == 2 and text.count(r"\caption{") == 2
    first, second = text.split(r"\end{table", 1)
    assert r"\label{tab:tall}" in first and r"\label" not in second and ", continued." in second
    assert r"\addtocounter{table}{-1}" in second  # one table number for both parts
    assert "Note 0" in first and "Note 5" in first and "Note" not in second  # the legend where it starts
    for i in range(70):  # every row exactly once, in order
        assert text.count(f"Method {i}{latex_escape('†')} &") == 1
    assert text.index("Method 0") < text.index("Method 69")
    pdflatex()
    printed = print_check(text, tmp_path / "tall")
    assert not printed.problems and printed.scale >= MIN_SCALE and printed.text_pt >= MIN_TEXT_PT
