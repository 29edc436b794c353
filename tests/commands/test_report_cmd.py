"""``harness report``: one self-contained HTML page of the tables, the claims, the plots and every
run's provenance; it renders in headless Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.cli import main
from harness.reporting.plots import write_plots
from harness.specs.find import load_plot_specs
from harness.store.run_store import RunStore
from tests.helpers import SPECS, filled_store
from tests.pages import chromium, headless_chromium


def _report_inputs(tmp_path: Path, *, claims: bool) -> tuple[Path, Path]:
    """Runs (fixture records, one with a provenance block) and a results folder with plots."""
    store, data_root = filled_store(tmp_path)
    runs = store.root
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


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    exe = chromium()
    assert exe is not None
    _, path = _run_report(tmp_path, claims=True)
    shot = tmp_path / "report.png"
    headless_chromium(
        exe, "--window-size=1280,2400", f"--screenshot={shot}", path.resolve().as_uri(), home=tmp_path
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a rendered page, not a blank one
    if out := os.environ.get("HARNESS_REPORT_SCREENSHOT"):
        shutil.copy(shot, out)
