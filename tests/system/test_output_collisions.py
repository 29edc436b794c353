"""Outputs never collide: two specs of one name (``a/t.toml`` and ``b/t.toml``) are refused by every
command that writes per-spec files, before anything is written (the finding of specs itself:
tests/specs/test_find.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers import REPO_ROOT, SMOKE_SPEC, make_data_root

PLOT = REPO_ROOT / "plots" / "align_uniform_steps.toml"


def twins(tmp_path: Path, source: Path, name: str) -> tuple[Path, Path]:
    """Two copies of ``source`` named ``name`` in folders a/ and b/ (b's title differs)."""
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    for path in (a, b):
        path.parent.mkdir(exist_ok=True)
        shutil.copy(source, path)
    b.write_text(b.read_text(encoding="utf-8").replace('title = "', 'title = "Other '), encoding="utf-8")
    return a, b


@pytest.mark.parametrize("command", ["tables", "claims", "report", "grid"])
def test_two_table_specs_of_one_name_are_refused_before_anything_is_written(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = twins(tmp_path, SMOKE_SPEC, "t.toml")
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "records").mkdir(parents=True)
    data = make_data_root(tmp_path / "data")
    flags = {"report": ["--results", str(out)], "grid": ["--dry-run"]}.get(command, ["--out", str(out)])
    argv = [command, str(a), str(b), "--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data)]
    assert main([*argv, *flags]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("warning: ")]
    assert len(err) == 1 and f"table specs {a} and {b} share the name 't'" in err[0], err
    assert "t.tex" in err[0]
    assert not out.exists()
    assert sorted(p.name for p in runs.iterdir()) == ["records"]


def test_two_plot_specs_of_one_name_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = twins(tmp_path, PLOT, "p.toml")
    runs, out = tmp_path / "runs", tmp_path / "plots"
    (runs / "records").mkdir(parents=True)
    data = make_data_root(tmp_path / "data")
    argv = ["plots", str(a), str(b), "--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data)]
    assert main([*argv, "--out", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("warning: ")]
    assert len(err) == 1 and "p.png and p.pdf" in err[0] and str(a) in err[0] and str(b) in err[0]
    assert not out.exists()
