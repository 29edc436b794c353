"""``harness train``: train and evaluate one run, write its record to the run store."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.atomic import WriteError, check_output_dir
from harness.commands.flags import (
    add_compile_argument,
    add_data_dir,
    add_profile,
    compile_choice,
    parse_key_values,
)
from harness.commands.setting_flags import add_setting_flags, settings_from_args
from harness.config.inputs import check_device, check_finite_overrides
from harness.config.profiles import PROFILES

HELP = f"train one method on one profile ({', '.join(PROFILES)}) and evaluate its best checkpoint"


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
    add_profile(parser, default="cpu")
    parser.add_argument(
        "--runs-dir",
        default="runs",
        help="run store folder, as every other command names it (default ./runs)",
    )
    add_data_dir(parser)
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument(
        "--save-model",
        "--save-checkpoint",
        dest="save_checkpoint",
        action="store_true",
        help="keep the best checkpoint under RUNS/checkpoints/ (for `harness export`)",
    )
    add_compile_argument(parser)
    add_setting_flags(parser.add_argument_group("run settings", "override the profile's"))


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


def check_before_training(config: Any, store: Any, save_model: bool) -> list[str]:
    """What a run reads and writes, checked before its record is: the encoder (a folder's tokenizer
    files, ``max_length`` within its positions), the corpus (read as training reads it: the run is
    handed these sentences, not reading them again), and the runs folder's entries it writes
    (:func:`~harness.grid.preflight.machine.runs_folder_problems`). Returns the corpus."""
    from pathlib import Path

    from harness.config.models import check_model_inputs
    from harness.errors import HarnessError
    from harness.grid.preflight.machine import runs_folder_problems
    from harness.run.data import read_corpus

    check_model_inputs(config.model, config.max_length)
    sentences = read_corpus(Path(config.corpus), min_sentences=config.batch_size)
    problems = runs_folder_problems(store.root, [config.run_id()], storage=None, save_model=save_model)
    if problems:
        raise HarnessError(problems[0])
    return sentences


def run(args: argparse.Namespace) -> int:
    from harness.config.paths import resolve_data_root
    from harness.run.checkpoint import checkpoint_every, every_from_env
    from harness.run.training import train_run
    from harness.store.run_config import resolve_config
    from harness.store.run_store import RunStore

    params = parse_key_values(args.params, "--set")
    overrides = settings_from_args(args)
    check_finite_overrides(params, "--set")
    check_finite_overrides({f"--{k.replace('_', '-')}": v for k, v in overrides.items()}, "")
    every_s = every_from_env()  # HARNESS_CHECKPOINT_EVERY_S, read once: the run gets this value
    check_device(args.device)
    data_root = resolve_data_root(args.data_dir)
    config = resolve_config(args.method, params, args.profile, overrides, data_root=data_root)
    store = RunStore(args.runs_dir)
    check_output_dir(store.root, "--runs-dir")
    run_id = config.run_id()
    sentences = check_before_training(config, store, args.save_checkpoint)
    previous = store.load(run_id)
    if previous is not None and previous.get("status") == "finished":
        print(
            f"note: {run_id} already has a finished record; it is kept unless this run finishes "
            f"(then it moves to {store.attempts_dir(run_id)})"
        )
    try:
        with checkpoint_every(every_s):
            record = train_run(
                config,
                data_root,
                store,
                device=args.device,
                save_checkpoint=args.save_checkpoint,
                compile=compile_choice(args.compile),
                sentences=sentences,
            )
    except WriteError as exc:  # a disk that filled up while training: what was written is kept
        print(
            f"harness train: error: {exc}; the run stopped: its record and last resume checkpoint (if "
            "one was written) are kept, and the same command resumes it once there is room",
            file=sys.stderr,
        )
        return 1
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
