"""The figure files compile where a paper inputs them: ``claims_figures.tex`` and ``figures.tex`` from
a paper's folder one level above the results, and from inside their own folder, with pdflatex."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.cli import main
from tests.helpers import REPO_ROOT, manifest_of, override_args
from tests.pages import pdflatex

PAPER = r"""\documentclass[twocolumn]{article}
\usepackage{graphicx}
\begin{document}
Text.
%s
\end{document}
"""


def _compile(folder: Path, body: str) -> subprocess.CompletedProcess[str]:
    (folder / "paper.tex").write_text(PAPER % body, encoding="utf-8")
    return subprocess.run(
        [pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_figure_files_find_their_pictures_from_a_paper_s_folder(tmp_path: Path, data_root: Path) -> None:
    pdflatex()
    folder = REPO_ROOT / "docs" / "demo"
    manifest = manifest_of(folder)
    common = [
        "--profile",
        manifest["profile"],
        "--runs-dir",
        str(folder / "runs"),
        "--data-dir",
        str(data_root),
    ]
    common += override_args(manifest["overrides"])
    results = tmp_path / "paper" / "results"
    assert main(["claims", "cpu_demo", *common, "--out", str(results / "claims")]) == 0
    assert main(["plots", *common, "--out", str(results / "plots")]) == 0
    inputs = r"\input{results/claims/claims_figures.tex}" + "\n" + r"\input{results/plots/figures.tex}"
    proc = _compile(tmp_path / "paper", inputs)
    assert proc.returncode == 0, proc.stdout[-1500:]
    log = (tmp_path / "paper" / "paper.log").read_text(encoding="utf-8", errors="replace")
    for pdf in ("claims_forest_cpu_demo.pdf", "align_uniform_joint.pdf", "align_uniform_steps.pdf"):
        assert f"results/claims/{pdf}" in log or f"results/plots/{pdf}" in log, pdf  # the picture read
    # and from the results' own folder, as before
    proc = _compile(results / "claims", r"\input{claims_figures.tex}")
    assert proc.returncode == 0, proc.stdout[-1500:]
    # the check itself: the bare file names of before stop a paper's folder at the first picture
    bare = (results / "claims" / "claims_figures.tex").read_text(encoding="utf-8")
    (results / "claims" / "bare.tex").write_text(
        bare.replace(r"]{\besidethisfile{", "]{").replace(".pdf}}", ".pdf}"), encoding="utf-8"
    )
    proc = _compile(tmp_path / "paper", r"\input{results/claims/bare.tex}")
    assert proc.returncode != 0 and "claims_forest_cpu_demo.pdf' not found" in proc.stdout
