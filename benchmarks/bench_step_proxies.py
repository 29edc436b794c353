"""What keeps a training step from a GPU's speed, measured on any device: graph breaks, host reads and
operator launches per step, eager against compiled.

A GPU step of a bert-base encoder at batch 64 is bound by launches and host synchronisation, not
arithmetic, unless it is compiled and captured. These proxies show, on the CPU as well, whether the
harness's step (:class:`harness.run.step.TrainStep`) is ready, for every registered method with each
of its ``smoke_params`` (``--methods``):

* graph breaks per step: where ``torch.compile`` falls back to Python (target 0; the compiled side
  compiles the encoder's own training call, which a method's edited or token-level calls bypass);
* host reads per step: scalar reads (``aten::_local_scalar_dense``: ``.item()``, ``float(tensor)``,
  ``int(tensor)``, a tensor in an ``if``, ``torch.linalg``'s error checks) in a profiler trace of one
  step (target 0), with the functions that made them (:func:`harness.run.step.read_sites`): on a GPU
  each makes the host wait for the device. The fused AdamW kernel's reads of its own step counters
  are left out: they live on the host (on a GPU too) and wait for nothing;
* operator launches per step: the ATen operators the step dispatches on the host and, on a GPU, the
  kernels it launches (fewer after compiling: fused kernels; with CUDA graphs, one replay).

The eager step runs the encoder unpacked (``--pack`` for the CPU runs' packed forward), the path a
GPU runs.

Usage::

    python benchmarks/bench_step_proxies.py --sides eager --batch-size 8     # every method, random:tiny
    python benchmarks/bench_step_proxies.py --methods simcse --model minilm --steps 5
    python benchmarks/bench_step_proxies.py --model random:bert-base --device cuda --bf16
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_corpus, resolve_data_root
from harness.encoder.loading import load_encoder
from harness.run.data import batches, read_corpus, seed_everything
from harness.run.step import STACKS, TrainStep, read_sites
from harness.store.run_config import resolve_config
from methods import REGISTRY, get_method

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
    parser.add_argument(
        "--methods", default="all", help="registered methods, comma-separated (each with its smoke_params)"
    )
    parser.add_argument("--pack", action="store_true", help="the CPU runs' packed forward (CPU only)")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    return parser.parse_args(argv)


def cases(names: str, every_setting: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """``(method, params)`` for each named method (``all``: the registry) and each of its smoke_params
    (``every_setting``), else its first (its defaults, where the method lists them first)."""
    chosen = list(REGISTRY) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    out = []
    for name in chosen:
        settings = get_method(name).smoke_params
        out += [(name, dict(params)) for params in (settings if every_setting else settings[:1])]
    return out


def label(method: str, params: Mapping[str, Any]) -> str:
    return method + (" " + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")


def build(
    args: argparse.Namespace, compiled: bool, method: str = "simcse", params: Mapping[str, Any] | None = None
) -> tuple[TrainStep, Any]:
    data_root = resolve_data_root(args.data_dir)
    config = resolve_config(
        method,
        dict(params or {}),
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
    encoder.packed_training = bool(getattr(args, "pack", False))
    module = get_method(method)(config.params, encoder.hidden_size).to(args.device)
    step = TrainStep(encoder, module, config, total=1000, compile=compiled)
    corpus = read_corpus(resolve_corpus(None, data_root), args.batch_size)
    return step, batches(corpus, args.batch_size, 0)


def _under_aten(event: Any) -> bool:
    """Whether an ATen operator dispatched ``event`` (the stacks add Python frames as parents)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(
    args: argparse.Namespace, compiled: bool, method: str = "simcse", params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    t0 = time.perf_counter()
    step, stream = build(args, compiled, method, params)
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
    with profile(activities=activities, **STACKS) as prof:
        step(next(stream), 4 + args.steps)
        sync(args.device)
    events = prof.events()
    sites = read_sites(events)
    syncs = sum(1 for e in events if e.name in SYNCS)
    aten = sum(1 for e in events if e.name.startswith("aten::") and not _under_aten(e))
    kernels = sum(1 for e in events if getattr(e.device_type, "name", "") == "CUDA")
    return {
        "method": label(method, params or {}),
        "compiled": compiled,
        "warmup_s": round(warm_s, 2),
        "step_ms": round(1000 * statistics.median(times), 2),
        "graph_breaks": breaks,
        "graphs": graphs,
        "host_reads_per_step": len(sites),
        "syncs_per_step": syncs,
        "aten_ops_per_step": aten,
        "cuda_kernels_per_step": kernels,
        "read_sites": "; ".join(f"{n}x {site}" for site, n in collections.Counter(sites).items()) or "-",
    }


ROW_KEYS = (
    "graph_breaks",
    "host_reads_per_step",
    "syncs_per_step",
    "aten_ops_per_step",
    "cuda_kernels_per_step",
    "step_ms",
    "warmup_s",
    "graphs",
    "read_sites",
)
"""The table's columns, in order."""


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
    sides = [side == "compiled" for side in args.sides.split(",") if side]
    keys = list(ROW_KEYS)
    print("| method | side | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 2) + "|")
    rows = []
    for method, params in cases(args.methods):
        for compiled in sides:
            row = measure(args, compiled, method, params)
            rows.append(row)
            side = "compiled" if compiled else "eager"
            print(f"| {row['method']} | {side} | " + " | ".join(str(row[k]) for k in keys) + " |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
