"""Checks of the values a user types: devices and the arithmetic they can compute, runs folders and
spec paths, each one error line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import harness.config.hardware as hw
from harness.config.inputs import (
    check_arithmetic,
    check_device,
    check_runs_dir,
    check_spec_paths,
)
from harness.errors import ConfigError


def test_what_a_device_cannot_compute_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hw, "native_bf16", lambda device=None: False)  # a CUDA GPU without bf16
    monkeypatch.setattr(hw, "compile_problem", lambda device: None)
    check_arithmetic("cuda", {"precision": "fp16", "eval_precision": "fp32"})
    check_arithmetic("cpu", {"precision": "bf16"})  # a CPU computes it (emulated: the run warns)
    with pytest.raises(ConfigError, match=r"^eval_precision bf16 on cuda:0: this CUDA GPU has no bf16 "):
        check_arithmetic("cuda:0", {"precision": "fp32", "eval_precision": "bf16"})
    monkeypatch.setattr(hw, "compile_problem", lambda device: f"no compiler for {device}")
    check_arithmetic("cpu", {}, None)  # auto: compiled on a GPU only
    check_arithmetic("cuda", {}, False)
    with pytest.raises(ConfigError, match=r"^--compile on: no compiler for cpu; use --compile off$"):
        check_arithmetic("cpu", {}, True)
    with pytest.raises(ConfigError, match=r"^--compile auto \(on a GPU\): no compiler for cuda; use"):
        check_arithmetic("cuda", {}, None)


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
