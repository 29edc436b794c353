"""Table and plot reporters: golden .tex files from fixture records, ranking, seeds, n/a, CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.grid.plan import expand
from harness.reporting.latex_text import latex_escape
from harness.reporting.plots import average_trajectory, write_plots
from harness.reporting.tables.build import build_tables
from harness.reporting.tables.latex import SD_SIZE, latex_layout, render_latex
from harness.reporting.tables.markdown import render_markdown_preview
from harness.reporting.tables.model import RenderedTable, format_mean_std
from harness.reporting.tables.write import write_tables
from harness.specs.find import load_plot_specs
from harness.specs.parse import load_table_spec
from harness.store.record import new_record
from harness.store.run_store import RunStore

FIXTURES = Path(__file__).parent / "fixtures"
SPECS = FIXTURES / "specs"
GOLDEN = FIXTURES / "golden"
UPDATE_ENV = "HARNESS_UPDATE_GOLDEN"
"""Set HARNESS_UPDATE_GOLDEN=1 to rewrite the golden files from the current renderer."""

CORPUS_TEXT = "".join(f"fixture sentence number {i} for the corpus.\n" for i in range(64))


def make_data_root(tmp_path: Path) -> Path:
    """A data root with a small fixed corpus (its content, hence corpus_id, never changes)."""
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "nli-sentences.txt").write_text(CORPUS_TEXT, encoding="utf-8")
    return root


def finished_record(config: Any, scores: dict[str, float], status: str = "finished") -> dict[str, Any]:
    record = dict(new_record(config))
    record.update(
        status=status,
        final={"sts": dict(scores)} if status == "finished" else {},
        best_step=4,
        best_stsb_dev=scores.get("STSBenchmark", scores.get("avg")),
        trajectory=[
            {
                "step": s,
                "loss": 1.0 / (s + 1),
                "stsb_dev": 50.0 + s,
                "align": 0.2 + 0.01 * s,
                "uniform": -1.0 - 0.1 * s,
            }
            for s in (0, 2, 4)
        ],
        error=None if status == "finished" else "boom",
    )
    return record


def fill_store(store: RunStore, data_root: Path) -> None:
    """Records for the fixture specs under the smoke profile, from tests/fixtures/report_scores.json."""
    scores = json.loads((FIXTURES / "report_scores.json").read_text(encoding="utf-8"))
    for name in ("report_rows", "report_sweep"):
        spec = load_table_spec(SPECS / f"{name}.toml")
        plan = expand([spec], "smoke", seeds=1, data_root=data_root)
        for key, entries in scores[name].items():
            base = plan.cell(spec.name, key).configs[0]
            for i, entry in enumerate(entries):
                store.save(finished_record(base.replace(seed=base.seed + i), entry))
    # a failed and an interrupted run must not show up in any table
    rows = load_table_spec(SPECS / "report_rows.toml")
    dcl = expand([rows], "smoke", seeds=1, data_root=data_root).cell("report_rows", "+DCL").configs[0]
    store.save(finished_record(dcl, {"STS12": 99.0, "STSBenchmark": 99.0, "avg": 99.0}, status="failed"))
    store.save(finished_record(dcl.replace(seed=dcl.seed + 1), {"avg": 99.0}, status="running"))


@pytest.fixture()
def rendered(tmp_path: Path) -> list[RenderedTable]:
    data_root = make_data_root(tmp_path)
    store = RunStore(tmp_path / "runs")
    fill_store(store, data_root)
    specs = [load_table_spec(SPECS / "report_rows.toml"), load_table_spec(SPECS / "report_sweep.toml")]
    return build_tables(specs, store, "smoke", data_root=data_root)


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"golden file {path} missing: run with {UPDATE_ENV}=1 to create it")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file ({UPDATE_ENV}=1 updates)"
    )


def test_golden_tex_and_markdown(rendered: list[RenderedTable]) -> None:
    for table in rendered:
        _check_golden(f"{table.name}.tex", render_latex(table))
    _check_golden("tables.md", render_markdown_preview(rendered))


def _line(table: RenderedTable, label: str, kind: str = "measured") -> list[str]:
    """The cells of the paper line labelled ``label`` or of the measured line just below it."""
    for i, line in enumerate(table.lines):
        if line.label == label and line.kind == "paper":
            chosen = table.lines[i + 1] if kind == "measured" else line
            assert chosen.kind == kind
            return [f"{c.style}:{c.text}" for c in chosen.cells]
    raise KeyError(label)


def test_rows_table_cells(rendered: list[RenderedTable]) -> None:
    rows = rendered[0]
    # two seeds: mean +- sample std; bold/underline per column among measured values
    assert _line(rows, "SimCSE-BERT-base") == [
        "best:61.00 \u00b1 1.41",
        "second:70.50 \u00b1 0.71",
        "best:65.50 \u00b1 0.71",
    ]
    assert _line(rows, "SimCSE++-BERT-base") == ["best:61.00", "best:72.50", "second:64.00"]
    # failed / running records are ignored: the cell stays empty
    assert _line(rows, "+DCL") == [":--", ":--", ":--"]
    # paper numbers are ranked among themselves (quoted rows included), within the section
    assert _line(rows, "BERT-base (first-last avg.)", "paper")[:1] == [":39.70"]
    # a tie for best leaves no second place
    assert _line(rows, "BERT-base (first-last avg.)")[0] == ":30.11"
    quoted = [ln for ln in rows.lines if ln.kind == "quoted"]
    assert [(q.label, q.marks) for q in quoted] == [
        ("GloVe (avg.)", "\u2020"),
        ("SimCSE-BERT-large", "\u2021"),
        ("ConSERT-large", "\u2020"),
    ]
    assert any("runs under profile paper only" in n for n in rows.notes)
    # the notes say what a measured line is in words; the settings go to the appendix
    assert rows.notes[0].startswith("Italic 'measured' lines: this harness's run of the row above on random")
    assert "4 training steps of batch 8" in rows.notes[0] and "over 2 seeds" in rows.notes[0]
    assert not any("simcsepp(" in n or ":82480" in n or "max_steps" in n for n in rows.notes)
    assert any(line.startswith("SimCSE++-BERT-base: simcsepp(") for line in rows.settings)


def test_sweep_table_cells(rendered: list[RenderedTable]) -> None:
    sweep = rendered[1]
    assert sweep.header == ["Group size", "16", "32", "96", "64"]
    assert _line(sweep, "STS-Avg. (shuffled)") == [
        ":50.00",
        "best:53.00 \u00b1 0.71",
        ":n/a (d=64)",
        ":51.00",
    ]
    assert _line(sweep, "w/o shuffled") == [":49.00", "second:52.00", ":n/a (d=64)", ":--"]
    # the m = 2 cell shares its run with the 32-group shuffled cell
    assert _line(sweep, "STS-Avg.") == ["best:53.00 \u00b1 0.71", "second:52.00"]
    assert any(
        n.startswith("n/a: not valid for this profile's encoder (d = 64): num_groups=96") for n in sweep.notes
    )
    headers = [ln for ln in sweep.lines if ln.kind == "header"]
    assert [h.label for h in headers] == ["Positive Number"]


def test_latex_is_booktabs_and_escaped(rendered: list[RenderedTable]) -> None:
    tex = render_latex(rendered[0])
    for piece in (
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
        r"\textbf{",
        r"\underline{",
        r"$\pm$",
        r"$\dagger$",  # full size: a superscript would print below 7 pt
    ):
        assert piece in tex
    assert r"100\% \& more\_stuff" in tex
    assert "profile smoke" in tex and "SimCSE++ Table 3" in tex
    assert latex_escape("a_b & c%") == r"a\_b \& c\%"


def test_format_mean_std() -> None:
    assert format_mean_std([76.25]) == "76.25"
    assert format_mean_std([1.0, 3.0]) == "2.00 \u00b1 1.41"


def test_write_tables_writes_tex_and_preview(rendered: list[RenderedTable], tmp_path: Path) -> None:
    paths = write_tables(rendered, tmp_path / "out")
    assert sorted(p.name for p in paths) == [
        "report_rows.tex",
        "report_sweep.tex",
        "run_settings.md",
        "run_settings.tex",
        "tables.md",
    ]
    assert "## Fixture: sweeps" in (tmp_path / "out" / "tables.md").read_text(encoding="utf-8")
    appendix = (tmp_path / "out" / "run_settings.tex").read_text(encoding="utf-8")
    assert r"\subsection*{Run settings: Fixture: rows \& sections}" in appendix
    assert r"Table~\ref{tab:report_rows}" in appendix


def test_every_real_spec_renders_without_records(tmp_path: Path) -> None:
    from harness.specs.find import load_table_specs

    data_root = make_data_root(tmp_path)
    tables = build_tables(load_table_specs(), RunStore(tmp_path / "runs"), "cpu", data_root=data_root)
    assert len(tables) >= 11
    for table in tables:
        tex = render_latex(table)
        floats = tex.count(r"\end{table")  # a table too tall for a page prints as two floats
        assert tex.count(r"\begin{tabular}") == floats and floats in (1, 2) and "profile cpu" in tex
    table4 = next(t for t in tables if t.name == "whitenedcse_table4")
    # group counts keep their channels per group (384 at d = 768 -> 192 at d = 384): none is n/a
    assert "n/a" not in render_latex(table4)


def test_average_trajectory_means_over_seeds() -> None:
    records: list[dict[str, Any]] = [
        {
            "trajectory": [
                {"step": 0, "align": 1.0, "uniform": -1.0},
                {"step": 2, "align": 0.5, "uniform": -2.0},
            ]
        },
        {
            "trajectory": [
                {"step": 0, "align": 3.0, "uniform": -3.0},
                {"step": 2, "align": None, "uniform": None},
            ]
        },
    ]
    assert average_trajectory(records) == ([0, 2], [2.0, 0.5], [-2.0, -2.0])


def test_plots_from_fixture_records(tmp_path: Path) -> None:
    data_root = make_data_root(tmp_path)
    store = RunStore(tmp_path / "runs")
    fill_store(store, data_root)
    paths = write_plots(load_plot_specs(), store, "smoke", tmp_path / "plots", data_root=data_root)
    names = sorted(p.name for p in paths)
    assert names == [
        "align_uniform_joint.pdf",
        "align_uniform_joint.png",
        "align_uniform_steps.pdf",
        "align_uniform_steps.png",
        "captions.json",
        "figures.tex",
    ]
    assert all(p.stat().st_size > 200 for p in paths)


def test_tables_and_plots_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_root = make_data_root(tmp_path)
    runs = tmp_path / "runs"
    fill_store(RunStore(runs), data_root)
    common = ["--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data_root)]
    out = tmp_path / "tables"
    assert main(["tables", str(SPECS / "report_rows.toml"), *common, "--out", str(out)]) == 0
    assert (out / "report_rows.tex").is_file() and (out / "tables.md").is_file()
    assert main(["plots", *common, "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "align_uniform_joint.pdf").is_file()
    # the figures' captions speak only of what they draw: the command names what it left out
    assert "align_uniform_joint: not drawn: Barlow probe" in capsys.readouterr().err
    assert main(["tables", "no_such_table", *common]) == 2
    assert "unknown table spec 'no_such_table'" in capsys.readouterr().err


# -- LaTeX typography and fit ----------------------------------------------------------------------
def test_latex_typography(rendered: list[RenderedTable]) -> None:
    from harness.reporting.latex_text import latex_text

    tex = render_latex(rendered[0])
    # the own-method mark after a row end: `\\*` would be LaTeX's starred line break, swallowing it
    assert not re.search(r"\\\\\s*\*", tex)
    assert "{*}\\,SimCSE++-BERT-base" in tex
    assert r"\texttt{harness grid report\_rows -{}-{}profile smoke}" in tex
    assert "--profile" not in tex.split("\\begin{table")[1]
    assert "'paper'" not in tex and "`measured'" in tex
    assert latex_text("'paper' lines") == "`paper' lines"
    assert latex_text("SimCSE++'s 'released' values") == "SimCSE++'s `released' values"  # a possessive stays
    assert latex_text("lambda") == r"$\lambda$" and latex_text("lambda_dcl=0.1") == r"lambda\_dcl=0.1"
    assert latex_text("tau_DCL = 5") == r"$\tau_{\mathrm{DCL}}$ = 5"
    assert latex_text("Spearman x100, all") == r"Spearman $\times 100$, all"
    assert latex_text("a -- b") == "a -- b"  # a real en dash stays one
    assert latex_text("run --seeds 3") == "run -{}-{}seeds 3"
    # several seeds: mean $\pm$ std with the seed count
    # the sd on the row below the means, the seed count in a note (or after each sd where they differ)
    assert r"\quad\textit{measured} & \textbf{61.00} & \underline{70.50} & \textbf{65.50} \\" in tex
    small = "{" + SD_SIZE[latex_layout(rendered[0]).size]  # the sd a step smaller than the means
    assert f" & {small} $\\pm$1.41}} & {small} $\\pm$0.71}} & {small} $\\pm$0.71}} \\\\" in tex
    assert "mean $\\pm$ sample sd over 2 seeds" in tex
    from harness.reporting.tables.latex import _split_cell
    from harness.reporting.tables.model import Text

    assert _split_cell(Text("61.00 \u00b1 1.41", seeds=2), None) == ("61.00", "\u00b11.41 (2)")
    assert _split_cell(Text("61.00 \u00b1 1.41", seeds=2), 2) == ("61.00", "\u00b11.41")
    assert _split_cell(Text("61.00"), None) == ("61.00", "")
    assert "ranked separately among the measured numbers and among the paper's" in tex
    # one pair of parentheses at most in the caption: the title's own
    assert r"\caption{Fixture: rows \& sections. Paper numbers from SimCSE++ Table 3; measured lines" in tex


def test_measured_lines_name_their_encoder(rendered: list[RenderedTable]) -> None:
    from harness.reporting.tables.model import encoder_name

    rows = rendered[0]
    labels = [(ln.kind, ln.label) for ln in rows.lines if ln.kind in ("paper", "measured")]
    # the paper line keeps the paper's label; the measured line below names encoder and profile
    assert labels[2:4] == [
        ("paper", "SimCSE-BERT-base"),
        ("measured", "measured: random tiny encoder (smoke)"),
    ]
    assert encoder_name("minilm") == "all-MiniLM-L6-v2"
    assert encoder_name("/models/my-encoder/") == "my-encoder"


LATEX_DOC = r"""\documentclass[twocolumn]{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs}
\usepackage{graphicx}
\hfuzz=0.5pt
\begin{document}
%s
\end{document}
"""


def _pdflatex() -> str:
    exe = shutil.which("pdflatex")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("pdflatex is missing in CI: .ci/run installs texlive-latex-base/-recommended")
        pytest.skip("pdflatex not installed (CI installs it; see .ci/run)")
    return exe


def latex_problems(body: str, workdir: Path) -> list[str]:
    """Compile ``body`` inside a two-column article; return LaTeX errors and overfull boxes."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "doc.tex").write_text(LATEX_DOC % body, encoding="utf-8")
    proc = subprocess.run(
        [_pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (workdir / "doc.log").read_text(encoding="latin-1") if (workdir / "doc.log").exists() else ""
    problems = [ln for ln in log.splitlines() if ln.startswith("!") or ln.startswith("Overfull")]
    if proc.returncode and not problems:
        problems.append(f"pdflatex exit status {proc.returncode}: {proc.stdout[-500:]}")
    return problems


def test_latex_check_catches_overfull_and_errors(tmp_path: Path) -> None:
    wide = r"\noindent\hbox{" + "wide " * 40 + r"}\par"
    assert any(p.startswith("Overfull") for p in latex_problems(wide, tmp_path / "wide"))
    assert any(p.startswith("!") for p in latex_problems(r"\undefinedmacro", tmp_path / "err"))


def test_every_table_compiles_and_fits_two_columns(rendered: list[RenderedTable], tmp_path: Path) -> None:
    from harness.specs.find import load_table_specs

    _pdflatex()
    data_root = make_data_root(tmp_path / "real")
    real = build_tables(load_table_specs(), RunStore(tmp_path / "real" / "runs"), "cpu", data_root=data_root)
    body = "\n\\clearpage\n".join(render_latex(t) for t in [*rendered, *real])
    assert latex_problems(body, tmp_path / "tex") == []


def test_claims_table_compiles_and_fits(tmp_path: Path) -> None:
    from harness.reporting.claims import build_claims
    from harness.reporting.claims import render_latex as render_claims
    from harness.specs.find import load_table_specs

    _pdflatex()
    data_root = make_data_root(tmp_path / "real")
    specs = [s for s in load_table_specs() if s.claims]
    results = build_claims(specs, RunStore(tmp_path / "real" / "runs"), "cpu", data_root=data_root)
    assert len(results) >= 50
    tex = render_claims(results, "cpu")
    assert r"$\lambda$" in tex and r"$\tau_{\mathrm{DCL}}$" in tex
    assert latex_problems(tex, tmp_path / "claims") == []


# -- STS aggregates in tables ------------------------------------------------------------------------
AGG_RECORD = {
    "final": {
        "sts": {"STS12": 60.0, "STSBenchmark": 70.004, "avg": 65.0},
        "sts_aggregates": {"STS12": {"all": 60.0, "mean": 58.126, "wmean": 59.5}},
    }
}


def test_metric_reads_the_chosen_sts_aggregate() -> None:
    from harness.reporting.tables.model import _metric

    assert _metric(AGG_RECORD, "sts", "STS12") == 60.0
    assert _metric(AGG_RECORD, "sts", "STS12", "mean") == 58.126
    assert _metric(AGG_RECORD, "sts", "STS12", "wmean") == 59.5
    assert _metric(AGG_RECORD, "sts", "STSBenchmark", "mean") == 70.004  # not an STS12-16 year
    # avg recomputed the table's way: mean of the numbers rounded to 2 decimals
    assert _metric(AGG_RECORD, "sts", "avg", "mean") == pytest.approx((58.13 + 70.0) / 2)
    assert _metric(AGG_RECORD, "sts", "avg") == 65.0
    old = {"final": {"sts": {"STS12": 60.0, "avg": 60.0}}}  # a record from before aggregates
    assert _metric(old, "sts", "STS12", "mean") is None


def test_spec_sts_aggregate_key(tmp_path: Path, rendered: list[RenderedTable]) -> None:
    from harness.errors import ConfigError

    text = (SPECS / "report_rows.toml").read_text(encoding="utf-8")
    for value, ok in (('"wmean"', True), ('"median"', False)):
        path = tmp_path / "agg.toml"
        path.write_text(f"sts_aggregate = {value}\n" + text, encoding="utf-8")
        if ok:
            assert load_table_spec(path).sts_aggregate == "wmean"
        else:
            with pytest.raises(ConfigError, match=r"sts_aggregate.*median"):
                load_table_spec(path)
    assert load_table_spec(SPECS / "report_rows.toml").sts_aggregate == "all"
    assert any("'all' aggregate" in n for n in rendered[0].notes)


# -- HTML report --------------------------------------------------------------------------------------
def _report_inputs(tmp_path: Path, *, claims: bool) -> tuple[Path, Path]:
    """Runs (fixture records, one with a provenance block) and a results folder with plots."""
    data_root = make_data_root(tmp_path)
    runs = tmp_path / "runs"
    store = RunStore(runs)
    fill_store(store, data_root)
    first = store.records()[0]
    first["provenance"] = {"torch": "2.x-test", "git_commit": "abc123"}
    store.save(first)
    results = tmp_path / "results"
    write_plots(load_plot_specs(), store, "smoke", results / "plots", data_root=data_root)
    (results / "plots" / "tiny.svg").write_text(
        '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
        '<rect width="10" height="10"/></svg>',
        encoding="utf-8",
    )
    if claims:
        (results / "claims").mkdir(parents=True)
        (results / "claims" / "claims.md").write_text("# Claims\n\n- claim <one> holds\n", encoding="utf-8")
    return runs, results


def _run_report(tmp_path: Path, claims: bool) -> tuple[str, Path]:
    runs, results = _report_inputs(tmp_path, claims=claims)
    data_root = tmp_path / "data"
    argv = ["report", *(str(SPECS / f"{n}.toml") for n in ("report_rows", "report_sweep"))]
    argv += ["--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data_root)]
    assert main([*argv, "--results", str(results)]) == 0
    path = results / "report.html"
    return path.read_text(encoding="utf-8"), path


def test_report_html_structure(tmp_path: Path) -> None:
    from html.parser import HTMLParser

    text, _ = _run_report(tmp_path, claims=True)

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, dict[str, str | None]]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append((tag, dict(attrs)))

    parser = Collect()
    parser.feed(text)
    tags = parser.tags
    # self-contained: no external stylesheet, script or image; plots embedded
    assert not [t for t, a in tags if t in ("link", "script")]
    images = [a.get("src") or "" for t, a in tags if t == "img"]
    assert len(images) == 2 and all(s.startswith("data:image/png;base64,") for s in images)
    assert "<svg" in text and "<?xml" not in text
    fetched = [v or "" for _, a in tags for k, v in a.items() if k in ("src", "href", "xlink:href")]
    assert fetched and all(v.startswith(("data:", "#")) for v in fetched), fetched
    assert "url(" not in text and "@import" not in text
    # every table, paper line beside the measured line with its encoder and the seed count
    sections = [a.get("id") for t, a in tags if t == "section"]
    assert sections == ["table-report_rows", "table-report_sweep"]
    assert text.count('<tr class="measured">') == 4 + 3
    assert "measured: random tiny encoder (smoke)" in text
    assert '<td class="best">61.00<span class="sd">\u00b1 1.41 \u00b7 n = 2</span></td>' in text
    assert "* SimCSE++-BERT-base" in text
    assert "(run <code>harness grid report_rows --profile smoke</code>)" in text
    # the claims file (escaped) and every run's provenance
    assert "claim &lt;one&gt; holds" in text and "No claims computed" not in text
    runs = [a.get("id") for t, a in tags if t == "tr" and (a.get("id") or "").startswith("run-")]
    assert len(runs) == len(RunStore(tmp_path / "runs").records())
    # provenance: every key once per distinct value, with the runs that share it
    for key in ("torch", "git_commit", "code_version", "host", "config.method", "config.seed"):
        assert f"<td>{key}</td>" in text
    assert "<td>provenance." not in text and "<td>config</td>" not in text
    assert text.count("<td>code_version</td>") == 1 and text.count("<td>host</td>") == 1
    assert text.count("<td>torch</td>") == 1  # one run has it: named, not "all runs"
    assert f"all {len(runs)} runs</td>" in text
    assert "1 tables" not in text and "2 tables from 13 run records" in text


def test_report_without_claims_says_so(tmp_path: Path) -> None:
    text, _ = _run_report(tmp_path, claims=False)
    assert "No claims computed." in text


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if exe := shutil.which(name):
            return exe
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI: .ci/run installs the Debian chromium package")
    pytest.skip("chromium not installed (CI installs it; see .ci/run)")
    return None


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    exe = _chromium()
    assert exe is not None
    _, path = _run_report(tmp_path, claims=True)
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,2400",
            f"--screenshot={shot}",
            path.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a rendered page, not a blank one
    if out := os.environ.get("HARNESS_REPORT_SCREENSHOT"):
        shutil.copy(shot, out)


def test_report_claims_from_json(tmp_path: Path) -> None:
    from harness.reporting.report import claims_html

    assert "No claims computed." in claims_html(tmp_path)
    (tmp_path / "claims.json").write_text('{"claims": [{"id": "c1", "holds": true}]}', encoding="utf-8")
    text = claims_html(tmp_path)
    assert "&quot;id&quot;: &quot;c1&quot;" in text and "No claims" not in text
    (tmp_path / "claims.md").write_text("markdown wins", encoding="utf-8")
    assert "markdown wins" in claims_html(tmp_path)


def test_report_shows_harness_claims_as_a_table(tmp_path: Path) -> None:
    from harness.reporting.report import claims_html

    claims = {
        "claims": [
            {
                "spec": "cpu_demo",
                "text": "A beats <B>",
                "paper_delta": 2.53,
                "mean": -0.74,
                "ci95": [-1.2, -0.28],
                "n": 3,
                "verdict": "reversed",
                "mdd80": 0.6,
            }
        ]
    }
    (tmp_path / "claims.json").write_text(json.dumps(claims), encoding="utf-8")
    (tmp_path / "claims.md").write_text("the markdown", encoding="utf-8")
    text = claims_html(tmp_path)
    assert '<table class="results claims">' in text and "the markdown" not in text
    assert "A beats &lt;B&gt;" in text and "[\u22121.20, \u22120.28]" in text
    assert "+2.53" in text and ">reversed<" in text
