"""A long CPU grid calibrates its estimate on the processor at hand before it plans: the setting is
measured with one process per slot, written as a calibration file of this processor, and every
later estimate of that setting reads it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config.hardware import cpu_id
from harness.errors import HarnessError
from harness.grid.plan.calibrate_here import calibrate, stratified_batches, uncalibrated
from harness.grid.plan.calibration_files import load_calibrations
from harness.grid.plan.cost import CostModel
from harness.store.run_config import resolve_config
from tests.helpers import REPO_ROOT
from tests.processes import session_pids


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


def _computing(sid: int) -> list[int]:
    """Processes of session ``sid`` other than its leader that have loaded torch (past their start)."""
    out = []
    for pid in session_pids(sid):
        with contextlib.suppress(OSError):
            if pid != sid and "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text():
                out.append(pid)
    return out


def test_a_driver_killed_while_it_calibrates_leaves_no_process(data_root: Path, tmp_path: Path) -> None:
    """The calibration's processes end with the driver: nothing keeps computing for a dead grid."""
    script = (
        "from pathlib import Path; from harness.store.run_config import resolve_config; "
        "from harness.grid.plan.calibrate_here import calibrate; "
        f"root = Path({str(data_root)!r}); "
        "config = resolve_config('simcse', None, 'cpu', {'model': 'random:tiny'}, data_root=root); "
        f"calibrate([config], Path({str(tmp_path / 'runs')!r}), root, slots=2)"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(_computing(driver.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_computing(driver.pid)) == 2, "the two calibration processes did not start"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        time.sleep(0.5)
        # Frozen now, a helper that had not ended with the driver would never end (a multiprocessing
        # pool's workers and resource tracker notice a dead parent only later, by themselves).
        for pid in session_pids(driver.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        time.sleep(1.0)
        assert session_pids(driver.pid) == []
    finally:
        for pid in session_pids(driver.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert not list((tmp_path / "runs").rglob("*.json"))  # killed before it wrote anything


def test_a_failed_calibration_process_is_one_line(data_root: Path, tmp_path: Path) -> None:
    config = resolve_config("simcse", None, "cpu", {"model": "random:tiny"}, data_root=data_root)
    with pytest.raises(HarnessError, match=r"^calibrating the estimate failed: .*senteval"):
        calibrate([config], tmp_path / "runs", tmp_path / "no-data", slots=1, log=lambda _: None)


def test_each_method_step_is_timed_on_the_encoder_s_device(
    data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on a GPU the heads stayed on the CPU and every method's step failed (a gpu-check in docs/gpu/):
    # the method must be moved where the encoder is, which on this CPU only a record of the move shows
    import methods
    from harness.grid.plan.calibrate_here import measure_parts

    moved: list[tuple[str, str]] = []
    real = methods.get_method

    def recording(name: str) -> type:
        cls = real(name)

        class Recorded(cls):  # type: ignore[valid-type, misc]
            def to(self, *args: object, **kwargs: object) -> object:
                moved.append((name, str(args[0] if args else kwargs.get("device"))))
                return super().to(*args, **kwargs)

        return Recorded

    monkeypatch.setattr(methods, "get_method", recording)
    config = resolve_config("simcse", None, "cpu", {"model": "random:tiny"}, data_root=data_root)
    parts = measure_parts(config, data_root, "cpu", methods=["whitenedcse"])
    assert set(parts["method_steps"]) == {"simcse", "whitenedcse"}
    assert moved == [("simcse", "cpu"), ("whitenedcse", "cpu")]
