"""The grid's cost model: run seconds from unit costs, calibration from records (each run counted
once), GPU sharing (the schedule and the printed estimate: test_estimate.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.config.settings import resolve_settings
from harness.evaluation.tasks import sts_sentences
from harness.grid.plan.cost import CostModel, computed_dev_evals, dev_evals_of
from harness.grid.plan.estimate import estimate_lines, hours
from harness.grid.plan.unit_costs import FLOW_FIT_S_PER_SENTENCE
from harness.store.run_config import RunConfig, resolve_config, resolve_run
from tests.helpers import make_record


def cpu(
    data_root: Path, method: str = "simcse", params: dict | None = None, **overrides: object
) -> RunConfig:
    return resolve_config(method, params, "cpu", {"precision": "bf16", **overrides}, data_root=data_root)


def test_dev_evaluations_count_step_zero_every_eval_and_the_last_step() -> None:
    assert dev_evals_of(0, 25) == 1
    assert dev_evals_of(100, 25) == 5
    assert dev_evals_of(40, 25) == 3  # 0, 25, 40
    assert dev_evals_of(1, 25) == 2


def test_run_seconds_scale_with_encoder_rows_and_parts(data_root: Path) -> None:
    model = CostModel()
    simcse = cpu(data_root)
    base = model.run_seconds(simcse)
    units, _ = model.units(simcse)
    # training 100 steps + 4 dev evaluations (step 0's comes from the store's cache) + one fp32 STS pass
    assert base == pytest.approx(100 * units.step_s + 4 * units.dev_eval_s("bf16") + units.sts_s["fp32"])
    m3 = model.run_seconds(cpu(data_root, "whitenedcse", {"num_positives": 3}))
    assert m3 - base == pytest.approx(100 * units.step_s * 0.5, rel=1e-6)  # 3 rows instead of 2
    faster_final = model.run_seconds(cpu(data_root, eval_precision="bf16"))
    assert base - faster_final == pytest.approx(units.sts_s["fp32"] - units.sts_s["bf16"])
    untrained = model.run_seconds(cpu(data_root, max_steps=0))
    assert untrained == pytest.approx(units.dev_eval_s("bf16") + units.sts_s["fp32"])


def test_post_processing_adds_its_embedding_and_a_flow_its_fit(data_root: Path) -> None:
    model = CostModel()
    plain = cpu(data_root, max_steps=0)
    units, _ = model.units(plain)
    embedding = units.sts_s["fp32"] * plain.post_whiten_sentences / sts_sentences()
    whitened = model.run_seconds(cpu(data_root, max_steps=0, post_whiten="pca"))
    assert whitened - model.run_seconds(plain) == pytest.approx(embedding)
    for kind in ("flow", "flow_glow"):
        flowed = model.run_seconds(cpu(data_root, max_steps=0, post_whiten=kind, post_whiten_sentences=5000))
        fit = FLOW_FIT_S_PER_SENTENCE * 5000
        assert flowed - model.run_seconds(plain) == pytest.approx(embedding / 2 + fit)


def test_the_step0_dev_evaluation_is_shared_except_with_the_cls_pooler(data_root: Path) -> None:
    from harness.grid.plan.cost import computed_dev_evals, shares_step0_dev_eval

    simcse = cpu(data_root)
    assert shares_step0_dev_eval(simcse) and computed_dev_evals(simcse, 100) == 4
    cls = simcse.replace(eval_pooler="cls")  # step 0 holds the seed's fresh head: not shared
    assert not shares_step0_dev_eval(cls) and computed_dev_evals(cls, 100) == 5
    untrained = simcse.replace(max_steps=0)
    assert not shares_step0_dev_eval(untrained) and computed_dev_evals(untrained, 0) == 1
    model = CostModel()
    dev_eval = model.units(simcse)[0].dev_eval_s("bf16")
    assert model.run_seconds(cls) - model.run_seconds(simcse) == pytest.approx(dev_eval)


def _timed_record(config: RunConfig, train: float, eval_s: float, final: float, steps: int = 100) -> dict:
    """A finished record of ``steps`` steps on a CPU that took these times to train, evaluate and score."""
    return make_record(
        config,
        provenance={"device": "cpu"},
        trajectory=[{"step": s} for s in range(0, steps + 1, config.eval_every)],
        train_time_s=train,
        eval_time_s=eval_s,
        final_time_s=final,
    )


def test_finished_records_calibrate_the_units_of_matching_runs(data_root: Path) -> None:
    simcse = cpu(data_root)
    records = [
        _timed_record(simcse.replace(seed=s), train=50.0 + s - 42, eval_s=70.0, final=50.0)
        for s in (42, 43, 44)
    ]
    records.append({**records[0], "status": "failed", "train_time_s": 1e6})  # ignored
    model = CostModel(records)
    units, dev_eval = model.units(simcse)
    assert units.step_s == pytest.approx(0.51)  # median of 0.50, 0.51, 0.52 s per step
    assert units.sts_s["fp32"] == pytest.approx(50.0)
    assert dev_eval == pytest.approx(20.0 / 5)
    assert "calibrated from 3 finished run(s)" in model.source(simcse)
    # a WhitenedCSE m=3 run on the same machine settings uses SimCSE's step, scaled by its rows
    m3 = cpu(data_root, "whitenedcse", {"num_positives": 3})
    assert model.run_seconds(m3) == pytest.approx(100 * 0.51 * 1.5 + 4 * 4.0 + 50.0)
    # a record whose step-0 dev evaluation came from the cache computed 4 in its evaluation time
    cached = [{**r, "eval_time_s": 66.0, "step0_probe_cached": True} for r in records[:3]]
    assert CostModel(cached).units(simcse)[1] == pytest.approx(16.0 / 4)
    # another precision is another machine setting: not calibrated by these records
    assert "calibrated" not in model.source(cpu(data_root, precision="fp32"))


def test_transfer_is_embedding_plus_fits_until_runs_measure_it(data_root: Path) -> None:
    from harness.grid.plan.unit_costs import TRANSFER_FIT_S, TRANSFER_PER_STS

    model = CostModel()
    sts_only = cpu(data_root, eval_precision="bf16")
    both = cpu(data_root, eval_precision="bf16", final_tasks="all", transfer_mode="fasttest")
    units, _ = model.units(both)
    derived = TRANSFER_PER_STS * units.sts_s["bf16"] + TRANSFER_FIT_S["fasttest"]
    assert model.run_seconds(both) - model.run_seconds(sts_only) == pytest.approx(derived)
    # fp32 embedding costs what fp32 STS passes cost; test mode's fits are the measured 454.8 s
    test_fp32 = cpu(data_root, final_tasks="transfer", transfer_mode="test")
    assert model.units(test_fp32)[0].transfer("test", "fp32") == pytest.approx(
        TRANSFER_PER_STS * units.sts_s["fp32"] + 454.8
    )
    # records that time their final pass per task group calibrate STS and transfer separately,
    # also for runs that score both ("all"); the total alone says nothing about either part
    records = [
        {
            **_timed_record(both.replace(seed=s), 50.0, 400.0, 340.0),
            "final_seconds": {"sts": 30.0, "transfer": t},
        }
        for s, t in ((42, 300.0), (43, 310.0), (44, 320.0))
    ]
    calibrated = CostModel(records)
    units, _ = calibrated.units(both)
    assert units.sts_s["bf16"] == pytest.approx(30.0)
    assert units.transfer("fasttest", "bf16") == pytest.approx(310.0)
    assert units.transfer("test", "bf16") == pytest.approx(TRANSFER_PER_STS * 30.0 + 454.8)  # not measured
    older = [{k: v for k, v in r.items() if k != "final_seconds"} for r in records]
    units, _ = CostModel(older).units(both)
    builtin = CostModel().units(both)[0].sts_s["bf16"]
    assert dict(units.transfer_s) == {} and units.sts_s["bf16"] == pytest.approx(builtin) != 30.0


def test_gpu_sharing_follows_the_measured_throughput(data_root: Path) -> None:
    from harness.grid.plan.unit_costs import sharing_slowdown

    assert sharing_slowdown("bert-base-uncased", 1) == 1.0
    assert sharing_slowdown("bert-base-uncased", 4) == pytest.approx(4 * 14.8 / 49.4)
    assert sharing_slowdown("bert-base-uncased", 2) < 1.0  # two small-kernel trials overlap
    config = resolve_run(
        "simcse", None, resolve_settings("paper", {"precision": "bf16"}, require_corpus=False)
    )
    alone, shared = CostModel(device="cuda"), CostModel(device="cuda", trials_per_gpu=4)
    assert shared.run_seconds(config) > alone.run_seconds(config)
    lines = estimate_lines([(config, ["t: a"])] * 8, shared, local_slots=4)
    assert (
        lines[0].startswith("estimate: no calibration for the GPU")
        and "4 trials sharing each GPU" in lines[1]
    )
    # 8 runs, 4 per GPU: one GPU takes two rounds
    assert f"1 GPU(s) {hours(2 * shared.run_seconds(config))} (here)" in lines[-2]
    assert CostModel(device="cpu", trials_per_gpu=4).trials_per_gpu == 1


def test_unmeasured_encoders_scale_a_measured_one_by_size(data_root: Path) -> None:
    base = resolve_run("simcse", None, resolve_settings("paper", {"precision": "bf16"}, require_corpus=False))
    large = base.replace(model="bert-large-uncased")
    model = CostModel(device="cuda")
    ratio = model.units(large)[0].step_s / model.units(base)[0].step_s
    assert ratio == pytest.approx(24 * 1024**2 / (12 * 768**2))
    assert "x 3.56 (encoder size)" in model.source(large)


def test_records_of_this_cpu_calibrate_alone_where_there_are_some(data_root: Path) -> None:
    simcse = cpu(data_root)

    def on(cpu_id: str | None, train: float, seed: int) -> dict:
        record = _timed_record(simcse.replace(seed=seed), train=train, eval_s=70.0, final=50.0)
        if cpu_id is not None:
            record["provenance"] = {"device": "cpu", "cpu_id": cpu_id}
        return record

    zen4, other = "family 25 model 17 stepping 1", "family 26 model 2 stepping 0"
    records = [on(other, 50.0, 42), on(None, 50.0, 43), on(zen4, 90.0, 44), on(zen4, 92.0, 45)]
    here = CostModel(records, cpu_id=zen4)
    assert here.units(simcse)[0].step_s == pytest.approx(0.91)  # this CPU's two runs only
    assert "calibrated from 2 finished run(s) on this CPU" in here.source(simcse)
    # a CPU no record names (or one that lists no id) calibrates from all of them, as before
    for elsewhere in (
        CostModel(records, cpu_id="family 23 model 49 stepping 0"),
        CostModel(records, cpu_id=""),
    ):
        assert elsewhere.units(simcse)[0].step_s == pytest.approx(0.70)  # median of 0.5, 0.5, 0.9, 0.92
        assert "calibrated from 4 finished run(s) in the store" in elsewhere.source(simcse)


def test_the_cost_model_counts_each_run_once() -> None:
    record = {"run_id": "r-1", "status": "finished"}
    seen: list[str] = []

    class Counting(CostModel):
        def _add(self, rec: Any) -> None:
            seen.append(rec["run_id"])

    Counting([record, dict(record)])
    assert seen == ["r-1"]


H100 = "NVIDIA H100 80GB HBM3"


def _gpu_calibration(runs: Path, device_name: str = H100, **fields: Any) -> Path:
    """A calibration file as ``benchmarks/gpu_check.py`` writes it (format 2) for ``device_name``."""
    from harness.atomic import write_json
    from harness.grid.plan.calibration_files import CALIBRATION_DIR, calibration_name

    calibration = {
        "kind": "harness-calibration",
        "version": 2,
        "device": "cuda",
        "device_name": device_name,
        "threads": None,
        "encoder": "bert-base",
        "precision": "bf16",
        "compiled": True,
        "batch_size": 64,
        "max_length": 32,
        "step_s": 0.02,
        "probe_s": 0.4,
        "sts_s": {"fp32": 5.0},
        "transfer_s": {"test/fp32": 60.0},
        "method_steps": {
            "simcse": {"step_s": 0.05, "rows": 2.0},
            "whitenedcse": {"step_s": 0.15, "rows": 3.0},
        },
        "trials_slowdown": {"1": 1.0, "2": 1.5},
        "measured_at": "2026-11-27T22:00:00+00:00",
        "source": "benchmarks/gpu_check.py",
        **fields,
    }
    return write_json(runs / CALIBRATION_DIR / calibration_name(calibration), calibration)


def _paper(method: str = "simcse", params: dict | None = None, **overrides: object) -> RunConfig:
    settings = resolve_settings(
        "paper", {"precision": "bf16", "max_steps": 1000, **overrides}, require_corpus=False
    )
    return resolve_run(method, params, settings)


def test_a_calibration_of_the_device_prices_every_part_and_is_named(tmp_path: Path) -> None:
    from harness.grid.plan.calibration_files import load_calibrations

    path = _gpu_calibration(tmp_path)
    model = CostModel(device="cuda", device_name=H100, calibrations=load_calibrations(tmp_path))
    simcse = _paper(final_tasks="all")
    units, dev_eval = model.units(simcse)
    assert units.calibrated and dev_eval == 0.4 and units.transfer("test", "fp32") == 60.0
    assert units.source.startswith(f"calibrated on {H100} (2026-11-27, benchmarks/gpu_check.py; {path})")
    dev_evals = computed_dev_evals(simcse, 1000)
    assert model.run_seconds(simcse) == pytest.approx(1000 * 0.02 + dev_evals * 0.4 + 5.0 + 60.0)
    # WhitenedCSE: SimCSE's step times the measured 3x, scaled from the 3 rows measured to its own
    whitened = _paper("whitenedcse", {"num_positives": 4}, final_tasks="sts")
    rows = model.run_seconds(whitened) - dev_evals * 0.4 - 5.0
    assert rows == pytest.approx(1000 * 0.02 * 3.0 * 4.0 / 3.0)
    # two trials sharing the GPU: the device's measured 1.5x, not the built-in H100's
    shared = CostModel(
        device="cuda", device_name=H100, trials_per_gpu=2, calibrations=load_calibrations(tmp_path)
    )
    assert shared.run_seconds(_paper(final_tasks="none")) == pytest.approx(
        1.5 * model.run_seconds(_paper(final_tasks="none"))
    )
    lines = estimate_lines([(simcse, ["t: a"])], model, local_slots=1)
    assert lines[0].startswith("estimate (GPU-hours") and lines[-1] == f"  unit costs: {units.source}"
    # bert-large on the same GPU: its bert-base calibration scaled by encoder size, still this device's
    large, _ = model.units(simcse.replace(model="bert-large-uncased"))
    assert large.calibrated and large.step_s == pytest.approx(0.02 * 24 * 1024**2 / (12 * 768**2))
    assert large.source.startswith(f"calibrated on {H100} for bert-base, x 3.56 (encoder size)")


def test_an_estimate_for_a_device_without_calibration_says_so_first(tmp_path: Path) -> None:
    """Another GPU's file is not this one's: the first line names the device and where it looked,
    and the costs below are the built-in table's, marked so; no GPU visible: any GPU's, named."""
    from harness.grid.plan.calibration_files import load_calibrations

    _gpu_calibration(tmp_path)
    found = load_calibrations(tmp_path)
    config = _paper()
    h200 = CostModel(
        device="cuda", device_name="NVIDIA H200", calibrations=found, calibration_dir="runs/calibration"
    )
    lines = estimate_lines([(config, ["t: a"])], h200, local_slots=1)
    assert lines[0] == (
        "estimate: no calibration for NVIDIA H200 in runs/calibration (`make gpu-check` on it writes one): "
        "1 unit cost(s) below are other machines' numbers, not this device's"
    )
    assert not h200.units(config)[0].calibrated and H100 not in "\n".join(lines)
    unseen = CostModel(device="cuda", calibrations=found)
    assert unseen.uncalibrated_line([config]) is None and unseen.source(config).startswith(
        f"calibrated on {H100}"
    )
    cpu_model = CostModel(device="cpu", cpu_id="Some CPU (family 1)")
    line = cpu_model.uncalibrated_line([config.replace(precision="fp32")])
    assert line is not None and line.startswith(
        "estimate: no calibration for this processor (Some CPU (family 1))"
    )


def test_a_compiled_run_s_first_step_is_priced_once_not_in_every_step(data_root: Path) -> None:
    # a record that timed its first step apart (compilation, warm-up): its steady step is the rest
    simcse = cpu(data_root)
    records = [
        {**_timed_record(simcse.replace(seed=s), train=80.0, eval_s=70.0, final=50.0), "first_step_s": f}
        for s, f in ((42, 29.0), (43, 30.0), (44, 31.0))
    ]
    model = CostModel(records)
    units, dev_eval = model.units(simcse)
    assert units.step_s == pytest.approx(0.50) and units.first_step_s == pytest.approx(30.0)
    assert dev_eval == pytest.approx(20.0 / 5)
    assert model.run_seconds(simcse) == pytest.approx(100 * 0.50 + 4 * 4.0 + 30.0 + 50.0)
    # a calibration file's first step, likewise once per run
    calibration = {
        "kind": "harness-calibration",
        "device": "cuda",
        "device_name": "a GPU",
        "encoder": "bert-base",
        "precision": "tf32",
        "batch_size": 64,
        "max_length": 32,
        "step_s": 0.02,
        "first_step_s": 40.0,
        "probe_s": 0.5,
        "sts_s": {"fp32": 2.0},
        "measured_at": "2026-11-28",
    }
    gpu = CostModel(device="cuda", calibrations=[calibration])
    paper = resolve_config(
        "simcse",
        None,
        "paper",
        {"max_steps": 1000, "final_tasks": "sts", "corpus": "corpus/nli-sentences.txt"},
        data_root=data_root,
    )
    assert gpu.units(paper)[0].first_step_s == pytest.approx(40.0)
    without = CostModel(device="cuda", calibrations=[{**calibration, "first_step_s": None}])
    assert gpu.run_seconds(paper) - without.run_seconds(paper) == pytest.approx(40.0)


def test_a_run_s_parts_add_up_to_its_estimate(data_root: Path) -> None:
    config = cpu(data_root, final_tasks="all", transfer_mode="fasttest", post_whiten="zca")
    model = CostModel()
    parts = model.run_parts(config)
    assert set(parts) == {"training", "probes", "final", "post"} and min(parts.values()) > 0
    assert sum(parts.values()) == pytest.approx(model.run_seconds(config))
    units, _ = model.units(config)
    steps = model.steps(config)
    assert parts["probes"] == pytest.approx(
        computed_dev_evals(config, steps) * units.dev_eval_s(config.precision)
    )
    sts_only = model.run_parts(config.replace(final_tasks="sts", post_whiten="none"))
    assert sts_only["post"] == 0 and sts_only["final"] < parts["final"]


def test_an_unmeasured_encoder_on_a_gpu_scales_that_gpu_s_costs_at_any_precision(data_root: Path) -> None:
    # the paper profile trains in tf32, which the built-in table has no row of: a bert-large run was
    # priced from the CPU's MiniLM costs (a 55 s step, 331 GPU-hours for one run)
    model = CostModel(device="cuda")
    for precision in ("tf32", "fp32", "bf16"):
        large = resolve_config(
            "simcse",
            None,
            "paper",
            {"model": "bert-large-uncased", "precision": precision, "corpus": "corpus/nli-sentences.txt"},
            data_root=data_root,
        )
        base = large.replace(model="bert-base-uncased")
        assert "on cuda" in model.source(large) and "cpu" not in model.source(large)
        ratio = model.units(large)[0].step_s / model.units(base)[0].step_s
        assert 1 < ratio < 10  # bert-large against bert-base, on the same device
