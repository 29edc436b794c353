"""Calibration files (harness.grid.plan.calibration_files): named by device, processor, encoder and
precision in safe characters; read from a runs folder, an unreadable or foreign file skipped with one warning.
(A calibration measured and read back: tests/grid/plan/test_calibrate_here.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.grid.plan.calibration_files import CALIBRATION_DIR, KIND, calibration_name, load_calibrations


def calibration(**fields: Any) -> dict[str, Any]:
    return {
        "kind": KIND,
        "device": "cuda",
        "device_name": "NVIDIA H100 80GB HBM3",
        "encoder": "bert-base",
        "precision": "bf16",
        "step_s": 0.05,
        "probe_s": 1.5,
        "sts_s": {"bf16": 12.0},
        **fields,
    }


def test_the_name_is_the_setting_in_safe_characters() -> None:
    assert calibration_name(calibration()) == "cuda-nvidia-h100-80gb-hbm3-bert-base-bf16.json"
    assert calibration_name(calibration(device="cpu", device_name=" AMD EPYC (tm) ")) == (
        "cpu-amd-epyc-tm-bert-base-bf16.json"
    )


def test_a_runs_folder_gives_its_readable_calibrations(tmp_path: Path) -> None:
    assert load_calibrations(tmp_path / "runs") == []  # no folder: none
    folder = tmp_path / "runs" / CALIBRATION_DIR
    folder.mkdir(parents=True)
    good = calibration()
    (folder / calibration_name(good)).write_text(json.dumps(good), encoding="utf-8")
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    for name, bad in (
        ("other.json", {**good, "kind": "something else"}),
        ("zero.json", {**good, "step_s": 0}),
        ("nan.json", {**good, "sts_s": {"bf16": math.nan}}),
        ("untyped.json", {**good, "encoder": None}),
    ):
        (folder / name).write_text(json.dumps(bad), encoding="utf-8")
    with pytest.warns(RuntimeWarning) as caught:
        assert load_calibrations(tmp_path / "runs") == [
            {**good, "file": str(folder / calibration_name(good))}
        ]
    said = sorted(str(w.message) for w in caught)
    assert len(said) == 5 and any("broken.json: unreadable" in s for s in said)
    assert sum("not a harness calibration; skipped" in s for s in said) == 4


def test_older_formats_read_and_a_newer_one_is_refused_in_one_line(tmp_path: Path) -> None:
    """Version 1 (no method steps, no transfer) and 2 read; a newer version is skipped with one
    warning naming it; version 2's optional tables are checked like the rest."""
    folder = tmp_path / CALIBRATION_DIR
    folder.mkdir()
    files = {
        "v1.json": calibration(version=1),
        "unversioned.json": calibration(),
        "v2.json": calibration(
            version=2,
            method_steps={
                "simcse": {"step_s": 0.05, "rows": 2.0},
                "whitenedcse": {"step_s": 0.1, "rows": 3.0},
            },
            transfer_s={"fasttest/fp32": 40.0},
        ),
        "v3.json": calibration(version=3),
        "bad-steps.json": calibration(version=2, method_steps={"simcse": {"step_s": -1.0, "rows": 2.0}}),
        "bad-transfer.json": calibration(version=2, transfer_s={"test/fp32": "slow"}),
    }
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    with pytest.warns(RuntimeWarning) as caught:
        found = {Path(c["file"]).name for c in load_calibrations(tmp_path)}
    assert found == {"v1.json", "unversioned.json", "v2.json"}
    said = [str(w.message) for w in caught]
    assert (
        len(said) == 3 and sum("format version 3, this harness reads 1 to 2; skipped" in s for s in said) == 1
    )
