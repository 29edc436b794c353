"""``harness eval``'s job: score one encoder on the STS and/or SentEval transfer tasks.

The tasks are those of :mod:`harness.evaluation.tasks` (STS12-16, STS-B, SICK-R; MR, CR, SUBJ,
MPQA, SST2, TREC, MRPC); ``tasks`` takes a group or task names. The record holds the table's numbers
(percent, unrounded) under ``"sts"`` and/or ``"transfer"``, exactly as
:func:`harness.evaluation.runner.evaluate` returns them; ``"meta"`` (model, pooler, mode, timings)
and ``"details"`` (per-subset correlations) sit beside them.

A folder that sentence-transformers saved (``modules.json``, e.g. what ``harness export`` writes) is
scored as that folder embeds: its Pooling module chooses the pooler and its Dense / Normalize modules
follow (:mod:`harness.encoder.st_folder`), unless ``--pooler`` is given, which then pools the
transformer's output alone.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.atomic import check_output_file
from harness.config.hardware import default_device
from harness.config.inputs import check_arithmetic, check_device
from harness.config.models import check_model_inputs
from harness.config.paths import resolve_corpus, resolve_data_root, senteval_dir
from harness.config.settings import check_post_whiten_sentences
from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder, check_pooler
from harness.encoder.saved import check_encoder_only
from harness.encoder.st_folder import StPipeline, is_st_folder, read_st_folder
from harness.errors import DataError
from harness.evaluation.runner import (
    EvaluationReport,
    check_mode,
    encoder_functions,
    run_evaluation,
    select_tasks,
)
from harness.evaluation.tasks import sts_files
from harness.run.data import read_corpus
from harness.run.hooks import EmbedFn, LengthsFn, fit_whitening


@dataclass(frozen=True)
class EvalOptions:
    """What ``harness eval`` is asked (the command's flags, unchecked)."""

    output: str
    model: str | None = None
    pooler: str | None = None
    """None: a sentence-transformers folder's own pooling and layers, else ``cls_before_pooler``."""
    tasks: str = "all"
    mode: str = "fasttest"
    data_dir: str | None = None
    exact_batches: bool = False
    device: str | None = None
    precision: str = "fp32"
    post_whiten: str = "none"
    whiten_corpus: str | None = None
    whiten_sentences: int = 10000


@dataclass(frozen=True)
class EvalInputs:
    """The options checked before the encoder loads, with what they resolve to here."""

    pooler: str
    mode: str
    output: Path
    data_root: Path
    whiten_corpus: Path | None
    device: str
    pipeline: StPipeline | None = None
    """The sentence-transformers folder's layers after pooling, when its own pooling is used."""


@dataclass
class Evaluation:
    """One encoder's scores: the report, the JSON record to write, the checked inputs."""

    model: str
    inputs: EvalInputs
    report: EvaluationReport
    record: dict[str, Any]


def check_inputs(options: EvalOptions) -> EvalInputs:
    """Everything a user can get wrong, checked before the encoder loads (one error line each); the
    output is proved writable first, so results are never lost."""
    check_device(options.device)
    device = options.device or default_device()
    check_arithmetic(device, {"--precision": options.precision})
    if options.model:  # a saved run whose sentence embedding is its method's head, not a pooler
        check_encoder_only(options.model, "harness eval")
    check_model_inputs(options.model)  # config, tokenizer, vocabulary, positions: before the weights load
    pipeline = None
    if options.pooler is None and is_st_folder(options.model):
        pipeline = read_st_folder(str(options.model))
    pooler = pipeline.pooler if pipeline else check_pooler(options.pooler or "cls_before_pooler", "--pooler")
    selection = select_tasks(options.tasks)
    mode = check_mode(options.mode, "--mode")
    output = check_output_file(Path(options.output), "--output")
    data_root = resolve_data_root(options.data_dir)
    senteval = senteval_dir(data_root)
    if "sts" in selection.groups:
        missing = [p for p in sts_files(senteval, selection.sts) if not p.is_file()]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise DataError(f"STS data file not found: {missing[0]}{more}")
    whiten_corpus = None
    if options.post_whiten != "none":
        check_post_whiten_sentences("--whiten-sentences", options.whiten_sentences)
        whiten_corpus = resolve_corpus(options.whiten_corpus, data_root)
    return EvalInputs(pooler, mode, output, data_root, whiten_corpus, device, pipeline)


def evaluate_encoder(options: EvalOptions) -> Evaluation:
    """Check the options, load the encoder, embed (post-whitened when asked) and score the tasks."""
    inputs = check_inputs(options)
    started = time.perf_counter()
    encoder, embed, token_lengths = _embedder(options, inputs)
    report = run_evaluation(
        embed,
        inputs.data_root,
        options.tasks,
        inputs.mode,
        exact_batches=options.exact_batches,
        token_lengths=token_lengths,
        device=encoder.device,  # a GPU trains the transfer classifiers too, as SentEval does there
    )
    record: dict[str, Any] = dict(report.results)
    seconds = {**report.seconds, "total": time.perf_counter() - started}
    record["meta"] = _meta(options, inputs, encoder.name, seconds)
    record["details"] = report.details
    return Evaluation(encoder.name, inputs, report, record)


def format_table(results: dict[str, dict[str, float]]) -> str:
    """The results as a readable table: one block per group, task names over scores (2 decimals)."""
    lines = []
    for group, scores in results.items():
        names = list(scores)
        width = [max(len(n), 6) for n in names]
        lines.append(f"{group.upper()}")
        lines.append("  ".join(n.rjust(w) for n, w in zip(names, width)))
        lines.append("  ".join(f"{scores[n]:.2f}".rjust(w) for n, w in zip(names, width)))
    return "\n".join(lines)


def non_finite(results: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of the scores in ``results`` that are NaN or infinite."""
    out: list[str] = []
    for key, value in results.items():
        if isinstance(value, dict):
            out += non_finite(value, f"{prefix}{key}.")
        elif isinstance(value, float) and not math.isfinite(value):
            out.append(f"{prefix}{key}")
    return out


def _embedder(options: EvalOptions, inputs: EvalInputs) -> tuple[SentenceEncoder, EmbedFn, LengthsFn]:
    """The loaded encoder, its embedding function (post-whitened when asked) and token lengths."""
    encoder = load_encoder(options.model, device=inputs.device)
    problem = encoder.pooler_problem(inputs.pooler, "--pooler")  # cls: the model's pooler layer
    if problem is not None:
        raise problem
    embed, token_lengths = encoder_functions(encoder, inputs.pooler, options.precision)
    if inputs.pipeline is not None and inputs.pipeline.layers:
        pooled, pipeline = embed, inputs.pipeline

        def embed(sentences: list[str]) -> np.ndarray:
            return pipeline.apply(pooled(sentences))

    if inputs.whiten_corpus is not None:
        fit_on = read_corpus(inputs.whiten_corpus)[: options.whiten_sentences]
        embed = fit_whitening(embed, fit_on, options.post_whiten)
    return encoder, embed, token_lengths


def _meta(options: EvalOptions, inputs: EvalInputs, model: str, seconds: dict[str, float]) -> dict[str, Any]:
    """The output's ``meta`` block: what was evaluated, how, where, and how long it took."""
    return {
        "model": model,
        "pooler": inputs.pooler,
        "st_layers": len(inputs.pipeline.layers) if inputs.pipeline is not None else None,
        "tasks": options.tasks,
        "mode": inputs.mode,
        "exact_batches": bool(options.exact_batches),
        "precision": options.precision,
        "post_whiten": options.post_whiten,
        "whiten_corpus": str(inputs.whiten_corpus) if inputs.whiten_corpus else None,
        "whiten_sentences": options.whiten_sentences if inputs.whiten_corpus else None,
        "device": str(inputs.device),
        "data_root": str(inputs.data_root),
        "seconds": seconds,
    }
