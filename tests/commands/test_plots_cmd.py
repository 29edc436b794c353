"""``harness plots``: the figures of the fixture records, and what they leave out named on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers import filled_store


def test_plots_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, data_root = filled_store(tmp_path)
    runs = store.root
    common = ["--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data_root)]
    assert main(["plots", *common, "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "align_uniform_joint.pdf").is_file()
    # the figures' captions speak only of what they draw: the command names what it left out
    assert "align_uniform_joint: not drawn: Barlow probe" in capsys.readouterr().err
