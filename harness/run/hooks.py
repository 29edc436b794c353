"""What a run evaluates with: the STS-B dev evaluation, the final tasks, post-whitening."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.config.paths import senteval_dir
from harness.evaluation.embed import EmbedFn, LengthsFn
from harness.evaluation.geometry import DevEmbedFn, StsbDevEval
from harness.evaluation.runner import run_evaluation
from harness.postprocess.flow import fit_flow, reading_of
from harness.postprocess.whitening import apply_post_whitening, fit_post_whitening

EMBED_BATCH = 128


# -- evaluation hooks (looked up at call time so tests can replace them) --------------------------
def make_dev_eval(
    data_root: Path, token_lengths: LengthsFn | None = None
) -> Callable[[DevEmbedFn], dict[str, float]]:
    """The STS-B dev evaluation: ``dev_eval(embed) -> {"stsb_dev", "align", "uniform"}``.

    ``token_lengths`` (the encoder tokenizer's counts) lets the dev evaluation batch the dev sentences by
    token length, as ``harness eval`` does; without it batches are sorted by characters and pad far more.
    """

    dev_eval: Callable[[DevEmbedFn], dict[str, float]] = StsbDevEval(
        senteval_dir(data_root), token_lengths=token_lengths
    )
    return dev_eval


FinalEvaluator = Callable[[EmbedFn, Path, str, str], dict[str, Any]]


FINAL_SECONDS = "seconds"
"""Key of a final evaluator's result holding seconds per task group; the run record keeps it as
``final_seconds`` (what the cost model calibrates the STS and transfer passes from)."""


def make_final_evaluator(
    token_lengths: LengthsFn | None = None, device: torch.device | None = None
) -> FinalEvaluator:
    """The final evaluation, imported before training starts so that a missing evaluator fails fast.

    Args:
        token_lengths: the encoder tokenizer's counts, so STS batches are sorted by token length
            exactly as ``harness eval`` sorts them (same numbers, far less padding).
        device: the run's device: on an accelerator the transfer classifiers train there, as
            SentEval's do on a GPU; on the CPU (or ``None``) in processes on the CPU.

    Returns:
        ``evaluate(embed, data_root, tasks, mode) -> {"sts": {..., "avg"}, "transfer": {..., "avg"}}``.
    """

    def final(embed: EmbedFn, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        report = run_evaluation(embed, data_root, tasks, mode, token_lengths=token_lengths, device=device)
        result: dict[str, Any] = report.record()  # results + sts_aggregates (all/mean/wmean)
        result[FINAL_SECONDS] = {k: round(v, 3) for k, v in report.seconds.items()}
        return result

    return final


Whitening = tuple[str, np.ndarray, np.ndarray]
"""BERT-whitening as fitted: ``(kind, mu [1, d], W [d, k])``; the transform is ``(x - mu) @ W``."""


def fit_post_processing(
    embed: EmbedFn, sentences: Sequence[str], kind: str, *, seed: int = 0
) -> tuple[EmbedFn, Whitening | None]:
    """:func:`fit_whitening`, and for BERT-whitening (``zca``, ``pca``) the fitted transform too (a
    run saves it beside its encoder for ``harness export``; a flow has no such form: None)."""
    if kind.startswith("flow"):
        return fit_whitening(embed, sentences, kind, seed=seed), None
    mu, w = fit_post_whitening(embed_all(embed, sentences), kind)  # type: ignore[arg-type]
    return whiten_with(embed, mu, w), (kind, mu, w)


def fit_whitening(embed: EmbedFn, sentences: Sequence[str], kind: str, *, seed: int = 0) -> EmbedFn:
    """The post-processed embed: its transform fitted on ``embed(sentences)``.

    ``kind`` is a ``post_whiten`` choice: BERT-whitening (``zca``, ``pca``: mean and matrix) or
    BERT-flow (``flow``, ``flow_glow``: a normalising flow fitted by maximum likelihood, seeded by
    ``seed``; the embed then returns its latents).
    """
    feats = embed_all(embed, sentences)
    if kind.startswith("flow"):
        fitted = fit_flow(feats, reading_of(kind), seed=seed)

        def flowed(batch: list[str]) -> np.ndarray:
            return fitted.transform(embed(batch))

        return flowed

    mu, w = fit_post_whitening(feats, kind)  # type: ignore[arg-type]
    return whiten_with(embed, mu, w)


def embed_all(embed: EmbedFn, sentences: Sequence[str]) -> np.ndarray:
    """``embed`` over ``sentences`` in batches of :data:`EMBED_BATCH`, concatenated."""
    return np.concatenate(
        [embed(list(sentences[i : i + EMBED_BATCH])) for i in range(0, len(sentences), EMBED_BATCH)]
    )


def whiten_with(embed: EmbedFn, mu: np.ndarray, w: np.ndarray) -> EmbedFn:
    """``embed`` followed by BERT-whitening's ``(x - mu) @ W``."""

    def whitened(batch: list[str]) -> np.ndarray:
        return apply_post_whitening(embed(batch), mu, w)

    return whitened


def cpu_bf16_slowdown(n: int = 512) -> float:
    """How many times slower a bf16 matmul is than an fp32 one on this CPU (measured, <= ~1 s).

    CPUs without native bf16 (no AVX512-BF16 / AMX) emulate it, often 10-100x slower; the CPU flags
    that would tell are hidden on some virtual machines, so this measures instead of looking up.
    """
    timings = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        a @ b  # the first calls pick and build the kernel
        a @ b
        best = math.inf
        for _ in range(5):  # the fastest of five: a busy machine slows single calls, not the best one
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        timings[dtype] = best
    return timings[torch.bfloat16] / max(timings[torch.float32], 1e-9)


def non_finite_scores(final: Mapping[str, Any]) -> list[str]:
    """``group.task=value`` for each final score (``final.sts``, ``final.transfer``) that is not a
    finite number."""
    bad = []
    for group in ("sts", "transfer"):
        scores = final.get(group)
        if not isinstance(scores, Mapping):
            continue
        for task, value in scores.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if isinstance(value, bool) or not math.isfinite(number):
                bad.append(f"{group}.{task}={value}")
    return bad
