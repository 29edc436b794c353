"""Checks of the values a user types: numbers that are not finite, devices, runs folders and spec
paths, each one error line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from harness.config.inputs import (
    check_device,
    check_runs_dir,
    check_spec_paths,
)
from harness.errors import ConfigError


def test_finite_check_helpers() -> None:
    from harness.config.inputs import check_finite_overrides

    check_finite_overrides({"a": 1.0, "b": "text", "c": "3e-5", "d": None}, "x")
    for bad in (math.inf, -math.inf, math.nan, "inf", "-Infinity", "NaN", "1e999"):
        with pytest.raises(Exception, match="must be finite"):
            check_finite_overrides({"k": bad}, "x")


def test_devices_are_ones_torch_knows_and_this_machine_has(monkeypatch: pytest.MonkeyPatch) -> None:
    check_device(None)
    check_device("cpu")
    with pytest.raises(ConfigError, match=r"^--device 'gpu0' is not a torch device"):
        check_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"^--device cuda: no CUDA GPU is available here"):
        check_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_device("cuda:1")
    with pytest.raises(
        ConfigError, match=r"^--device cuda:2: this machine has 2 CUDA GPU\(s\) \(cuda:0\.\.cuda:1\)$"
    ):
        check_device("cuda:2")


def test_a_runs_folder_a_report_reads_must_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=r"does not exist .*nothing written"):
        check_runs_dir(tmp_path / "rnus")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_runs_dir(tmp_path / "a_file")
    runs = tmp_path / "runs"
    (runs / "records").mkdir(parents=True)
    assert check_runs_dir(runs) == runs
    assert "holds no run records" in capsys.readouterr().err
    (runs / "records" / "r1.json").write_text("{}")
    assert check_runs_dir(str(runs)) == runs
    assert capsys.readouterr().err == ""


def test_a_spec_path_must_be_a_utf8_file(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('title = "Ünïcode"\n', encoding="utf-8")
    check_spec_paths([str(good), "whitenedcse_table3", str(tmp_path / "missing.toml")])
    with pytest.raises(ConfigError, match=r"is a folder, not a \.toml file"):
        check_spec_paths([str(tmp_path)])
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'title = "gr\xeed"\n')
    with pytest.raises(ConfigError, match=rf"^table spec {latin} is not valid UTF-8 \(byte 11, line 1\)$"):
        check_spec_paths([str(latin)])
