"""Calibrating a CPU grid's estimate on the machine at hand, before it plans.

The built-in unit costs (:mod:`harness.grid.plan.cost`) were measured on one processor; two processors
sold under one name ran this project's steps 1.8x apart, so a first estimate from them can be far
off. Before a long CPU grid starts, when its store holds no finished records of this processor for
a setting and no calibration file of it, the grid measures that setting here: as many processes as
the grid has slots run at once (each trial runs beside the others), each with the setting's threads,
timing a few SimCSE steps of the setting's encoder, batch, length and precision on corpus sentences,
and embedding STS-B's test sentences as the evaluation does (sorted by length, in its batches). The
result is a calibration file (:mod:`harness.grid.plan.calibration_files`) of this processor, which every later
estimate reads; finished records still come first.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import write_json
from harness.config.hardware import cpu_id
from harness.errors import HarnessError
from harness.grid.plan.calibration_files import CALIBRATION_DIR, calibration_name
from harness.grid.plan.cost import CostModel, step_rows
from harness.grid.plan.unit_costs import encoder_class
from harness.store.provenance import now_iso
from harness.store.run_config import RunConfig

WORKER = (
    "import sys; from harness.parent_death import die_with_parent; die_with_parent(int(sys.argv[4])); "
    "from harness.grid.plan.calibrate_here import worker_main; worker_main(sys.argv[1:4])"
)
"""What each calibration process runs (``python -c``): bound to its parent before the heavy imports."""
STEPS = 3
"""Timed steps per process (after one untimed)."""
STRATA = 4
"""Batches of the STS-B test pass each process embeds per evaluation precision: the middle batch of
each quarter of the pass, so the sample pads and costs as the whole pass does (the alphabetically
first 384 sentences, sorted among themselves, padded more and put the Zen 4's final pass at 1.47x)."""
MIN_GRID_S = 300.0
"""A grid whose built-in estimate is shorter runs uncalibrated (measuring costs ~20 s); `make run`'s
demo grid (about 7 min by the built-in costs, 11 min on the Zen 4) is calibrated."""


def uncalibrated(configs: Sequence[RunConfig], model: CostModel) -> list[RunConfig]:
    """One config per CPU setting (encoder class, precision, batch, length, threads) whose unit costs
    come from the built-in table: neither this processor's records nor a calibration file of it."""
    out: dict[tuple[Any, ...], RunConfig] = {}
    for config in configs:
        if model.device != "cpu" or model.units(config)[0].calibrated:
            continue
        key = (
            encoder_class(config.model),
            config.precision,
            config.batch_size,
            config.max_length,
            config.threads,
        )
        out.setdefault(key, config)
    return list(out.values())


def calibrate(
    configs: Sequence[RunConfig],
    runs_dir: Path,
    data_root: Path,
    slots: int,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Measure each config's setting with ``slots`` processes at once; write and return the files."""
    written = []
    for config in configs:
        processes = max(1, slots)
        log(
            f"calibrating the estimate on this processor: {config.model}, {config.precision}, "
            f"{processes} trial(s) at once (once per processor and setting)"
        )
        rows = _measure_in_processes(config, data_root, processes)
        calibration = {
            "kind": "harness-calibration",
            "version": 1,
            "device": "cpu",
            "device_name": cpu_id(),
            "encoder": encoder_class(config.model),
            "precision": config.precision,
            "batch_size": config.batch_size,
            "max_length": config.max_length,
            "threads": config.threads,
            "neighbours": processes - 1,
            "step_s": statistics.median(r["step_s"] for r in rows),
            "probe_s": statistics.median(r["probe_s"] for r in rows),
            "sts_s": {p: statistics.median(r["sts_s"][p] for r in rows) for p in rows[0]["sts_s"]},
            "measured_at": now_iso(),
            "source": "harness grid's calibration (harness/grid/plan/calibrate_here.py)",
        }
        path = write_json(runs_dir / CALIBRATION_DIR / calibration_name(calibration), calibration, indent=2)
        log(f"calibration written: {path}")
        written.append(calibration)
    return written


def _measure_in_processes(config: RunConfig, data_root: Path, processes: int) -> list[dict[str, Any]]:
    """Run :func:`_measure` in ``processes`` fresh Python processes at once; their results.

    Plain child processes (not a multiprocessing pool, whose resource tracker outlives a SIGKILLed
    parent): each ends with this process (:func:`harness.parent_death.die_with_parent`), so a driver
    killed while it calibrates leaves nothing running.
    """
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    with tempfile.TemporaryDirectory(prefix="harness-calibrate-") as tmp:
        config_file = Path(tmp) / "config.json"
        write_json(config_file, config.to_dict())
        outputs = [Path(tmp) / f"result-{i}.json" for i in range(processes)]
        logs = [Path(tmp) / f"stderr-{i}.txt" for i in range(processes)]
        children = []
        try:
            for out, log in zip(outputs, logs, strict=True):
                with log.open("w", encoding="utf-8") as stderr:  # a file: no pipe to fill and block on
                    children.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-c",
                                WORKER,
                                str(config_file),
                                str(data_root),
                                str(out),
                                str(os.getpid()),
                            ],
                            env=env,
                            stdout=subprocess.DEVNULL,
                            stderr=stderr,
                        )
                    )
            for child in children:
                child.wait()
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
        for child, log, out in zip(children, logs, outputs, strict=True):
            if child.returncode != 0 or not out.exists():
                last = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
                raise HarnessError(
                    f"calibrating the estimate failed: {(last or [f'exit code {child.returncode}'])[0]}"
                )
        return [json.loads(out.read_text(encoding="utf-8")) for out in outputs]


def _measure(config_dict: dict[str, Any], data_root: str) -> dict[str, Any]:
    """In a fresh process: the setting's step, dev evaluation and final STS pass, extrapolated from
    samples."""
    return measure_parts(RunConfig.from_dict(config_dict), Path(data_root))


def measure_parts(
    config: RunConfig, data_root: Path, device: str = "cpu", methods: Sequence[str] = ()
) -> dict[str, Any]:
    """The setting's SimCSE step, dev evaluation and final STS pass (fp32 and bf16) on ``device``, each
    extrapolated from samples; with ``methods``, each one's step at its default parameters and the
    encoder rows it computes (``method_steps``, SimCSE's among them), timed alike."""
    import torch

    from harness.encoder.loading import load_encoder
    from harness.evaluation.runner import encoder_functions
    from harness.evaluation.sts import BATCH_SIZE, distinct_by_length, read_stsb
    from harness.evaluation.tasks import STSB_DEV_EVAL, sts_sentences

    if config.threads is not None:
        torch.set_num_threads(config.threads)
    encoder = load_encoder(config.model, device, seed=config.seed)
    method_steps = {}
    for name in dict.fromkeys(["simcse", *methods]):
        try:
            setting = config.replace(method=name, params={})
            method_steps[name] = {"step_s": _step_seconds(encoder, setting), "rows": step_rows(setting)}
        except Exception as exc:  # one method that cannot run here leaves the others measured
            if name == "simcse":
                raise
            print(f"calibration: {name}'s step not measured: {type(exc).__name__}: {exc}", file=sys.stderr)
    senteval = Path(data_root) / "senteval"
    test = read_stsb(senteval, "test")
    _, token_lengths = encoder_functions(encoder, config.eval_pooler)
    sample = stratified_batches(distinct_by_length([*test.sent1, *test.sent2], token_lengths), BATCH_SIZE)
    rate = {p: _seconds_per_sentence(encoder, config.eval_pooler, p, sample) for p in ("fp32", "bf16")}
    dev = read_stsb(senteval, STSB_DEV_EVAL[1])
    dev_sentences = len(dev.sent1) + len(dev.sent2)
    return {
        "step_s": method_steps["simcse"]["step_s"],
        "probe_s": rate[config.precision] * dev_sentences,
        "sts_s": {p: r * sts_sentences() for p, r in rate.items()},
        **({"method_steps": method_steps} if methods else {}),
    }


def _step_seconds(encoder: Any, config: RunConfig) -> float:
    """Seconds of one of ``config``'s training steps on a copy of ``encoder`` (after one untimed)."""
    import copy

    from harness.run.data import batches, read_corpus
    from harness.run.step import TrainStep
    from methods import get_method

    model = copy.deepcopy(encoder)
    method = get_method(config.method)(config.params, model.hidden_size).to(model.device)
    step = TrainStep(model, method, config, total=STEPS + 1)
    stream = batches(read_corpus(Path(config.corpus), config.batch_size), config.batch_size, config.seed)
    step(next(stream), 1)
    t0 = time.perf_counter()
    for i in range(STEPS):
        float(step(next(stream), i + 2)[0])  # reading the loss waits for the device
    return (time.perf_counter() - t0) / STEPS


def stratified_batches(ordered: Sequence[str], batch_size: int, strata: int = STRATA) -> list[list[str]]:
    """The middle batch of each of ``strata`` equal parts of a length-sorted pass in ``batch_size``
    batches (all of them when there are fewer): a sample that pads as the pass does."""
    batches = [list(ordered[i : i + batch_size]) for i in range(0, len(ordered), batch_size)]
    if len(batches) <= strata:
        return batches
    return [batches[int((k + 0.5) * len(batches) / strata)] for k in range(strata)]


def _seconds_per_sentence(encoder: Any, pooler: str, precision: str, batches: list[list[str]]) -> float:
    encoder.embed(batches[0][:8], pooler, precision)  # warm-up
    t0 = time.perf_counter()
    for batch in batches:
        encoder.embed(batch, pooler, precision)
    return (time.perf_counter() - t0) / sum(len(b) for b in batches)


def worker_main(argv: Sequence[str]) -> None:
    """A calibration process's work: ``CONFIG_JSON DATA_ROOT OUTPUT_JSON``."""
    config_file, data_root, output = argv
    config_dict = json.loads(Path(config_file).read_text(encoding="utf-8"))
    write_json(Path(output), _measure(config_dict, data_root))
