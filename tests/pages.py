"""LaTeX compiled with pdflatex and HTML pages opened in headless Chromium: the print and page tests'
helpers (each skips where its program is missing, and fails in CI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import manifest_of, override_args

LATEX_DOC = r"""\documentclass[twocolumn]{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs}
\usepackage{graphicx}
\hfuzz=0.5pt
\begin{document}
%s
\end{document}
"""
"""A two-column article around a body (``LATEX_DOC % body``)."""


def pdflatex() -> str:
    """The pdflatex command (the test is skipped where it is missing, and fails in CI)."""
    exe = shutil.which("pdflatex")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("pdflatex is missing in CI: .ci/run installs texlive-latex-base/-recommended")
        pytest.skip("pdflatex not installed (CI installs it; see .ci/run)")
    return exe


def latex_problems(body: str, workdir: Path) -> list[str]:
    """Compile ``body`` inside a two-column article; return LaTeX errors and overfull boxes."""
    return compile_latex(LATEX_DOC % body, workdir)


def compile_latex(doc: str, workdir: Path, also: str | None = None) -> list[str]:
    """Compile ``doc`` as ``workdir/doc.tex``; its errors, overfull boxes and log lines holding ``also``."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "doc.tex").write_text(doc, encoding="utf-8")
    proc = subprocess.run(
        [pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (workdir / "doc.log").read_text(encoding="latin-1") if (workdir / "doc.log").exists() else ""
    problems = [
        ln for ln in log.splitlines() if ln.startswith(("!", "Overfull")) or (also is not None and also in ln)
    ]
    if proc.returncode and not problems:
        problems.append(f"pdflatex exit status {proc.returncode}: {proc.stdout[-500:]}")
    return problems


def chromium() -> str | None:
    """The headless browser (the test is skipped where it is missing, and fails in CI)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if exe := shutil.which(name):
            return exe
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI: .ci/run installs the Debian chromium package")
    pytest.skip("chromium not installed (CI installs it; see .ci/run)")
    return None


def headless_chromium(exe: str, *args: str, home: Path, timeout: float = 120) -> str:
    """Headless Chromium (``exe``) run with ``args`` and HOME ``home``, exit status 0 asserted; its stdout."""
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def scripted_page(page: Path, script: str, prefix: str) -> Path:
    """A copy of the HTML ``page`` beside it (``<prefix>-<name>``) with ``script`` before ``</body>``."""
    scripted = page.with_name(f"{prefix}-{page.name}")
    scripted.write_text(
        page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8"
    )
    return scripted


def dumped_json(dom: str, element_id: str) -> Any:
    """The JSON a page script wrote into ``<pre id="element_id">``, read from Chromium's ``--dump-dom``."""
    text = dom.split(f'<pre id="{element_id}">', 1)[1].split("</pre>", 1)[0]
    return json.loads(text.replace("&quot;", '"').replace("&amp;", "&"))


def committed_report(folder: Path, specs: list[str], out: Path, *, plots: bool = False) -> Path:
    """``harness tables`` (``plots``) and ``report`` of a docs folder's records into ``out``; the page."""
    from harness.cli import main

    manifest = manifest_of(folder)
    common = ["--profile", manifest["profile"], "--runs-dir", str(folder / "runs")]
    common += override_args(manifest["overrides"])
    assert main(["tables", *specs, *common, "--out", str(out / "tables")]) == 0
    if plots:
        assert main(["plots", *common, "--out", str(out / "plots")]) == 0
    assert main(["report", *specs, *common, "--results", str(out)]) == 0
    return out / "report.html"
