"""Benchmark: the STS-B dev evaluation as runs made it before (tokenised every call, read back per
batch, scored with NumPy) against the run's dev evaluation now (each batch tokenised once per run; on
an accelerator the embeddings stay on the device and are scored there, one copy back), side by side,
interleaved.

The same encoder and the same dev evaluation object for both; printed: seconds per dev evaluation
(median and best of the repeats), the speed ratio, and how far the two paths' numbers are apart (on
the CPU the run's path gives today's numbers bit for bit). ``benchmarks/gpu_check.py`` runs
:func:`measure` on the GPU.

    .venv/bin/python benchmarks/bench_dev_eval.py                         # packaged encoder, CPU
    .venv/bin/python benchmarks/bench_dev_eval.py --model random:bert-base --device cuda --precision bf16
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_data_root, senteval_dir
from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder, TokenCache
from harness.evaluation.geometry import DevEmbedFn, StsbDevEval
from harness.evaluation.runner import encoder_functions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--pooler", default="cls_before_pooler")
    parser.add_argument("--repeats", type=int, default=5, help="timed dev evaluations per path")
    parser.add_argument("--data-dir", default=None)
    return parser.parse_args(argv)


def embed_paths(encoder: SentenceEncoder, pooler: str, precision: str) -> dict[str, DevEmbedFn]:
    """The two embed functions: ``before`` (``SentenceEncoder.embed``, as runs embedded before) and
    ``run`` (as :meth:`harness.run.embedding.RunEmbedding.dev` embeds: cached tokens, tensors on an
    accelerator, NumPy on the CPU)."""
    tokens = TokenCache(encoder)

    def before(batch: list[str]) -> np.ndarray:
        return encoder.embed(batch, pooler, precision)

    def run(batch: list[str]) -> np.ndarray | torch.Tensor:
        out = encoder.embed_tensor(batch, pooler, precision, tokens=tokens)
        return out if out.device.type != "cpu" else out.numpy()

    return {"before": before, "run": run}


def _timed(dev_eval: StsbDevEval, embed: DevEmbedFn, device: torch.device) -> tuple[float, dict[str, float]]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    scores = dev_eval(embed)  # returns floats: the device has finished
    return time.perf_counter() - t0, scores


def measure(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Seconds per dev evaluation of both paths (interleaved) and their numbers' largest difference."""
    encoder = load_encoder(args.model, args.device)
    _, token_lengths = encoder_functions(encoder, args.pooler)
    dev_eval = StsbDevEval(senteval_dir(resolve_data_root(args.data_dir)), token_lengths=token_lengths)
    paths = embed_paths(encoder, args.pooler, args.precision)
    device = encoder.device
    scores = {name: dev_eval(embed) for name, embed in paths.items()}  # warm-up: kernels, caches
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.repeats):
        for name, embed in paths.items():
            spent, got = _timed(dev_eval, embed, device)
            seconds[name].append(spent)
            if got != scores[name]:
                log(f"   note: {name} gave other numbers on a repeat: {got} vs {scores[name]}")
    diff = {k: abs(scores["run"][k] - scores["before"][k]) for k in scores["before"]}
    result = {
        "model": args.model,
        "device": str(device),
        "precision": args.precision,
        "sentences": len(dev_eval.sentences),
        "before_s": round(statistics.median(seconds["before"]), 4),
        "run_s": round(statistics.median(seconds["run"]), 4),
        "before_best_s": round(min(seconds["before"]), 4),
        "run_best_s": round(min(seconds["run"]), 4),
        "speedup": round(statistics.median(seconds["before"]) / statistics.median(seconds["run"]), 2),
        "max_abs_diff": {k: float(f"{v:.3g}") for k, v in diff.items()},
        "scores": scores["run"],
    }
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"cpu {cpu_description()}, torch threads {torch.get_num_threads()}, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    result = measure(args)
    print(f"load after timing: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{result['model']} on {result['device']} ({result['precision']}), {result['sentences']} sentences, "
        f"{args.repeats} dev evaluations per path, interleaved"
    )
    print(f"{'path':>8} {'median s':>9} {'best s':>8}")
    for name in ("before", "run"):
        print(f"{name:>8} {result[f'{name}_s']:9.3f} {result[f'{name}_best_s']:8.3f}")
    print(f"speed ratio before / run: {result['speedup']:.2f}x; |run - before|: {result['max_abs_diff']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
