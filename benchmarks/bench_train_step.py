"""Training-step speed: the harness's SimCSE step against sentence-transformers' unsupervised SimCSE.

Both sides train the same encoder weights on the same batches of real corpus sentences:

* ours: :class:`harness.run.step.TrainStep` with the registered ``simcse`` method, exactly the step the
  training loop runs (one encoder call on the 2B repeated rows, MLP head, InfoNCE at tau = 0.05);
* theirs: a ``SentenceTransformer`` built from the same model directory with CLS pooling and
  ``MultipleNegativesRankingLoss(scale=20)`` (= 1 / 0.05) on ``(s, s)`` duplicated pairs, the
  library's documented unsupervised-SimCSE recipe (no MLP head).

Same optimiser settings on both sides: AdamW (lr 3e-5, no weight decay), linear decay, gradient-norm
clipping at 1.0, training truncation at ``--max-length``. The two are interleaved step by step (the
order alternates), after ``--warmup`` untimed steps each, so a noisy shared machine slows both alike.

CPU (the default): ``python benchmarks/bench_train_step.py --steps 10``.
GPU: ``python benchmarks/bench_train_step.py --model random:bert-base --device cuda --bf16 --steps 50``
also prints the implied time of one epoch over 1M sentences (15,625 steps at batch 64).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

EPOCH_STEPS_1M = 15_625


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="minilm", help="minilm (packaged), random:bert-base, a path or hub name"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true", help="autocast the forward passes to bfloat16")
    parser.add_argument(
        "--variants",
        default="",
        help="comma-separated harness variants timed side by side, each 'fp32' or 'bf16' with an optional "
        "'+bN' (N length buckets), '+fullcls' (full last layer), '+blas' (fp32 linear layers on "
        "PyTorch's default BLAS, not oneDNN), '+lookups' (one word-embedding lookup per bucket, not "
        "one per call), '+padded' (every bucket padded, not packed real tokens) and '+compile' "
        "(the compiled step: torch.compile, CUDA graphs on a GPU), "
        "e.g. fp32+b4,fp32+b4+blas,bf16+b4,bf16+b4+lookups,bf16+compile "
        "(default: one, from --bf16); "
        "sentence-transformers runs in fp32 unless --bf16",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--data-dir", default=None, help="data root (corpus/nli-sentences.txt)")
    parser.add_argument("--corpus", default=None, help="corpus file (default: the data root's NLI corpus)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    return parser.parse_args(argv)


def matmul_gflops(dtype: torch.dtype, n: int = 1024, reps: int = 5) -> float:
    """Measured square-matmul throughput at ``dtype`` on the CPU (the flags that advertise native bf16
    are hidden on some virtual machines, so it is measured rather than looked up)."""
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    a @ b  # warm-up
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def build_ours(
    args: argparse.Namespace, corpus: Path, total: int, variant: str = ""
) -> tuple[Callable[[list[str], int], float], Any]:
    """The harness's step; returns ``(step(sentences, i) -> loss, encoder)``.

    ``variant``: ``fp32`` or ``bf16``, optionally ``+bN`` for N length buckets, ``+fullcls`` for
    the full last layer instead of the [CLS]-only one, ``+blas`` for fp32 linear layers on
    PyTorch's default BLAS instead of oneDNN, ``+lookups`` for a word-embedding lookup per bucket,
    ``+padded`` for every bucket padded instead of packed real tokens and ``+compile`` for the
    compiled step ("" = from --bf16).
    """
    spec = variant or ("bf16" if args.bf16 else "fp32")
    full_last_layer = "+fullcls" in spec
    blas = "+blas" in spec
    per_bucket = "+lookups" in spec
    compiled = "+compile" in spec
    padded = "+padded" in spec
    bare = spec
    for flag in ("+fullcls", "+blas", "+lookups", "+compile", "+padded"):
        bare = bare.replace(flag, "")
    precision, _, buckets = bare.partition("+b")
    from harness.encoder.loading import load_encoder
    from harness.run.data import seed_everything
    from harness.run.step import TrainStep
    from harness.store.run_config import resolve_config
    from methods import get_method

    config = resolve_config(
        "simcse",
        None,
        "cpu",
        {
            "model": args.model,
            "corpus": str(corpus),
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "max_steps": total,
            "seed": args.seed,
            "precision": precision,
            "length_buckets": int(buckets or 1),
            "threads": torch.get_num_threads(),
        },
    )
    seed_everything(args.seed)
    encoder = load_encoder(args.model, args.device, seed=args.seed)
    encoder.cls_shortcut = not full_last_layer
    encoder.onednn_fp32 = not blas
    encoder.one_word_lookup = not per_bucket
    encoder.packed_training = not padded
    method = get_method("simcse")(config.params, encoder.hidden_size).to(args.device)
    step = TrainStep(encoder, method, config, total, compile=compiled)

    def run(sentences: list[str], i: int) -> float:
        return float(step(sentences, i)[0])  # the loss read back: as the other side's step does

    return run, encoder


def build_theirs(args: argparse.Namespace, model_dir: str, total: int) -> Callable[[list[str], int], float]:
    """sentence-transformers' unsupervised SimCSE step on the same weights."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.modules import Pooling

    from harness.run.step import linear_schedule

    word = Transformer(model_dir, max_seq_length=args.max_length)
    dim_fn = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pooling = Pooling(dim_fn(), pooling_mode="cls")
    model = SentenceTransformer(modules=[word, pooling], device=args.device)
    loss_fn = MultipleNegativesRankingLoss(model, scale=20.0)
    # The loss holds the model as a sub-module: its parameters() already include the model's.
    params = [p for p in loss_fn.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=3e-5, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_schedule(total))
    model.train()
    device_type = torch.device(args.device).type
    preprocess = getattr(model, "preprocess", None) or model.tokenize

    def run(sentences: list[str], i: int) -> float:
        features = preprocess(sentences)
        features = {k: (v.to(args.device) if isinstance(v, torch.Tensor) else v) for k, v in features.items()}
        optimizer.zero_grad(set_to_none=True)
        autocast: contextlib.AbstractContextManager[Any] = (
            torch.autocast(device_type=device_type, dtype=torch.bfloat16)
            if args.bf16
            else contextlib.nullcontext()
        )
        with autocast:
            loss = loss_fn([features, dict(features)], None)
        value = float(loss.detach().float().item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        return value

    return run


def summarise(times: list[float]) -> dict[str, float]:
    ms = [t * 1000 for t in times]
    return {
        "median_ms": statistics.median(ms),
        "mean_ms": statistics.fmean(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from harness.config.hardware import cpu_description
    from harness.config.models import packaged_model_dir
    from harness.config.paths import resolve_corpus, resolve_data_root
    from harness.run.data import batches, read_corpus

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cpu":
        peaks = f"fp32 {matmul_gflops(torch.float32):.0f} GFLOPS"
        if "bf16" in args.variants + (" bf16" if args.bf16 else ""):  # emulated bf16 is ~100x slower
            peaks += f", bf16 {matmul_gflops(torch.bfloat16):.0f} GFLOPS"
        print(f"cpu {cpu_description()}, matmul at {torch.get_num_threads()} threads: {peaks}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda but no GPU is visible", file=sys.stderr)
        return 2
    data_root = resolve_data_root(args.data_dir) if args.corpus is None else None
    corpus = resolve_corpus(args.corpus, data_root)
    sentences = read_corpus(corpus, args.batch_size)
    total = args.warmup + args.steps

    variants = [v.strip() for v in args.variants.split(",") if v.strip()] or [""]
    built = {v: build_ours(args, corpus, total, v) for v in variants}
    encoder = next(iter(built.values()))[1]
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "minilm":
            model_dir = str(packaged_model_dir())
        elif args.model.startswith("random:"):
            # The same random weights on both sides: save ours before either side trains.
            model_dir = tmp
            encoder.model.save_pretrained(tmp)
            encoder.tokenizer.save_pretrained(tmp)
        else:
            model_dir = args.model
        theirs = build_theirs(args, model_dir, total)

        stream = batches(sentences, args.batch_size, args.seed)
        names = {v: (f"ours[{v}]" if v else "ours") for v in variants}
        sides: dict[str, Callable[[list[str], int], float]] = {names[v]: built[v][0] for v in variants}
        sides["theirs"] = theirs
        timed: dict[str, list[float]] = {k: [] for k in sides}
        losses: dict[str, list[float]] = {k: [] for k in sides}
        keys = list(sides)
        for i in range(total):
            batch = next(stream)
            shift = i % len(keys)
            order = keys[shift:] + keys[:shift]  # rotate who goes first: load hits every side alike
            for name in order:
                sync(args.device)
                t0 = time.perf_counter()
                loss = sides[name](batch, i + 1)
                sync(args.device)
                elapsed = time.perf_counter() - t0
                losses[name].append(loss)
                if i >= args.warmup:
                    timed[name].append(elapsed)

    result: dict[str, Any] = {
        "model": args.model,
        "device": args.device,
        "bf16": args.bf16,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": torch.get_num_threads(),
        "first_losses": {k: v[:3] for k, v in losses.items()},
    }
    for name in sides:
        result[name] = summarise(timed[name])
    theirs_ms = result["theirs"]["median_ms"]
    first = names[variants[0]]
    result["ratio_ours_over_theirs"] = result[first]["median_ms"] / theirs_ms
    with open("/proc/loadavg", encoding="ascii") as handle:
        load = handle.read().split()[:3]
    print(
        f"model {args.model} on {args.device} ({torch.get_num_threads()} threads), batch {args.batch_size}, "
        f"max length {args.max_length}, {args.steps} timed steps after {args.warmup} warm-up steps, "
        f"interleaved; load average at the end {' '.join(load)}"
    )
    for name in sides:
        label = (
            "sentence-transformers MNRL" + (" bf16" if args.bf16 else " fp32") if name == "theirs" else name
        )
        s = result[name]
        epoch_h = s["median_ms"] * EPOCH_STEPS_1M / 1000 / 3600
        result[name]["epoch_1m_hours"] = epoch_h
        print(
            f"  {label:30s} median {s['median_ms']:9.1f} ms/step (mean {s['mean_ms']:.1f}, "
            f"min {s['min_ms']:.1f}, max {s['max_ms']:.1f}); "
            f"ratio to theirs {s['median_ms'] / theirs_ms:.3f}; "
            f"1M-sentence epoch ~ {epoch_h:.2f} h"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
