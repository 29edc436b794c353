"""``harness tables``: LaTeX and the Markdown preview of the fixture records; an unknown spec is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers import SPECS, filled_store


def test_tables_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, data_root = filled_store(tmp_path)
    runs = store.root
    common = ["--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data_root)]
    out = tmp_path / "tables"
    assert main(["tables", str(SPECS / "report_rows.toml"), *common, "--out", str(out)]) == 0
    assert (out / "report_rows.tex").is_file() and (out / "tables.md").is_file()
    capsys.readouterr()
    assert main(["tables", "no_such_table", *common]) == 2
    assert "unknown table spec 'no_such_table'" in capsys.readouterr().err
