"""The GPU acceptance check: run it first whenever a GPU is at hand (``make gpu-check``).

In a few minutes of device time it answers what a night on this GPU would be like, and leaves a
calibration file the grid's cost model reads (``<runs>/calibration/``):

1. the device: its name, and the bf16 matrix-product throughput it reaches (the peak the step is
   measured against);
2. the step: the harness's SimCSE step, eager and compiled (``torch.compile``, CUDA graphs),
   against sentence-transformers' unsupervised SimCSE on the same random bert-base weights and the
   same batches, interleaved (``benchmarks/bench_train_step.py``; not with ``--quick``); its
   floating-point work counted once (``torch.utils.flop_counter``), so the achieved TFLOPS and
   their share of the peak follow;
3. a full ``paper``-profile SimCSE trial of a few hundred steps (random bert-base weights, the real
   tokenizer, the compiled step, the profile's precision), every stage on the device: training,
   STS-B dev evaluations, the final STS pass; its record gives the steady step apart from the first
   (compilation, warm-up), each dev evaluation's seconds and the evaluation throughput;
4. the grid's calibration, for each precision (``--precisions``): each method's step beside
   SimCSE's (``--methods``; eager, as the grid's estimate scales them), the dev evaluation and the final
   STS pass (:func:`harness.grid.plan.calibrate_here.measure_parts`); the trial's precision takes the trial's
   own step, first step, dev evaluation, STS and transfer seconds. One file per precision and encoder class
   in ``<runs>/calibration/`` (:mod:`harness.grid.plan.calibration_files`, format version 2), written as soon
   as this stage ends;
5. trials per GPU: steps per second of 1, 2 and 4 trials sharing the device, each built and compiled
   as a paper-profile grid trial (``benchmarks/bench_gpu_trials.py``); the calibration files are
   written again with the slowdowns;
6. a night rehearsal (``--rehearsal``; on by default on a GPU): six runs of different methods
   (``benchmarks/rehearsal.toml``) through ``harness grid`` under the paper profile, ``--steps``
   steps each, four trials sharing the GPU, the final STS and transfer (``fasttest``); the grid's
   estimate of it from this check's calibration beside what it took, by part, then ``harness
   tables`` on the records; and what the one-seed paper grid would take on this device by the same
   calibration (:func:`rehearsal`);
7. the STS-B dev evaluation alone, as runs made it before and as they make it now, at the trial's
   precision and in fp32 (``benchmarks/bench_dev_eval.py``; target: 0.5 s for bert-base); the stage
   and the dev evaluation's seconds keep their first names in gpu_check.json (``probe``,
   ``probe_s``, ``first_probe_s``);
8. the proxies of a launch-bound step (``benchmarks/bench_step_proxies.py``): graph breaks, host
   reads and operator launches per step, for SimCSE eager and compiled and, eager, for every
   registered method (``--proxy-methods``; each smoke setting with ``--proxy-settings``);
9. the losses of each precision against fp32's (fp32, tf32 and bf16 on a GPU): the SimCSE step
   trained ``--precision-steps`` steps from the same weights on the same batches with the same
   dropout masks once per precision, every step's loss kept
   (``benchmarks/bench_precision_losses.py``; ``precision_losses.json``);
10. the final transfer evaluation on the device, last because it is the longest: the seven tasks
   embedded there, then their classifiers in SentEval's ``test`` mode on the device
   (``benchmarks/bench_transfer_eval.py``'s device path; target: 60 s for bert-base).

What the estimates need comes first, so a loan that ends early still leaves them. Each stage's
numbers are written as soon as they exist (``--out``: ``gpu_check.json`` and the calibration file),
and a stage that fails is reported and skipped: a short loan of a GPU is never spent for nothing.
On a CPU with ``--device cpu --model random:tiny --steps 4`` it runs the same code in seconds
(``tests/system/test_gpu_check.py``), so it works the first time a GPU comes.

Usage::

    python benchmarks/gpu_check.py                       # on a GPU box: cuda, random:bert-base
    python benchmarks/gpu_check.py --device cpu --model random:tiny --steps 4 --quick
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dev_eval
import bench_gpu_trials
import bench_precision_losses
import bench_step_proxies
import bench_train_step

from harness.atomic import write_json
from harness.config.hardware import cpu_description, cpu_id
from harness.config.paths import resolve_data_root
from harness.evaluation.tasks import sts_sentences
from harness.grid.plan.calibrate_here import measure_parts
from harness.grid.plan.calibration_files import CALIBRATION_DIR, VERSION, calibration_name
from harness.grid.plan.unit_costs import encoder_class
from harness.run.training import train_run
from harness.store.provenance import now_iso
from harness.store.run_config import RunConfig, resolve_config
from harness.store.run_store import RunStore
from methods import REGISTRY


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="random:bert-base")
    parser.add_argument("--steps", type=int, default=300, help="steps of the paper-profile trial")
    parser.add_argument("--bench-steps", type=int, default=40, help="timed steps per side of the comparison")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--runs-dir", default="runs", help="where the calibration file goes (<runs>/calibration)"
    )
    parser.add_argument("--out", default="results/gpu_check", help="folder of gpu_check.json")
    parser.add_argument("--trials", type=int, nargs="*", default=[1, 2, 4], help="trials per GPU to time")
    parser.add_argument("--quick", action="store_true", help="skip the comparison with sentence-transformers")
    parser.add_argument(
        "--transfer-mode", default="test", choices=["test", "fasttest"], help="the transfer stage's mode"
    )
    parser.add_argument(
        "--transfer-limit", type=int, default=None, help="rows per split of the transfer stage (tests)"
    )
    parser.add_argument(
        "--precisions",
        default=None,
        help="calibrated precisions (default: tf32,bf16 on cuda, fp32 elsewhere)",
    )
    parser.add_argument(
        "--methods", default=",".join(REGISTRY), help="methods whose step is calibrated, comma-separated"
    )
    parser.add_argument("--final-tasks", default="all", help="the trial's final tasks (all: STS, transfer)")
    parser.add_argument("--trial-transfer-mode", default="fasttest", help="the trial's transfer mode")
    parser.add_argument(
        "--proxy-methods", default="all", help="methods whose eager step's proxies are printed ('' = none)"
    )
    parser.add_argument(
        "--rehearsal",
        choices=["auto", "on", "off"],
        default="auto",
        help="a small night through `harness grid` (auto: on a GPU)",
    )
    parser.add_argument(
        "--precision-steps",
        type=int,
        default=200,
        help="steps per precision of the losses-tracking stage (0 = skip it)",
    )
    parser.add_argument(
        "--proxy-settings",
        action="store_true",
        help="proxies for each of a method's smoke settings (default: its first; all take minutes)",
    )
    return parser.parse_args(argv)


class Check:
    """The numbers so far, written after every stage."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.result: dict[str, Any] = {"args": vars(args), "started_at": now_iso(), "stages": {}}

    def stage(self, name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            numbers = fn()
        except Exception as exc:
            print(f"   failed: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc()
            self.result["stages"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            self.save()
            return None
        numbers["seconds"] = round(time.perf_counter() - t0, 1)
        self.result["stages"][name] = numbers
        print("   " + json.dumps(numbers), flush=True)
        self.save()
        return numbers

    def save(self) -> None:
        write_json(self.out / "gpu_check.json", self.result, indent=2)


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    return cpu_description()


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak(device: str) -> dict[str, Any]:
    """The bf16 (on a CPU: fp32) square-matrix-product throughput the device reaches."""
    n = 8192 if device.startswith("cuda") else 1024
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    reps = 10
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    seconds = (time.perf_counter() - t0) / reps
    return {"n": n, "dtype": str(dtype).removeprefix("torch."), "tflops": round(2 * n**3 / seconds / 1e12, 2)}


def step_flops(args: argparse.Namespace) -> float:
    """Floating-point operations of one harness SimCSE step (forward and backward), counted."""
    from torch.utils.flop_counter import FlopCounterMode

    step, stream = bench_step_proxies.build(_proxy_args(args), compiled=False)
    step(next(stream), 1)
    with FlopCounterMode(display=False) as counter:
        step(next(stream), 2)
    return float(counter.get_total_flops())


def _proxy_args(args: argparse.Namespace) -> argparse.Namespace:
    return bench_step_proxies.parse_args(
        [
            "--model",
            args.model,
            "--device",
            args.device,
            "--batch-size",
            str(args.batch_size),
            "--max-length",
            str(args.max_length),
            "--steps",
            "5",
            *(["--data-dir", args.data_dir] if args.data_dir else []),
            *(["--bf16"] if args.device.startswith("cuda") else []),
        ]
    )


def compare_steps(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    bf16 = args.device.startswith("cuda")
    precision = "bf16" if bf16 else "fp32"
    argv = [
        "--model",
        args.model,
        "--device",
        args.device,
        "--variants",
        f"{precision},{precision}+compile",
        "--steps",
        str(args.bench_steps),
        "--warmup",
        "3",
        "--batch-size",
        str(args.batch_size),
        "--max-length",
        str(args.max_length),
        "--json",
        str(out / "train_step.json"),
        *(["--bf16"] if bf16 else []),
        *(["--data-dir", args.data_dir] if args.data_dir else []),
    ]
    bench_train_step.main(argv)
    result = json.loads((out / "train_step.json").read_text())
    eager = result[f"ours[{precision}]"]["median_ms"]
    compiled = result[f"ours[{precision}+compile]"]["median_ms"]
    theirs = result["theirs"]["median_ms"]
    return {
        "precision": precision,
        "eager_ms": round(eager, 2),
        "compiled_ms": round(compiled, 2),
        "sentence_transformers_ms": round(theirs, 2),
        "compiled_over_theirs": round(compiled / theirs, 3),
    }


def paper_config(args: argparse.Namespace, data_root: Path, **overrides: Any) -> RunConfig:
    """SimCSE under the paper profile on the check's model, batch and length, on the NLI corpus that
    is beside the data (the papers' Wikipedia corpus need not be)."""
    settings = {
        "model": args.model,
        "corpus": "corpus/nli-sentences.txt",
        "batch_size": args.batch_size,
        "max_length": args.max_length,
    }
    return resolve_config("simcse", None, "paper", {**settings, **overrides}, data_root=data_root)


def trial(args: argparse.Namespace, runs: Path, out: Path) -> dict[str, Any]:
    """A paper-profile SimCSE run of ``--steps`` steps on the device, compiled, STS at the end."""
    data_root = resolve_data_root(args.data_dir)
    # on a GPU the paper profile's own precision (what a night runs); fp32 on a CPU
    precision = {} if args.device.startswith("cuda") else {"precision": "fp32"}
    config = paper_config(
        args,
        data_root,
        max_steps=args.steps,
        eval_every=max(1, args.steps // 2),
        final_tasks=args.final_tasks,
        transfer_mode=args.trial_transfer_mode,
        **precision,
    )
    store = RunStore(runs)
    record = train_run(config, data_root, store, device=args.device, log=print, resume=False, compile=True)
    write_json(out / "trial_record.json", record, indent=2)
    prov: dict[str, Any] = dict(record.get("provenance") or {})
    if str(prov.get("device", "")).split(":")[0] != torch.device(args.device).type:
        raise RuntimeError(f"the trial ran on {prov.get('device')}, not on {args.device}")
    # the steady step: the first one (compilation, CUDA graphs' warm-up) is timed apart
    first_s = float(record.get("first_step_s") or 0.0)
    step_ms = 1000 * (float(record["train_time_s"]) - first_s) / max(args.steps - 1, 1)
    # a dev evaluation after the first (which builds the token cache and warms the evaluation path)
    later = [float(p["probe_s"]) for p in record["trajectory"][1:] if "probe_s" in p]
    final_s = float(record.get("final_time_s") or 0.0)
    dev_evals = len(record["trajectory"]) - (1 if record.get("step0_probe_cached") else 0)
    dev_eval_s = (
        statistics.median(later) if later else (float(record["eval_time_s"]) - final_s) / max(dev_evals, 1)
    )
    first_dev_eval = [p.get("probe_s") for p in record["trajectory"][:1]]
    sts_s = float((record.get("final_seconds") or {}).get("sts") or final_s)
    transfer_s = (record.get("final_seconds") or {}).get("transfer")
    return {
        "transfer_s": round(float(transfer_s), 2) if transfer_s else None,
        "transfer_mode": config.transfer_mode,
        "run_id": record["run_id"],
        "status": record["status"],
        "compiled": prov.get("compiled"),
        "step_ms": round(step_ms, 2),
        "first_step_s": round(first_s, 2),
        "probe_s": round(dev_eval_s, 3),
        "first_probe_s": first_dev_eval[0] if first_dev_eval else None,
        "sts_s": round(sts_s, 2),
        "sts_sentences_per_s": round(sts_sentences() / sts_s, 1) if sts_s > 0 else None,
        "sts_avg": (record.get("final") or {}).get("sts", {}).get("avg"),
        "precision": config.precision,
        "eval_precision": config.eval_precision,
        "wall_s": record.get("wall_time_s"),
    }


def trials_per_gpu(args: argparse.Namespace) -> dict[str, Any]:
    argv = [
        "--model",
        args.model,
        "--steps",
        "60",
        "--warmup",
        "5",
        "--batch-size",
        str(args.batch_size),
        "--max-length",
        str(args.max_length),
        "--precision",
        paper_config(args, resolve_data_root(args.data_dir)).precision,  # what a night's trials run
        "--counts",
        *[str(n) for n in args.trials],
        *(["--data-dir", args.data_dir] if args.data_dir else []),
    ]
    targs = bench_gpu_trials.parse_args(argv)
    rows = [bench_gpu_trials.measure(n, targs) for n in targs.counts]
    one = rows[0]["steps_per_s"]
    return {
        "steps_per_s": {str(r["trials"]): round(r["steps_per_s"], 2) for r in rows},
        "slowdown": {str(r["trials"]): round(r["trials"] * one / r["steps_per_s"], 3) for r in rows},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: error: no CUDA GPU is visible here (run it on the GPU box)", file=sys.stderr)
        return 2
    check = Check(args)
    out = check.out
    runs = Path(args.runs_dir)
    check.result["device"] = {
        "name": device_name(args.device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host_cpu": cpu_description(),
    }
    check.save()
    print(f"gpu-check on {check.result['device']['name']} (torch {torch.__version__})", flush=True)
    peak = check.stage("matmul peak", lambda: matmul_peak(args.device))
    flops = check.stage("step flops", lambda: {"tflop_per_step": step_flops(args) / 1e12})
    steps = None
    if not args.quick:
        steps = check.stage("step against sentence-transformers", lambda: compare_steps(args, out))
    trialled = check.stage("paper-profile trial", lambda: trial(args, runs, out))
    # the trial's step is the loop's own (no read-back between steps); the comparison's is timed
    # with the device synchronised around every step
    step_ms = (trialled or {}).get("step_ms") or (steps or {}).get("compiled_ms")
    if step_ms and flops and peak:
        achieved = flops["tflop_per_step"] / (step_ms / 1000)
        check.result["achieved"] = {
            "step_ms": step_ms,
            "tflops": round(achieved, 2),
            "share_of_peak": round(achieved / peak["tflops"], 3),
        }
    parts = check.stage("calibration", lambda: calibration_parts(args))
    by_precision = (parts or {}).get("by_precision", {})

    def write_calibrations(shared: dict[str, Any] | None) -> None:
        written = []
        for calibration in calibrations(args, check.result, trialled, by_precision, shared):
            path = runs / CALIBRATION_DIR / calibration_name(calibration)
            write_json(path, calibration, indent=2)
            written.append(str(path))
        check.result["calibration"] = written
        check.save()

    # written before the longest stage and again with its slowdowns: a loan that ends during the
    # trials-per-GPU stage still leaves the box's calibration
    write_calibrations(None)
    if args.device.startswith("cuda") and args.trials:
        write_calibrations(check.stage("trials per GPU", lambda: trials_per_gpu(args)))
    if args.rehearsal == "on" or (args.rehearsal == "auto" and args.device.startswith("cuda")):
        check.stage("night rehearsal", lambda: rehearsal(args, runs))
    # what the estimates need comes first, the explaining stages after it, the longest last
    check.stage("probe", lambda: dev_eval(args))
    check.stage("proxies", lambda: _proxies(args, out))
    if args.proxy_methods:
        check.stage("proxies per method", lambda: _method_proxies(args))
    if args.precision_steps:
        check.stage("precision losses", lambda: precision_losses(args, out))
    check.stage("transfer", lambda: transfer(args))
    check.result["finished_at"] = now_iso()
    check.save()
    print(json.dumps({k: check.result.get(k) for k in ("device", "achieved", "calibration")}, indent=2))
    failed = [name for name, numbers in check.result["stages"].items() if "error" in numbers]
    if failed:
        print(f"gpu-check: {len(failed)} stage(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def precision_losses(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Each precision's SimCSE losses against fp32's over the first steps, same weights, batches and
    masks (``bench_precision_losses.py``; every step's loss in ``precision_losses.json``)."""
    argv = ["--model", args.model, "--device", args.device, "--steps", str(args.precision_steps)]
    argv += ["--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
    argv += [
        *(["--data-dir", args.data_dir] if args.data_dir else []),
        "--json",
        str(out / "precision_losses.json"),
    ]
    bench_precision_losses.main(argv)
    result = json.loads((out / "precision_losses.json").read_text())
    return {"steps": result["steps"], "against_fp32": result["against_fp32"]}


def dev_eval(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds per STS-B dev evaluation, before and now, at the trial's precision and in fp32."""
    precisions = ["bf16", "fp32"] if args.device.startswith("cuda") else ["fp32"]
    out: dict[str, Any] = {}
    for precision in precisions:
        argv = ["--model", args.model, "--device", args.device, "--precision", precision, "--repeats", "3"]
        result = bench_dev_eval.measure(bench_dev_eval.parse_args([*argv, *_data_dir(args)]), log=print)
        out[precision] = {k: result[k] for k in ("before_s", "run_s", "speedup", "max_abs_diff")}
    return out


def transfer(args: argparse.Namespace) -> dict[str, Any]:
    """The seven transfer tasks embedded on the device (``--transfer-limit``: the first rows of each
    split, in SentEval's order), then their classifiers there."""
    from harness.config.paths import senteval_dir
    from harness.encoder.loading import load_encoder
    from harness.evaluation.readers import TaskText, TextSplit
    from harness.evaluation.transfer import (
        TRANSFER_TASKS,
        average,
        classify_tasks,
        embed_task,
        read_task,
    )
    from harness.evaluation.transfer_protocol import TransferTiming

    t0 = time.perf_counter()
    encoder = load_encoder(args.model, args.device)
    senteval = senteval_dir(resolve_data_root(args.data_dir))
    features = {}
    for task in TRANSFER_TASKS:
        text = read_task(senteval, task)
        if args.transfer_limit is not None:
            n = args.transfer_limit
            splits = {
                k: TextSplit(tuple(c[:n] for c in v.columns), v.labels[:n]) for k, v in text.splits.items()
            }
            text = TaskText(text.name, text.nclasses, splits)
        features[task] = embed_task(text, lambda batch: encoder.embed(batch, "cls_before_pooler"))
    embedded = time.perf_counter() - t0
    timing = TransferTiming()
    accuracies = classify_tasks(features, mode=args.transfer_mode, timing=timing, device=args.device)
    return {
        "mode": args.transfer_mode,
        "device": args.device,
        "embed_s": round(embedded, 1),
        "classify_s": round(timing.seconds, 1),
        "classify_steps": timing.steps,
        "ms_per_step": round(1000 * timing.seconds / max(sum(timing.steps), 1), 3),
        "finished_at_s": {k: round(v, 1) for k, v in timing.finished_at.items()},
        "accuracies": {**accuracies, "avg": average(accuracies)},
    }


REHEARSAL_SPEC = Path(__file__).resolve().parent / "rehearsal.toml"
"""The rehearsal's table: six runs of different methods (not a paper table)."""


def _grid_plan(argv: list[str]) -> tuple[Any, Any, int]:
    """``harness grid ARGV``'s plan, its cost model and slots, as ``--dry-run`` makes them."""
    from harness.commands import grid_cmd
    from harness.commands.grid_flags import grid_options
    from harness.grid.launch import cost_model, plan_grid

    parser = argparse.ArgumentParser()
    grid_cmd.add_arguments(parser)
    options = grid_options(parser.parse_args(argv))
    grid = plan_grid(options)
    model, slots = cost_model(options, grid.store, [r.config for r in grid.plan.runs])
    return grid, model, slots


def _parts(model: Any, configs: list[RunConfig]) -> dict[str, float]:
    """The estimated seconds of ``configs`` by part (:meth:`harness.grid.plan.cost.CostModel.run_parts`)."""
    total: dict[str, float] = {}
    for config in configs:
        for part, seconds in model.run_parts(config).items():
            total[part] = total.get(part, 0.0) + seconds
    return {k: round(v, 1) for k, v in total.items()}


def rehearsal(args: argparse.Namespace, runs: Path) -> dict[str, Any]:
    """A small night on this device through ``harness grid``, as a user starts one, and what the
    one-seed paper grid would take here.

    The :data:`REHEARSAL_SPEC` table's runs under the paper profile on the check's model, ``--steps``
    steps each, four trials sharing the GPU (on a CPU one thread per trial), final STS and transfer
    (``fasttest``): the grid's estimate of it from this check's calibration (its first line, as a
    user sees it) beside the grid's wall time, by part (training, dev evaluations, final evaluation) against
    the records' own seconds; then ``harness tables`` on them. Last, ``harness grid all --profile
    paper --seeds 1`` estimated with the same calibration, by part."""
    import shutil
    import subprocess

    from harness.grid.plan.estimate import makespan

    cuda = args.device.startswith("cuda")
    folder = runs / "rehearsal"
    if (runs / CALIBRATION_DIR).is_dir():  # the grid's estimate reads the calibration there
        shutil.copytree(runs / CALIBRATION_DIR, folder / CALIBRATION_DIR, dirs_exist_ok=True)
    settings = ["--profile", "paper", "--model", args.model, "--corpus", "corpus/nli-sentences.txt"]
    settings += ["--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
    settings += ["--max-steps", str(args.steps), "--eval-every", str(max(1, args.steps // 2))]
    settings += ["--final-tasks", "all", "--transfer-mode", "fasttest"]
    settings += ["--runs-dir", str(folder), *_data_dir(args)]
    if not cuda:
        settings += ["--precision", "fp32"]
    sharing = ["--gpus-per-trial", "0.25"] if cuda else ["--cpus-per-trial", "1"]
    argv = [str(REHEARSAL_SPEC), "--seeds", "1", *settings, *sharing]
    grid, model, slots = _grid_plan(argv)
    configs = [r.config for r in grid.plan.runs]
    estimates = {c.run_id(): model.run_seconds(c) for c in configs}
    first_line = model.uncalibrated_line(configs) or f"unit costs: {model.source(configs[0])}"
    harness = [sys.executable, "-m", "harness.cli"]
    t0 = time.perf_counter()
    ran = subprocess.run([*harness, "grid", *argv], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    records = {r["run_id"]: r for r in RunStore(folder).records()}
    measured = {"training": 0.0, "probes": 0.0, "final": 0.0}  # the parts as CostModel.run_parts names them
    per_run = {}
    for run_id, estimate in estimates.items():
        record = records.get(run_id, {})
        final = float(record.get("final_time_s") or 0.0)
        measured["training"] += float(record.get("train_time_s") or 0.0)
        measured["probes"] += float(record.get("eval_time_s") or 0.0) - final
        measured["final"] += final
        per_run[run_id] = {
            "method": record.get("config", {}).get("method"),
            "status": record.get("status"),
            "estimate_s": round(estimate, 1),
            "wall_s": record.get("wall_time_s"),
            "first_step_s": record.get("first_step_s"),
        }
    tables = subprocess.run(
        [*harness, "tables", str(REHEARSAL_SPEC), *settings, "--out", str(folder / "tables")],
        capture_output=True,
        text=True,
        check=False,
    )
    # the one-seed paper grid, estimated with this device's calibration (one epoch of the corpus)
    paper_argv = ["all", "--profile", "paper", "--seeds", "1", "--dry-run", "--runs-dir", str(folder)]
    paper_argv += _data_dir(args)
    paper_argv += ["--gpus-per-trial", "0.5"] if cuda else ["--cpus-per-trial", "1"]
    paper, paper_model, _ = _grid_plan(paper_argv)
    paper_configs = [r.config for r in paper.plan.runs]
    paper_parts = _parts(paper_model, paper_configs)
    share = paper_model.trials_per_gpu
    paper_hours = sum(paper_parts.values()) / 3600 / share
    unit = "GPU" if cuda else "CPU-trial"
    result = {
        "runs": len(estimates),
        "finished": sum(1 for r in per_run.values() if r["status"] == "finished"),
        "grid_exit": ran.returncode,
        "estimate_first_line": first_line,
        "estimate_s": round(makespan(list(estimates.values()), slots), 1),
        "wall_s": round(wall, 1),
        "slots": slots,
        "estimate_parts_s": _parts(model, configs),
        "measured_parts_s": {k: round(v, 1) for k, v in measured.items()},
        "per_run": per_run,
        "tables_exit": tables.returncode,
        "tables": sorted(p.name for p in (folder / "tables").glob("*.tex")),
        "paper_grid": {
            "runs": len(paper_configs),
            "trials_per_gpu": share,
            f"{unit}_hours": round(paper_hours, 2),
            "parts_s": paper_parts,
            "source": sorted({paper_model.source(c) for c in paper_configs}),
        },
    }
    parts = ", ".join(f"{k} {v / 3600 / share:.1f} h" for k, v in paper_parts.items() if v)
    print(
        f"   the one-seed paper grid on this device: about {paper_hours:.1f} {unit}-h "
        f"({len(paper_configs)} runs{f', {share} per GPU' if cuda else ''}; {parts})",
        flush=True,
    )
    for name, proc in (("grid", ran), ("tables", tables)):
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"harness {name} exited {proc.returncode}: {' | '.join(tail)}; {result}")
    return result


def _data_dir(args: argparse.Namespace) -> list[str]:
    return ["--data-dir", args.data_dir] if args.data_dir else []


def precisions(args: argparse.Namespace) -> list[str]:
    default = "tf32,bf16" if args.device.startswith("cuda") else "fp32"  # the paper profile's, the fast one
    return [p for p in (args.precisions or default).split(",") if p]


def calibration_parts(args: argparse.Namespace) -> dict[str, Any]:
    """For each precision: SimCSE's and each method's step, the dev evaluation and the final STS pass."""
    data_root = resolve_data_root(args.data_dir)
    methods = [m for m in args.methods.split(",") if m]
    out = {}
    for precision in precisions(args):
        config = paper_config(args, data_root, precision=precision)
        out[precision] = measure_parts(config, data_root, args.device, methods)
    return {"by_precision": out}


def calibrations(
    args: argparse.Namespace,
    result: dict[str, Any],
    trialled: dict[str, Any] | None,
    parts: dict[str, Any],
    shared: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """The calibration files' contents (format version 2), one per measured precision: the trial's
    own step, dev evaluation, STS and transfer seconds for its precision (the loop's compiled step), the
    calibration stage's for the others; each method's step from the stage."""
    trial = trialled if trialled and trialled.get("status") == "finished" else None
    on_gpu = args.device.startswith("cuda")
    out = []
    for precision in sorted({*parts, *([trial["precision"]] if trial else [])}):
        measured = parts.get(precision) or {}
        calibration: dict[str, Any] = {
            "kind": "harness-calibration",
            "version": VERSION,
            "device": torch.device(args.device).type,
            # a CPU's calibration names the processor as the cost model matches it, and the trial's threads
            "device_name": result["device"]["name"] if on_gpu else cpu_id(),
            "threads": None,
            "encoder": encoder_class(args.model),
            "precision": precision,
            "compiled": False,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "step_s": measured.get("step_s"),
            "probe_s": measured.get("probe_s"),
            "sts_s": dict(measured.get("sts_s") or {}),
            "transfer_s": {},
            "method_steps": dict(measured.get("method_steps") or {}),
            "trials_slowdown": (shared or {}).get("slowdown", {}),
            "measured_at": result["started_at"],
            "torch": torch.__version__,
            "source": "benchmarks/gpu_check.py",
        }
        if trial and trial["precision"] == precision:
            calibration.update(
                compiled=bool(trial.get("compiled")),
                step_s=trial["step_ms"] / 1000,
                first_step_s=trial["first_step_s"],
                probe_s=trial["probe_s"],
            )
            calibration["sts_s"][trial["eval_precision"]] = trial["sts_s"]
            if trial.get("transfer_s"):
                key = f"{trial['transfer_mode']}/{trial['eval_precision']}"
                calibration["transfer_s"][key] = trial["transfer_s"]
        if calibration["step_s"] and calibration["probe_s"]:
            out.append(calibration)
    return out


def _proxies(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    proxy = _proxy_args(args)
    rows = [bench_step_proxies.measure(proxy, compiled) for compiled in (False, True)]
    return {
        ("compiled" if r["compiled"] else "eager"): {k: v for k, v in r.items() if k != "compiled"}
        for r in rows
    }


def _method_proxies(args: argparse.Namespace) -> dict[str, Any]:
    """Each method's eager step (one timed step): host reads, with where they are made, and launches."""
    proxy = _proxy_args(args)
    proxy.steps = 1
    keys = (
        "host_reads_per_step",
        "syncs_per_step",
        "aten_ops_per_step",
        "cuda_kernels_per_step",
        "read_sites",
    )
    out = {}
    for method, params in bench_step_proxies.cases(args.proxy_methods, every_setting=args.proxy_settings):
        row = bench_step_proxies.measure(proxy, False, method, params)
        out[row["method"]] = {k: row[k] for k in keys}
        print(f"   {row['method']}: " + ", ".join(f"{k} {row[k]}" for k in keys), flush=True)
    return {"methods": out}


if __name__ == "__main__":
    sys.exit(main())
