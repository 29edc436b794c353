"""Training-step speed: the harness's SimCSE step against sentence-transformers' unsupervised SimCSE.

Both sides train the same encoder weights on the same batches of real corpus sentences:

* ours: :class:`harness.train.TrainStep` with the registered ``simcse`` method, exactly the step the
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


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def build_ours(
    args: argparse.Namespace, corpus: Path, total: int
) -> tuple[Callable[[list[str], int], float], Any]:
    """The harness's step; returns ``(step(sentences, i) -> loss, encoder)``."""
    from harness.config import resolve_config
    from harness.encoder import load_encoder
    from harness.train import TrainStep, seed_everything
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
            "precision": "bf16" if args.bf16 else "fp32",
        },
    )
    seed_everything(args.seed)
    encoder = load_encoder(args.model, args.device, seed=args.seed)
    method = get_method("simcse")(config.params, encoder.hidden_size).to(args.device)
    step = TrainStep(encoder, method, config, total)

    def run(sentences: list[str], i: int) -> float:
        return step(sentences, i)[0]

    return run, encoder


def build_theirs(args: argparse.Namespace, model_dir: str, total: int) -> Callable[[list[str], int], float]:
    """sentence-transformers' unsupervised SimCSE step on the same weights."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.modules import Pooling

    from harness.train import linear_schedule

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
    from harness.encoder import packaged_model_dir
    from harness.paths import resolve_corpus, resolve_data_root
    from harness.train import batches, read_corpus

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda but no GPU is visible", file=sys.stderr)
        return 2
    data_root = resolve_data_root(args.data_dir) if args.corpus is None else None
    corpus = resolve_corpus(args.corpus, data_root)
    sentences = read_corpus(corpus, args.batch_size)
    total = args.warmup + args.steps

    ours, encoder = build_ours(args, corpus, total)
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
        timed: dict[str, list[float]] = {"ours": [], "theirs": []}
        losses: dict[str, list[float]] = {"ours": [], "theirs": []}
        sides = {"ours": ours, "theirs": theirs}
        for i in range(total):
            batch = next(stream)
            order = ["ours", "theirs"] if i % 2 == 0 else ["theirs", "ours"]
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
        "ours": summarise(timed["ours"]),
        "theirs": summarise(timed["theirs"]),
        "first_losses": {k: v[:3] for k, v in losses.items()},
    }
    result["ratio_ours_over_theirs"] = result["ours"]["median_ms"] / result["theirs"]["median_ms"]
    precision = "bf16" if args.bf16 else "fp32"
    print(
        f"model {args.model} on {args.device} ({precision}, {torch.get_num_threads()} threads), "
        f"batch {args.batch_size}, max length {args.max_length}, {args.steps} timed steps after "
        f"{args.warmup} warm-up steps, interleaved"
    )
    for name, label in (("ours", "harness SimCSE"), ("theirs", "sentence-transformers MNRL")):
        s = result[name]
        epoch_h = s["median_ms"] * EPOCH_STEPS_1M / 1000 / 3600
        result[name]["epoch_1m_hours"] = epoch_h
        print(
            f"  {label:28s} median {s['median_ms']:9.1f} ms/step (mean {s['mean_ms']:.1f}, "
            f"min {s['min_ms']:.1f}, max {s['max_ms']:.1f}); 1M-sentence epoch ~ {epoch_h:.2f} h"
        )
    print(f"  ratio ours/theirs (median): {result['ratio_ours_over_theirs']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
