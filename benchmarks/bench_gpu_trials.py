"""How many small trials share one GPU before throughput stops growing (fractional GPUs).

Ray Tune's fractional ``gpus_per_trial`` (0.5, 0.25, ...) places N trial processes on one GPU. This
benchmark measures exactly that situation without Ray in the way: N independent processes, each
running the harness's own training step (:class:`harness.run.step.TrainStep`, the step ``train_run``
runs) on its own encoder copy, start together; the aggregate throughput (optimizer steps per second
summed over trials) is printed for each N, with the speed-up over one trial.

    python benchmarks/bench_gpu_trials.py --model random:minilm --counts 1 2 4 8
    python benchmarks/bench_gpu_trials.py --model random:bert-base --bf16 --counts 1 2 4

Random weights are fine: speed does not depend on them. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="random:minilm")
    parser.add_argument("--method", default="simcse")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--steps", type=int, default=60, help="timed steps per trial")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--data-dir", default=None)
    return parser.parse_args(argv)


def _trial(rank: int, args: argparse.Namespace, ready: Any, start: Any, results: Any) -> None:
    import torch

    from harness.config.paths import resolve_data_root
    from harness.config.run_config import resolve_config
    from harness.encoder.loading import load_encoder
    from harness.run.data import batches, read_corpus
    from harness.run.step import TrainStep
    from methods import get_method

    torch.manual_seed(rank)
    data_root = resolve_data_root(args.data_dir)
    overrides = {"model": args.model, "batch_size": args.batch_size, "max_steps": args.steps + args.warmup}
    if args.bf16:
        overrides["precision"] = "bf16"
    config = resolve_config(args.method, profile="cpu", overrides=overrides, data_root=data_root)
    encoder = load_encoder(config.model, device="cuda", seed=rank)
    cls = get_method(config.method)
    method = cls(config.params, encoder.hidden_size).to("cuda")
    step = TrainStep(encoder, method, config, total=args.steps + args.warmup)
    stream = batches(read_corpus(Path(config.corpus)), config.batch_size, seed=rank)
    for i in range(args.warmup):
        step(next(stream), i + 1)
    torch.cuda.synchronize()
    ready.put(rank)
    start.wait()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(next(stream), args.warmup + i + 1)
    torch.cuda.synchronize()
    results.put((rank, t0, time.perf_counter(), torch.cuda.max_memory_allocated() / 2**30))


def measure(n: int, args: argparse.Namespace) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_trial, args=(r, args, ready, start, results)) for r in range(n)]
    for p in procs:
        p.start()
    for _ in range(n):
        ready.get(timeout=600)
    start.set()
    rows = [results.get(timeout=1200) for _ in range(n)]
    for p in procs:
        p.join()
    wall = max(r[2] for r in rows) - min(r[1] for r in rows)
    return {
        "trials": n,
        "steps_per_s": n * args.steps / wall,
        "ms_per_step_per_trial": 1000 * wall / args.steps,
        "gib_per_trial": max(r[3] for r in rows),
    }


def main() -> None:
    args = parse_args()
    print(f"model {args.model}, method {args.method}, batch {args.batch_size}, bf16 {args.bf16}")
    print(f"{'trials':>6} {'agg steps/s':>12} {'ms/step/trial':>14} {'speed-up':>9} {'GiB/trial':>10}")
    base = None
    for n in args.counts:
        row = measure(n, args)
        base = base or row["steps_per_s"]
        print(
            f"{n:>6} {row['steps_per_s']:>12.2f} {row['ms_per_step_per_trial']:>14.1f} "
            f"{row['steps_per_s'] / base:>9.2f} {row['gib_per_trial']:>10.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
