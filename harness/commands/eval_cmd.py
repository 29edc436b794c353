"""``harness eval``: evaluate an encoder on the STS and/or SentEval transfer tasks.

What it does and writes: :mod:`harness.jobs.evaluate`.
"""

from __future__ import annotations

import argparse
import sys

from harness.commands.flags import add_data_dir, closed_choice, number
from harness.config.choices import POOLERS, POST_WHITEN, PRECISIONS, TRANSFER_MODES

HELP = "evaluate an encoder on the STS and/or SentEval transfer tasks (see --tasks)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="encoder: a local directory, a hub name, 'minilm' or 'random:tiny' "
        "(default: the packaged all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--pooler",
        default=None,
        type=closed_choice("pooler", POOLERS),
        choices=POOLERS,
        help="how token states become a sentence embedding (default: a sentence-transformers folder's "
        "own pooling and layers, else cls_before_pooler)",
    )
    parser.add_argument(
        "--tasks",
        default="all",
        help="sts, transfer or all (default: all), or comma-separated task names such as "
        "STS12,SICKRelatedness (an unknown name lists the registered ones)",
    )
    parser.add_argument(
        "--mode",
        default="fasttest",
        type=closed_choice("mode", TRANSFER_MODES),
        choices=TRANSFER_MODES,
        help="transfer parameter set: test or fasttest (default: fasttest)",
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
        type=number(int),
        default=10000,
        help="how many corpus sentences (from the top of the file) fit the post-processing (default 10000)",
    )


def run(args: argparse.Namespace) -> int:
    from harness.atomic import WriteError, write_json
    from harness.jobs.evaluate import EvalOptions, evaluate_encoder, format_table, non_finite

    options = EvalOptions(
        output=args.output,
        model=args.model,
        pooler=args.pooler,
        tasks=args.tasks,
        mode=args.mode,
        data_dir=args.data_dir,
        exact_batches=args.exact_batches,
        device=args.device,
        precision=args.precision,
        post_whiten=args.post_whiten,
        whiten_corpus=args.whiten_corpus,
        whiten_sentences=args.whiten_sentences,
    )
    done = evaluate_encoder(options)
    print(f"{done.model} ({done.inputs.pooler}), percent")
    print(format_table(done.report.results), flush=True)
    try:
        write_json(done.inputs.output, done.record, indent=2)
    except WriteError as exc:  # the evaluation is done: its scores are on stdout, the old file kept
        print(f"harness eval: error: {exc}; the scores above were not saved", file=sys.stderr)
        return 1
    print(f"wrote {done.inputs.output}", file=sys.stderr)
    bad = non_finite(done.report.results)
    if bad:  # a degenerate encoder (e.g. constant embeddings): the file holds null there
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        print(
            f"harness eval: error: scores that are not finite numbers (written as null): {shown}",
            file=sys.stderr,
        )
        return 1
    return 0
