"""Benchmark: whether training losses in each precision track fp32's over the first steps.

The harness's SimCSE step (:class:`harness.run.step.TrainStep`, as ``bench_train_step.py`` builds it)
trains the same encoder weights on the same batches with the same dropout masks once per precision,
one precision after another, and records every step's loss. Printed per precision against fp32: the
largest loss difference over the first 10 steps and over all, the mean absolute difference over the
last quarter of the steps, and beside it the batch-to-batch spread of fp32's own loss there (the
standard deviation of its step-to-step changes), the scale a difference is small or large against.

CPU: ``python benchmarks/bench_precision_losses.py --precisions fp32,bf16 --steps 50`` (on a CPU
``tf32`` computes what ``fp32`` does). GPU (``make gpu-check`` runs it):
``python benchmarks/bench_precision_losses.py --model random:bert-base --device cuda --steps 200``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import bench_train_step
import torch

REFERENCE = "fp32"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm", help="encoder (random:bert-base on a GPU box)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--precisions",
        default=None,
        help="comma-separated (default: fp32,tf32,bf16 on cuda, fp32,bf16 elsewhere)",
    )
    parser.add_argument("--steps", type=int, default=200, help="training steps per precision")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--data-dir", default=None, help="data root (corpus/nli-sentences.txt)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", default=None, help="also write the losses and the comparison to this file")
    return parser.parse_args(argv)


def precisions(args: argparse.Namespace) -> list[str]:
    if args.precisions:
        chosen = [p.strip() for p in args.precisions.split(",") if p.strip()]
    else:
        chosen = ["fp32", "tf32", "bf16"] if args.device.startswith("cuda") else ["fp32", "bf16"]
    return [REFERENCE, *(p for p in chosen if p != REFERENCE)]


def losses_of(args: argparse.Namespace, precision: str, corpus: Path, sentences: list[str]) -> list[float]:
    """Every step's loss of one precision's training from the seed's weights, batches and masks."""
    from harness.run.data import batches

    step_args = argparse.Namespace(**vars(args), bf16=precision == "bf16")
    step, encoder = bench_train_step.build_ours(step_args, corpus, args.steps, precision)
    stream = batches(sentences, args.batch_size, args.seed)
    out = [step(next(stream), i + 1) for i in range(args.steps)]
    del step, encoder
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def compare(reference: list[float], other: list[float]) -> dict[str, float]:
    """``other`` against ``reference`` (fp32): its largest and late differences, and fp32's spread."""
    diffs = [abs(a - b) for a, b in zip(reference, other, strict=True)]
    tail = max(2, len(reference) // 4)
    changes = [b - a for a, b in zip(reference[-tail - 1 :], reference[-tail:], strict=False)]
    return {
        "max_abs_first_10": max(diffs[:10]),
        "max_abs": max(diffs),
        "mean_abs_last_quarter": statistics.fmean(diffs[-tail:]),
        "reference_step_change_sd_last_quarter": statistics.stdev(changes) if len(changes) > 1 else 0.0,
        "mean_last_quarter": statistics.fmean(other[-tail:]),
        "reference_mean_last_quarter": statistics.fmean(reference[-tail:]),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from harness.config.hardware import cpu_description
    from harness.config.paths import resolve_corpus, resolve_data_root
    from harness.run.data import read_corpus

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda but no GPU is visible", file=sys.stderr)
        return 2
    if args.steps < 2:
        print(f"error: --steps {args.steps}: at least 2 steps to compare", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = resolve_corpus(None, resolve_data_root(args.data_dir))
    sentences = read_corpus(corpus, args.batch_size)
    where = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"cpu {cpu_description()}"
    print(
        f"{where}: model {args.model}, batch {args.batch_size}, max length {args.max_length}, "
        f"{args.steps} steps per precision, seed {args.seed}",
        flush=True,
    )
    losses = {p: losses_of(args, p, corpus, sentences) for p in precisions(args)}
    reference = losses[REFERENCE]
    result: dict[str, Any] = {
        "model": args.model,
        "device": args.device,
        "steps": args.steps,
        "losses": losses,
    }
    result["against_fp32"] = {p: compare(reference, v) for p, v in losses.items() if p != REFERENCE}
    for precision, c in result["against_fp32"].items():
        print(
            f"  {precision} against fp32: loss differences at most {c['max_abs_first_10']:.4f} over the "
            f"first 10 steps, {c['max_abs']:.4f} over all; {c['mean_abs_last_quarter']:.4f} on average "
            f"over the last quarter, where fp32's loss changes by "
            f"{c['reference_step_change_sd_last_quarter']:.4f} "
            f"(sd) from one step to the next; mean loss there {c['mean_last_quarter']:.4f} against "
            f"{c['reference_mean_last_quarter']:.4f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
