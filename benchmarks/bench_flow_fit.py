"""Fit time of BERT-flow post-processing (harness/postprocess/flow.py) on corpus-sentence embeddings.

Embeds the first ``--sentences`` corpus sentences with the encoder and pooler (first-last avg., as the
flow rows of the tables use), then fits each flow reading on them, single-threaded by default (a trial's
thread count), and prints the embedding time, the fit time, its steps and seconds per sentence (what
``harness.grid.plan.unit_costs.FLOW_FIT_S_PER_SENTENCE`` holds), the first and last step's bits per
dimension, the processor and the load average. ``--synthetic D`` fits on Gaussian data of width D
instead, without an encoder.

Usage::

    .venv/bin/python benchmarks/bench_flow_fit.py                    # packaged encoder, 10000 sentences
    .venv/bin/python benchmarks/bench_flow_fit.py --synthetic 768    # no encoder, BERT-base's width
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_corpus, resolve_data_root
from harness.postprocess.flow import READINGS, fit_flow
from harness.run.data import read_corpus
from harness.run.hooks import EMBED_BATCH


def embeddings(args: argparse.Namespace) -> np.ndarray:
    """The fitting data: corpus embeddings (timed and printed) or Gaussian rows of width ``--synthetic``."""
    if args.synthetic:
        rng = np.random.default_rng(0)
        mix = rng.standard_normal((args.synthetic, args.synthetic)) / np.sqrt(args.synthetic)
        return (rng.standard_normal((args.sentences, args.synthetic)) @ mix).astype(np.float32)
    from harness.encoder.loading import load_encoder
    from harness.evaluation.runner import encoder_functions

    root = resolve_data_root(args.data_dir)
    sentences = read_corpus(resolve_corpus(args.corpus, root))[: args.sentences]
    encoder = load_encoder(args.model)
    embed, _ = encoder_functions(encoder, args.pooler)
    t0 = time.perf_counter()
    feats = np.concatenate(
        [embed(sentences[i : i + EMBED_BATCH]) for i in range(0, len(sentences), EMBED_BATCH)]
    )
    print(
        f"encoder {encoder.name}, pooler {args.pooler}: embedded {len(sentences)} sentences in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    return feats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="encoder (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--pooler", default="avg_first_last")
    parser.add_argument("--corpus", default="corpus/nli-sentences.txt")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--sentences", type=int, default=10000, help="fitting sentences (default 10000)")
    parser.add_argument("--synthetic", type=int, default=0, help="fit on Gaussian data of this width")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    print(f"cpu {cpu_description()}, torch threads {torch.get_num_threads()}")
    feats = embeddings(args)
    print(f"fitting data: {feats.shape[0]} x {feats.shape[1]}")
    for name, config in READINGS.items():
        t0 = time.perf_counter()
        fitted = fit_flow(feats, config, seed=args.seed)
        seconds = time.perf_counter() - t0
        steps = len(fitted.losses)
        print(
            f"{name:>10}: fit {seconds:6.2f} s, {steps} steps ({1000 * seconds / steps:.1f} ms/step), "
            f"{seconds / feats.shape[0]:.2e} s/sentence; bits/dim {fitted.losses[0]:.3f} -> "
            f"{fitted.losses[-1]:.3f}"
        )
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
