"""``make gpu-check`` works the first time a GPU comes: the same script on this CPU with the tiny model
runs every stage, writes its numbers and a calibration file, and the grid's cost model reads it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.config.hardware import cpu_id
from harness.evaluation.transfer import TRANSFER_TASKS
from harness.grid.plan.calibration_files import load_calibrations
from harness.grid.plan.cost import CostModel
from harness.store.run_config import resolve_config
from tests.helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import gpu_check


def test_the_gpu_check_runs_on_the_cpu_and_calibrates_the_cost_model(
    data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["--device", "cpu", "--model", "random:tiny", "--steps", "4", "--bench-steps", "2"]
    argv += ["--transfer-mode", "fasttest", "--transfer-limit", "60"]
    argv += ["--methods", "simcse,simcsepp", "--final-tasks", "sts"]
    argv += ["--proxy-methods", "whitenedcse", "--proxy-settings"]  # every method: tests/run/test_step.py
    argv += ["--precision-steps", "3"]
    code = gpu_check.main([*argv, "--out", str(out), "--runs-dir", str(runs), "--data-dir", str(data_root)])
    assert code == 0, capsys.readouterr().err
    result = json.loads((out / "gpu_check.json").read_text())
    stages = result["stages"]
    assert set(stages) >= {"matmul peak", "step flops", "step against sentence-transformers", "proxies"}
    assert not [name for name, numbers in stages.items() if "error" in numbers]
    assert stages["step flops"]["tflop_per_step"] > 0
    proxies = stages["proxies"]
    assert proxies["compiled"]["graph_breaks"] == 0 and proxies["compiled"]["host_reads_per_step"] == 0
    assert proxies["compiled"]["aten_ops_per_step"] < proxies["eager"]["aten_ops_per_step"]
    per_method = stages["proxies per method"]["methods"]
    assert set(per_method) == {"whitenedcse num_groups=128", "whitenedcse whitening=zca,num_positives=2"}
    for row in per_method.values():  # only torch.linalg.eigh's own status read is left
        assert row["host_reads_per_step"] <= 2 and row["read_sites"].endswith(": _finite_eigh")
    trial = stages["paper-profile trial"]
    assert trial["status"] == "finished" and trial["compiled"] is True and trial["sts_s"] > 0
    assert result["achieved"]["share_of_peak"] > 0
    assert stages["probe"]["fp32"]["run_s"] > 0 and stages["probe"]["fp32"]["before_s"] > 0
    assert set(stages["precision losses"]["against_fp32"]) == {"bf16"}  # a CPU: fp32 and bf16
    assert len(json.loads((out / "precision_losses.json").read_text())["losses"]["bf16"]) == 3
    transfer = stages["transfer"]
    assert transfer["classify_s"] > 0 and set(transfer["accuracies"]) == {*TRANSFER_TASKS, "avg"}
    # what the estimates need first, the longest stage last: a short loan still leaves a calibration
    order = [name for name in stages if name in ("paper-profile trial", "calibration", "probe", "transfer")]
    assert order == ["paper-profile trial", "calibration", "probe", "transfer"]
    assert trial["first_step_s"] > 0 and trial["probe_s"] > 0

    (calibration,) = load_calibrations(runs)  # one precision on a CPU: the trial's, fp32
    assert calibration["device"] == "cpu" and calibration["step_s"] == pytest.approx(
        result["achieved"]["step_ms"] / 1000
    )
    assert calibration["version"] == 2 and result["calibration"] == [calibration["file"]]
    assert calibration["first_step_s"] == trial["first_step_s"]
    steps = calibration["method_steps"]
    assert set(steps) == {"simcse", "simcsepp"} and steps["simcse"]["rows"] == 2.0
    assert all(s["step_s"] > 0 for s in steps.values()) and steps["simcsepp"]["rows"] >= 2.0
    config = resolve_config(
        "simcse",
        None,
        "cpu",
        {"model": "random:tiny", "precision": "fp32", "threads": "none"},
        data_root=data_root,
    )
    model = CostModel(device="cpu", calibrations=[calibration])
    units, dev_eval = model.units(config)
    assert units.source.startswith(f"calibrated on {cpu_id()}") and "gpu_check.py" in units.source
    assert units.step_s == calibration["step_s"] and dev_eval == calibration["probe_s"]
    assert units.sts_s["fp32"] == calibration["sts_s"]["fp32"]
    assert CostModel(device="cuda", calibrations=[calibration]).units(config)[0].source != units.source


@pytest.mark.slow
def test_the_night_rehearsal_runs_a_grid_estimates_it_and_renders_its_table(
    data_root: Path, tmp_path: Path
) -> None:
    # what the stage does on a GPU, here with one thread per trial: the estimate made with the
    # calibration beside it, the grid through Ray, its runs' own seconds, the table rendered
    runs = tmp_path / "runs"
    args = gpu_check.parse_args(
        ["--device", "cpu", "--model", "random:tiny", "--steps", "2", "--data-dir", str(data_root)]
    )
    result = gpu_check.rehearsal(args, runs)
    assert result["grid_exit"] == 0 and result["runs"] == result["finished"] == 6
    assert result["estimate_s"] > 0 and result["wall_s"] > 0 and result["slots"] >= 1
    methods = {run["method"] for run in result["per_run"].values()}
    assert {"simcse", "whitenedcse", "simcsepp", "noise_probe", "barlow_probe"} == methods
    for run in result["per_run"].values():
        assert run["status"] == "finished" and run["wall_s"] > 0 and run["first_step_s"] > 0
    assert set(result["estimate_parts_s"]) >= set(result["measured_parts_s"])
    assert all(v > 0 for v in result["measured_parts_s"].values())
    assert result["tables_exit"] == 0 and "rehearsal.tex" in result["tables"]
    paper = result["paper_grid"]  # the one-seed paper grid, by the same cost model
    assert paper["runs"] > 50 and paper["CPU-trial_hours"] > 0
    assert sum(paper["parts_s"].values()) > 0
