"""Calibration files (harness.grid.calibration): named by device, processor, encoder and precision in
safe characters; read from a runs folder, an unreadable or foreign file skipped with one warning.
(A calibration measured and read back: tests/grid/test_calibrate.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.grid.calibration import CALIBRATION_DIR, KIND, calibration_name, load_calibrations


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
        assert load_calibrations(tmp_path / "runs") == [good]
    said = sorted(str(w.message) for w in caught)
    assert len(said) == 5 and any("broken.json: unreadable" in s for s in said)
    assert sum("not a harness calibration; skipped" in s for s in said) == 4
