"""``harness train``: train and evaluate one run, write its record to the run store."""

from __future__ import annotations

import argparse
from typing import Any

from harness.commands.common import (
    add_data_dir,
    check_device,
    check_finite_overrides,
    check_seed,
    check_threads,
    check_writable_dir,
)
from harness.errors import ConfigError

HELP = "train one method on one profile (cpu, smoke, paper) and evaluate its best checkpoint"

_RUN_FLAGS: dict[str, str] = {
    "model": "model",
    "corpus": "corpus",
    "batch_size": "batch_size",
    "max_length": "max_length",
    "max_steps": "max_steps",
    "eval_every": "eval_every",
    "lr": "lr",
    "seed": "seed",
    "train_pooler": "train_pooler",
    "eval_pooler": "eval_pooler",
    "final_tasks": "final_tasks",
    "transfer_mode": "transfer_mode",
    "post_whiten": "post_whiten",
    "precision": "precision",
    "eval_precision": "eval_precision",
    "threads": "threads",
}
"""argparse destination -> RunConfig field, for the run-level flags."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", default="simcse", help="registered method (see `harness methods`)")
    parser.add_argument(
        "--set",
        dest="params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="method parameter, repeatable (e.g. --set temperature=0.05)",
    )
    parser.add_argument("--profile", default="cpu", help="cpu (default), night, demo, smoke or paper")
    parser.add_argument("--model", help="encoder: minilm, random:tiny, a hub name or a local path")
    parser.add_argument("--corpus", help="one-sentence-per-line training corpus")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--max-length", type=int, help="training truncation length in tokens")
    parser.add_argument("--max-steps", help="optimiser steps; 'epoch' = one pass; 0 = evaluate only")
    parser.add_argument("--eval-every", type=int, help="STS-B dev evaluation every N steps")
    parser.add_argument("--lr", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--train-pooler", help="raw feature under the method's head (cls_before_pooler)")
    parser.add_argument("--eval-pooler", help="pooler of every evaluation (cls_before_pooler)")
    parser.add_argument("--final-tasks", help="sts, transfer, all or none")
    parser.add_argument("--transfer-mode", help="fasttest or test")
    parser.add_argument("--post-whiten", help="none, zca or pca (BERT-whitening of evaluation embeddings)")
    parser.add_argument(
        "--precision", help="training and dev probes: fp32, bf16 or auto (bf16 where native; cpu profile)"
    )
    parser.add_argument("--eval-precision", help="final tasks: fp32 (default, SentEval's numbers) or bf16")
    parser.add_argument("--output-dir", default="runs", help="run store folder (default ./runs)")
    add_data_dir(parser)
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument(
        "--threads", help="torch CPU threads (a run setting: part of the run id; the cpu profile fixes 1)"
    )
    parser.add_argument(
        "--save-model",
        "--save-checkpoint",
        dest="save_checkpoint",
        action="store_true",
        help="keep the best checkpoint under OUTPUT/checkpoints/ (for `harness export`)",
    )


def parse_sets(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``; a malformed item raises :class:`ConfigError`."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _print_final(final: dict[str, Any]) -> None:
    for part in ("sts", "transfer"):
        scores = final.get(part)
        if not isinstance(scores, dict) or not scores:
            continue
        cells = []
        for name, value in scores.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                cells.append(f"{name} {value:.2f}")
        print(f"final {part}: " + ", ".join(cells))


def run(args: argparse.Namespace) -> int:
    from harness.config import resolve_config
    from harness.paths import resolve_data_root
    from harness.store import RunStore
    from harness.train import train_run

    params = parse_sets(args.params)
    overrides = {
        field: getattr(args, dest) for dest, field in _RUN_FLAGS.items() if getattr(args, dest) is not None
    }
    check_finite_overrides(params, "--set")
    check_finite_overrides(overrides, "--")
    check_seed(overrides.get("seed"))
    check_threads(args.threads)
    check_device(args.device)
    data_root = resolve_data_root(args.data_dir)
    config = resolve_config(args.method, params, args.profile, overrides, data_root=data_root)
    store = RunStore(args.output_dir)
    check_writable_dir(store.root, "--output-dir")
    run_id = config.run_id()
    previous = store.load(run_id)
    if previous is not None and previous.get("status") == "finished":
        print(
            f"note: {run_id} already has a finished record; it is kept unless this run finishes "
            f"(then it moves to {store.attempts_dir(run_id)})"
        )
    record = train_run(
        config,
        data_root,
        store,
        device=args.device,
        save_checkpoint=args.save_checkpoint,
    )
    best = record.get("best_stsb_dev")
    best_text = f"{best:.2f}" if isinstance(best, float) else "n/a"
    print(f"best step {record['best_step']} (STS-B dev {best_text})")
    _print_final(record.get("final") or {})
    print(
        f"time: {record['wall_time_s']:.0f} s (train {record['train_time_s']:.0f} s, "
        f"eval {record['eval_time_s']:.0f} s)"
    )
    print(f"record: {store.path(run_id)}")
    return 0
