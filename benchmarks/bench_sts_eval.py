"""Benchmark: the harness's STS evaluation against SentEval's pipeline, on the same encoder.

"SentEval pipeline" = :func:`harness.evaluation.sts.run_sts` with ``exact_batches=True`` and
``all_splits=True``: SentEval's own encoder calls (per subset or split, chunks of 128 pairs,
sentence-1 chunk then sentence-2 chunk, file or sorted order as SentEval has it), on the train, dev
and test splits of STS-B and SICK-R as SentEval encodes them. "Harness" = the default path: the
distinct sentences of what is reported, embedded once each in token-length-sorted batches, the
last layer computed at [CLS] only for the CLS poolers, fp32 linear layers through oneDNN
(:func:`harness.encoder.cpu_kernels.onednn_linears`); the SentEval pipeline runs the plain model forward (all
positions of every layer, PyTorch's default BLAS), as SentEval's batcher would. "harness bf16" = the default
path under bf16 autocast (``eval_precision = "bf16"``); its deviation from fp32 is printed per task.

SentEval itself is not on PyPI and GitHub is out of reach from this machine, so its engine cannot be
run here; the pipeline above reproduces its encoder calls, and both paths are checked against
SentEval's own recorded output for the packaged encoder (``harness.evaluation.reference``).

Both run in this process on the packaged encoder (by default), one after the other. Printed: wall
time, process CPU time (less sensitive to other processes on a shared machine), sentences embedded,
padded tokens the encoder processed (batch size x longest sentence, summed: load-independent),
sentences/second, the speed ratio, and how far the two paths' numbers are apart.

    .venv/bin/python benchmarks/bench_sts_eval.py                      # all seven tasks (minutes)
    .venv/bin/python benchmarks/bench_sts_eval.py --tasks STS13 STS16  # a quick subset
    .venv/bin/python benchmarks/bench_sts_eval.py --work-only          # token counts only, no encoding
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_data_root, senteval_dir
from harness.encoder.loading import load_encoder
from harness.evaluation.reference import SENTEVAL_STS_MINILM
from harness.evaluation.runner import encoder_functions
from harness.evaluation.sts import (
    BATCH_SIZE,
    SPLITS,
    STS_TASKS,
    StsReport,
    check_tasks,
    distinct_by_length,
    load_sts_task,
    run_sts,
)

REFERENCE = {k: v for k, v in SENTEVAL_STS_MINILM.items() if k != "avg"}
"""Per-task reference; the average is recomputed for whichever tasks are benchmarked."""


def padded_tokens(batches: list[list[str]], lengths: dict[str, int]) -> tuple[int, int]:
    """(padded tokens, real tokens) the encoder sees for these batches."""
    padded = sum(len(b) * max(lengths[s] for s in b) for b in batches)
    real = sum(lengths[s] for b in batches for s in b)
    return padded, real


def work(senteval: Path, tasks: tuple[str, ...], token_lengths: Callable[[list[str]], Sequence[int]]) -> None:
    """Print the encoder work of both pipelines, counted in tokens (no encoding)."""
    senteval_batches: list[list[str]] = []
    reported: list[str] = []
    for task in tasks:
        for part, pairs in load_sts_task(senteval, task, SPLITS).items():
            for start in range(0, len(pairs), BATCH_SIZE):
                senteval_batches.append(list(pairs.sent1[start : start + BATCH_SIZE]))
                senteval_batches.append(list(pairs.sent2[start : start + BATCH_SIZE]))
            if part in ("train", "dev"):
                continue
            reported += [*pairs.sent1, *pairs.sent2]
    every = sorted({s for b in senteval_batches for s in b})
    lengths = dict(zip(every, token_lengths(every)))
    order = distinct_by_length(reported, token_lengths)
    harness_batches = [order[i : i + BATCH_SIZE] for i in range(0, len(order), BATCH_SIZE)]
    for name, batches in (("SentEval pipeline", senteval_batches), ("harness", harness_batches)):
        padded, real = padded_tokens(batches, lengths)
        n = sum(map(len, batches))
        print(f"{name:>18}: {n:6d} sentences, {padded:8d} padded tokens ({real} real)")
    ratio = padded_tokens(senteval_batches, lengths)[0] / padded_tokens(harness_batches, lengths)[0]
    print(f"{'work ratio':>18}: {ratio:.2f}x fewer padded tokens")


def timed(fn: Callable[[], StsReport]) -> tuple[StsReport, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    report = fn()
    return report, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="encoder (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--pooler", default="cls_before_pooler")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--tasks", nargs="+", default=list(STS_TASKS), help="STS tasks (default: all 7)")
    parser.add_argument("--work-only", action="store_true", help="count tokens only, encode nothing")
    parser.add_argument("--skip-bf16", action="store_true", help="do not time the bf16 evaluation")
    parser.add_argument(
        "--also-blas",
        action="store_true",
        help="also time the harness path with fp32 linear layers on PyTorch's default BLAS, not oneDNN",
    )
    args = parser.parse_args()

    senteval = senteval_dir(resolve_data_root(args.data_dir))
    tasks = check_tasks(args.tasks)
    encoder = load_encoder(args.model)
    embed, token_lengths = encoder_functions(encoder, args.pooler)
    print(f"encoder {encoder.name}, pooler {args.pooler}, torch threads {torch.get_num_threads()}")
    print(f"cpu {cpu_description()}")
    print(f"tasks: {' '.join(tasks)}")
    work(senteval, tasks, token_lengths)
    if args.work_only:
        return
    embed(["warm up the encoder ."] * 8)

    bf16_embed, _ = encoder_functions(encoder, args.pooler, "bf16")

    def plain_forward(fn: Callable[[], StsReport], cls_shortcut: bool = False) -> StsReport:
        """The model's own forward, as SentEval's batcher would run it: every position of every
        layer (unless ``cls_shortcut``), fp32 linear layers on PyTorch's default BLAS."""
        encoder.cls_shortcut, encoder.onednn_fp32 = cls_shortcut, False
        try:
            return fn()
        finally:
            encoder.cls_shortcut, encoder.onednn_fp32 = True, True

    fast, fast_wall, fast_cpu = timed(lambda: run_sts(embed, senteval, tasks, token_lengths=token_lengths))
    rows = []
    if args.also_blas:
        blas, blas_wall, blas_cpu = timed(
            lambda: plain_forward(lambda: run_sts(embed, senteval, tasks, token_lengths=token_lengths), True)
        )
        rows.append(("harness fp32 BLAS", blas, blas_wall, blas_cpu))
    if not args.skip_bf16:
        half, half_wall, half_cpu = timed(
            lambda: run_sts(bf16_embed, senteval, tasks, token_lengths=token_lengths)
        )
        rows.append(("harness bf16", half, half_wall, half_cpu))
    slow, slow_wall, slow_cpu = timed(
        lambda: plain_forward(lambda: run_sts(embed, senteval, tasks, exact_batches=True, all_splits=True))
    )
    print(f"load average after timing: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'':>18}  {'wall s':>8} {'cpu s':>8} {'sentences':>9} {'sent/s':>8} {'vs SentEval':>11}")
    for name, report, wall, cpu in (
        ("SentEval pipeline", slow, slow_wall, slow_cpu),
        ("harness fp32", fast, fast_wall, fast_cpu),
        *rows,
    ):
        n = report.sentences_embedded
        print(f"{name:>18}  {wall:8.1f} {cpu:8.1f} {n:9d} {n / wall:8.1f} {slow_wall / wall:10.2f}x")
    print(f"speed ratio (fp32): {slow_wall / fast_wall:.2f}x wall, {slow_cpu / fast_cpu:.2f}x cpu")
    for name, report, _, _ in rows:
        deviation = {t: report.scores[t] - fast.scores[t] for t in (*tasks, "avg")}
        worst = max(deviation, key=lambda t: abs(deviation[t]))
        print(
            f"{name} - harness fp32: max |deviation| {abs(deviation[worst]):.4f} ({worst}); "
            + ", ".join(f"{t} {d:+.4f}" for t, d in deviation.items())
        )

    print(f"{'task':>16} {'SentEval pipe':>13} {'harness':>9} {'diff':>9} {'reference':>9}")
    for task in (*tasks, "avg"):
        ref = REFERENCE.get(task, float(np.mean([REFERENCE[t] for t in tasks])) if task == "avg" else None)
        ref_text = f"{ref:9.2f}" if ref is not None else ""
        diff = fast.scores[task] - slow.scores[task]
        print(f"{task:>16} {slow.scores[task]:13.4f} {fast.scores[task]:9.4f} {diff:+9.5f} {ref_text}")
    if (args.model is None) and args.pooler == "cls_before_pooler":
        d_fast = max(abs(fast.scores[t] - REFERENCE[t]) for t in tasks)
        d_slow = max(abs(slow.scores[t] - REFERENCE[t]) for t in tasks)
        print(f"max |harness - reference| = {d_fast:.4f}; max |SentEval pipeline - reference| = {d_slow:.4f}")


if __name__ == "__main__":
    main()
