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
from harness.config.inputs import check_arithmetic, check_device
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
    """What a run reads and writes, checked before its record is: the encoders (the run's and those its
    method loads besides: a folder's tokenizer files, ``max_length`` within its positions), the corpus
    (read as training reads it: the run is handed these sentences, not reading them again) and what
    the settings ask of it (:func:`~harness.config.settings.corpus_problems`), and the runs folder's
    entries it writes (:func:`~harness.grid.preflight.machine.runs_folder_problems`). Returns the
    corpus."""
    from pathlib import Path

    from harness.config.models import check_model_inputs, hidden_size_of
    from harness.config.settings import corpus_problems
    from harness.errors import HarnessError
    from harness.grid.preflight.machine import runs_folder_problems
    from harness.run.data import read_corpus

    for model in (config.model, *config.params.models()):
        check_model_inputs(model, config.max_length)
        hidden_size_of(model)  # found (a hub name: in the cache, or the hub reachable), as the run's own
    sentences = read_corpus(Path(config.corpus), min_sentences=config.batch_size)
    too_small = corpus_problems(config, len(sentences), config.hidden_size)
    if too_small:
        raise too_small[0]
    problems = runs_folder_problems(store.root, [config.run_id()], storage=None, save_model=save_model)
    if problems:
        raise HarnessError(problems[0])
    return sentences


def warn_if_oversubscribed(threads: int | None) -> None:
    """One warning line when the run's torch threads are more than this machine's CPUs (allowed: a
    deliberate oversubscription, or a profile's fixed count on a smaller machine)."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if threads is not None and threads > cpus:
        print(f"warning: threads {threads} is more than the {cpus} CPU(s) here: they share", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from harness.config.hardware import default_device
    from harness.config.paths import resolve_data_root
    from harness.config.settings import flag_label, resolve_settings
    from harness.run.checkpoint import checkpoint_every, every_from_env
    from harness.run.training import train_run
    from harness.store.run_config import resolve_run
    from harness.store.run_store import RunStore
    from methods import get_method

    params = parse_key_values(args.params, "--set")
    overrides = settings_from_args(args)
    every_s = every_from_env()  # HARNESS_CHECKPOINT_EVERY_S, read once: the run gets this value
    check_device(args.device)
    device = args.device or default_device()
    data_root = resolve_data_root(args.data_dir)
    settings = resolve_settings(args.profile, overrides, data_root, device=device, label=flag_label)
    typed = get_method(args.method).params_cls.from_overrides(params, args.method, where="--set")
    config = resolve_run(args.method, typed, settings)
    precisions = {"precision": config.precision, "eval_precision": config.eval_precision}
    check_arithmetic(device, precisions, compile_choice(args.compile))
    warn_if_oversubscribed(config.threads)
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
