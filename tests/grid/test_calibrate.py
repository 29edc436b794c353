"""A long CPU grid calibrates its estimate on the processor at hand before it plans: the setting is
measured with one process per slot, written as a calibration file of this processor, and every
later estimate of that setting reads it."""

from __future__ import annotations

from pathlib import Path

from harness.config.hardware import cpu_id
from harness.config.run_config import resolve_config
from harness.grid.calibrate import calibrate, stratified_batches, uncalibrated
from harness.grid.calibration import load_calibrations
from harness.grid.cost import CostModel


def test_an_uncalibrated_setting_is_measured_once_and_read_after(data_root: Path, tmp_path: Path) -> None:
    config = resolve_config("simcse", None, "cpu", {"model": "random:tiny"}, data_root=data_root)
    other = config.replace(seed=7)
    model = CostModel(device="cpu")
    builtin = model.source(config)
    assert not builtin.startswith("calibrated")  # the built-in table's
    assert uncalibrated([config, other], model) == [config]  # one per setting
    lines: list[str] = []
    (written,) = calibrate([config], tmp_path / "runs", data_root, slots=1, log=lines.append)
    assert written["device_name"] == cpu_id() and written["threads"] == config.threads
    assert written["step_s"] > 0 and written["probe_s"] > 0 and written["sts_s"]["fp32"] > 0
    assert any(line.startswith("calibration written: ") for line in lines)
    (read,) = load_calibrations(tmp_path / "runs")
    calibrated = CostModel(device="cpu", calibrations=[read])
    assert calibrated.source(config).startswith(f"calibrated on {cpu_id()}")
    assert calibrated.units(config)[0].step_s == written["step_s"]
    assert uncalibrated([config], calibrated) == []
    elsewhere = CostModel(device="cpu", calibrations=[{**read, "device_name": "another processor"}])
    assert elsewhere.source(config) == builtin  # only this processor's


def test_the_sample_is_the_middle_batch_of_each_quarter_of_the_length_sorted_pass() -> None:
    # 20 batches of 2 (the last one short): batches 2, 7, 12 and 17, each as the pass cuts it
    ordered = [f"s{i:02d}" for i in range(39)]
    sample = stratified_batches(ordered, 2, strata=4)
    assert sample == [["s04", "s05"], ["s14", "s15"], ["s24", "s25"], ["s34", "s35"]]
    # fewer batches than strata: all of them
    assert stratified_batches(ordered[:5], 2, strata=4) == [["s00", "s01"], ["s02", "s03"], ["s04"]]
    assert stratified_batches([], 2) == []
