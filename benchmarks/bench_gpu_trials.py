"""How many small trials share one GPU before throughput stops growing (fractional GPUs).

Ray Tune's fractional ``gpus_per_trial`` (0.5, 0.25, ...) places N trial processes on one GPU. This
benchmark measures exactly that situation without Ray in the way: N independent processes, each
running the harness's own training step (:class:`harness.run.step.TrainStep`, the step ``train_run``
runs) on its own encoder copy, start together; the aggregate throughput (optimizer steps per second
summed over trials) is printed for each N, with the speed-up over one trial.

Each process builds its step as a grid trial does: the ``paper`` profile's config (one padded width,
the NLI corpus beside the data), compiled on a GPU, with its share of the host's threads, so one trial
here runs at the speed of ``make gpu-check``'s paper-profile trial.

    python benchmarks/bench_gpu_trials.py --model random:minilm --counts 1 2 4 8
    python benchmarks/bench_gpu_trials.py --model random:bert-base --precision bf16 --counts 1 2 4

Random weights are fine: speed does not depend on them. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
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
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--precision", default="bf16", help="fp32, tf32, bf16 or fp16")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--corpus", default="corpus/nli-sentences.txt")
    parser.add_argument("--eager", action="store_true", help="do not compile the step")
    parser.add_argument("--data-dir", default=None)
    return parser.parse_args(argv)


def _trial(rank: int, args: argparse.Namespace, ready: Any, start: Any, results: Any) -> None:
    import torch

    from harness.config.paths import resolve_data_root
    from harness.encoder.loading import load_encoder
    from harness.run.data import batches, read_corpus
    from harness.run.step import TrainStep
    from harness.store.run_config import resolve_config
    from methods import get_method

    torch.manual_seed(rank)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.trials_now))
    data_root = resolve_data_root(args.data_dir)
    overrides = {
        "model": args.model,
        "corpus": args.corpus,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "max_steps": args.steps + args.warmup,
        "precision": args.precision,
    }
    config = resolve_config(args.method, profile=args.profile, overrides=overrides, data_root=data_root)
    encoder = load_encoder(config.model, device="cuda", seed=rank)
    cls = get_method(config.method)
    method = cls(config.params, encoder.hidden_size).to("cuda")
    step = TrainStep(encoder, method, config, total=args.steps + args.warmup, compile=not args.eager)
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
    args = argparse.Namespace(**{**vars(args), "trials_now": n})
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
    print(
        f"model {args.model}, method {args.method}, profile {args.profile}, batch {args.batch_size}, "
        f"length {args.max_length}, precision {args.precision}, {'eager' if args.eager else 'compiled'}"
    )
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
