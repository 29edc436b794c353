"""``harness eval``: evaluate an encoder on the STS and/or SentEval transfer tasks.

The tasks are those of :mod:`harness.evaluation.tasks` (STS12-16, STS-B, SICK-R; MR, CR, SUBJ,
MPQA, SST2, TREC, MRPC); ``--tasks`` takes a group or task names.

The output JSON holds the table's numbers (percent, unrounded) under ``"sts"`` and/or
``"transfer"``, exactly as :func:`harness.evaluation.runner.evaluate` returns them; ``"meta"``
(model, pooler, mode, timings) and ``"details"`` (per-subset correlations) sit beside them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.commands.arguments import add_data_dir
from harness.config.choices import POOLERS, POST_WHITEN, PRECISIONS

HELP = "evaluate an encoder on the STS and/or SentEval transfer tasks (see --tasks)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="encoder: a local directory, a hub name, 'minilm' or 'random:tiny' "
        "(default: the packaged all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--pooler", default="cls_before_pooler", help=f"{', '.join(POOLERS)} (default: cls_before_pooler)"
    )
    parser.add_argument(
        "--tasks",
        default="all",
        help="sts, transfer or all (default: all), or comma-separated task names such as "
        "STS12,SICKRelatedness (an unknown name lists the registered ones)",
    )
    parser.add_argument(
        "--mode", default="fasttest", help="transfer parameter set: test or fasttest (default: fasttest)"
    )
    add_data_dir(parser)
    parser.add_argument("--output", required=True, help="JSON file to write (its folder is created)")
    parser.add_argument(
        "--exact-batches",
        action="store_true",
        help="STS: make SentEval's own encoder calls (slower) instead of embedding each distinct "
        "sentence once in length-sorted batches",
    )
    parser.add_argument(
        "--device", default=None, help="torch device (default: cuda when available, else cpu)"
    )
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=PRECISIONS,
        help="fp32 (default: SentEval's numbers) or bf16 autocast (faster where the CPU or GPU has native "
        "bf16; benchmarks/bench_sts_eval.py prints how far it moves the scores)",
    )
    parser.add_argument(
        "--post-whiten",
        default="none",
        choices=POST_WHITEN,
        help="post-processing of the evaluation embeddings, fitted on corpus sentences: BERT-whitening "
        "(zca, pca: mean and matrix) or BERT-flow (flow: the released code's flow, flow_glow: Glow's "
        "reading; seed 0)",
    )
    parser.add_argument(
        "--whiten-corpus",
        default=None,
        help="one-sentence-per-line file to fit the post-processing on (default: the data root's corpus)",
    )
    parser.add_argument(
        "--whiten-sentences",
        type=int,
        default=10000,
        help="how many corpus sentences (from the top of the file) fit the post-processing (default 10000)",
    )


def _prepare_output(path: Path) -> Path:
    """Prove ``--output`` can be written before anything is evaluated (results are never lost)."""
    from harness.atomic import check_output_file

    return check_output_file(path, "--output")


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


@dataclass(frozen=True)
class _Inputs:
    """What ``harness eval`` was asked, checked before the encoder loads."""

    pooler: str
    mode: str
    output: Path
    data_root: Path
    whiten_corpus: Path | None
    device: str


def run(args: argparse.Namespace) -> int:
    import time

    from harness.atomic import WriteError, write_json
    from harness.evaluation.runner import run_evaluation

    inputs = _check_inputs(args)
    started = time.perf_counter()
    encoder, embed, token_lengths = _embedder(args, inputs)
    report = run_evaluation(
        embed,
        inputs.data_root,
        args.tasks,
        inputs.mode,
        exact_batches=args.exact_batches,
        token_lengths=token_lengths,
    )
    record: dict[str, Any] = dict(report.results)
    seconds = {**report.seconds, "total": time.perf_counter() - started}
    record["meta"] = _meta(args, inputs, encoder.name, seconds)
    record["details"] = report.details

    print(f"{encoder.name} ({inputs.pooler}), percent")
    print(format_table(report.results), flush=True)
    try:
        write_json(inputs.output, record, indent=2)
    except WriteError as exc:  # the evaluation is done: its scores are on stdout, the old file kept
        print(f"harness eval: error: {exc}; the scores above were not saved", file=sys.stderr)
        return 1
    print(f"wrote {inputs.output}", file=sys.stderr)
    bad = _non_finite(report.results)
    if bad:  # a degenerate encoder (e.g. constant embeddings): the file holds null there
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        print(
            f"harness eval: error: scores that are not finite numbers (written as null): {shown}",
            file=sys.stderr,
        )
        return 1
    return 0


def _non_finite(results: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of the scores in ``results`` that are NaN or infinite."""
    import math

    out: list[str] = []
    for key, value in results.items():
        if isinstance(value, dict):
            out += _non_finite(value, f"{prefix}{key}.")
        elif isinstance(value, float) and not math.isfinite(value):
            out.append(f"{prefix}{key}")
    return out


def _check_inputs(args: argparse.Namespace) -> _Inputs:
    """Everything a user can get wrong, checked before the encoder loads (one error line each)."""
    import torch

    from harness.config.inputs import check_device
    from harness.config.paths import resolve_data_root, senteval_dir
    from harness.encoder.model import check_pooler
    from harness.encoder.saved import check_encoder_only
    from harness.errors import ConfigError, DataError
    from harness.evaluation.runner import check_mode, select_tasks
    from harness.evaluation.tasks import sts_files

    check_device(args.device)
    if args.model:  # a saved run whose sentence embedding is its method's head, not a pooler
        check_encoder_only(args.model, "harness eval")
    pooler = check_pooler(args.pooler)
    selection = select_tasks(args.tasks)
    mode = check_mode(args.mode)
    output = _prepare_output(Path(args.output))
    data_root = resolve_data_root(args.data_dir)
    senteval = senteval_dir(data_root)
    if "sts" in selection.groups:
        missing = [p for p in sts_files(senteval, selection.sts) if not p.is_file()]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise DataError(f"STS data file not found: {missing[0]}{more}")
    whiten_corpus = None
    if args.post_whiten != "none":
        from harness.config.paths import resolve_corpus

        if args.whiten_sentences < 2:
            raise ConfigError(f"--whiten-sentences must be at least 2, got {args.whiten_sentences}")
        whiten_corpus = resolve_corpus(args.whiten_corpus, data_root)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return _Inputs(pooler, mode, output, data_root, whiten_corpus, device)


def _embedder(args: argparse.Namespace, inputs: _Inputs) -> tuple[Any, Any, Any]:
    """The loaded encoder, its embedding function (post-whitened when asked) and token lengths."""
    from harness.encoder.loading import load_encoder
    from harness.evaluation.runner import encoder_functions

    encoder = load_encoder(args.model, device=inputs.device)
    embed, token_lengths = encoder_functions(encoder, inputs.pooler, args.precision)
    if inputs.whiten_corpus is not None:
        from harness.run.data import read_corpus
        from harness.run.hooks import fit_whitening

        fit_on = read_corpus(inputs.whiten_corpus)[: args.whiten_sentences]
        embed = fit_whitening(embed, fit_on, args.post_whiten)
    return encoder, embed, token_lengths


def _meta(args: argparse.Namespace, inputs: _Inputs, model: str, seconds: dict[str, float]) -> dict[str, Any]:
    """The output's ``meta`` block: what was evaluated, how, where, and how long it took."""
    return {
        "model": model,
        "pooler": inputs.pooler,
        "tasks": args.tasks,
        "mode": inputs.mode,
        "exact_batches": bool(args.exact_batches),
        "precision": args.precision,
        "post_whiten": args.post_whiten,
        "whiten_corpus": str(inputs.whiten_corpus) if inputs.whiten_corpus else None,
        "whiten_sentences": args.whiten_sentences if inputs.whiten_corpus else None,
        "device": str(inputs.device),
        "data_root": str(inputs.data_root),
        "seconds": seconds,
    }
