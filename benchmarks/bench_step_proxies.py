"""What keeps a training step from a GPU's speed, measured on any device: graph breaks, host reads and
operator launches per step, eager against compiled.

A GPU step of a bert-base encoder at batch 64 is bound by launches and host synchronisation, not
arithmetic, unless it is compiled and captured. These proxies show, on the CPU as well, whether the
harness's step (:class:`harness.run.step.TrainStep`, the registered ``simcse`` method) is ready:

* graph breaks per step: where ``torch.compile`` falls back to Python (target 0);
* host reads per step: scalar reads (``aten::_local_scalar_dense``: ``.item()``, ``float(tensor)``,
  ``int(tensor)``, a tensor in an ``if``) in a profiler trace of one step (target 0): on a GPU each
  makes the host wait for the device. The fused AdamW kernel's reads of its own step counters are
  left out: they live on the host (on a GPU too) and wait for nothing;
* operator launches per step: the ATen operators the step dispatches on the host and, on a GPU, the
  kernels it launches (fewer after compiling: fused kernels; with CUDA graphs, one replay).

Usage::

    python benchmarks/bench_step_proxies.py                              # random:tiny on the CPU
    python benchmarks/bench_step_proxies.py --model minilm --steps 5
    python benchmarks/bench_step_proxies.py --model random:bert-base --device cuda --bf16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_corpus, resolve_data_root
from harness.config.run_config import resolve_config
from harness.encoder.loading import load_encoder
from harness.run.data import batches, read_corpus, seed_everything
from harness.run.step import TrainStep
from methods import get_method

HOST_READS = ("aten::_local_scalar_dense",)
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="random:tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--length-buckets", type=int, default=1, help="the eager step's buckets")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per side, after 3 warm-up steps")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sides", default="eager,compiled", help="eager, compiled or both")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    return parser.parse_args(argv)


def build(args: argparse.Namespace, compiled: bool) -> tuple[TrainStep, Any]:
    data_root = resolve_data_root(args.data_dir)
    config = resolve_config(
        "simcse",
        None,
        "cpu",
        {
            "model": args.model,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "precision": "bf16" if args.bf16 else "fp32",
            "length_buckets": 1 if compiled else args.length_buckets,
            "max_steps": 1000,
            "threads": torch.get_num_threads(),
        },
        data_root=data_root,
    )
    seed_everything(0)
    encoder = load_encoder(args.model, args.device, seed=0)
    method = get_method("simcse")(config.params, encoder.hidden_size).to(args.device)
    step = TrainStep(encoder, method, config, total=1000, compile=compiled)
    corpus = read_corpus(resolve_corpus(None, data_root), args.batch_size)
    return step, batches(corpus, args.batch_size, 0)


def _in_optimizer(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(("aten::_fused_adam", "Optimizer.step")):
            return True
        parent = parent.cpu_parent
    return False


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(args: argparse.Namespace, compiled: bool) -> dict[str, Any]:
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    t0 = time.perf_counter()
    step, stream = build(args, compiled)
    for i in range(3):  # warm-up: the compile, the CUDA graph capture
        step(next(stream), i + 1)
    sync(args.device)
    warm_s = time.perf_counter() - t0
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    graphs = int(torch._dynamo.utils.counters["stats"].get("unique_graphs", 0))
    times = []
    for i in range(args.steps):
        sync(args.device)
        t = time.perf_counter()
        step(next(stream), 4 + i)
        sync(args.device)
        times.append(time.perf_counter() - t)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        step(next(stream), 4 + args.steps)
        sync(args.device)
    events = prof.events()
    host_reads = sum(1 for e in events if e.name in HOST_READS and not _in_optimizer(e))
    syncs = sum(1 for e in events if e.name in SYNCS)
    aten = sum(1 for e in events if e.name.startswith("aten::") and e.cpu_parent is None)
    kernels = sum(1 for e in events if getattr(e.device_type, "name", "") == "CUDA")
    return {
        "compiled": compiled,
        "warmup_s": round(warm_s, 2),
        "step_ms": round(1000 * statistics.median(times), 2),
        "graph_breaks": breaks,
        "graphs": graphs,
        "host_reads_per_step": host_reads,
        "syncs_per_step": syncs,
        "aten_ops_per_step": aten,
        "cuda_kernels_per_step": kernels,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU is visible", file=sys.stderr)
        return 2
    where = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else cpu_description()
    print(
        f"# {args.model} on {args.device} ({where}), {torch.get_num_threads()} threads, batch "
        f"{args.batch_size}, length {args.max_length}, {'bf16' if args.bf16 else 'fp32'}, "
        f"torch {torch.__version__}"
    )
    rows = [measure(args, side == "compiled") for side in args.sides.split(",") if side]
    keys = [k for k in rows[0] if k != "compiled"]
    print("| side | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for row in rows:
        name = "compiled" if row["compiled"] else "eager"
        print(f"| {name} | " + " | ".join(str(row[k]) for k in keys) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
