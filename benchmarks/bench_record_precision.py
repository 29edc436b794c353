"""Benchmark: how far scoring a run's final tasks in bf16 moves its numbers, on committed records.

The ``night`` profile scores its final tasks in bf16 where the CPU has native bf16, and keeps no
encoders. This script trains the given records' runs again from their own configs with the final
evaluation in fp32 (``eval_precision = "fp32"``: another run id, in a scratch runs folder), keeps the
best encoder, and scores that same encoder again in bf16 (``harness eval``'s path). Printed per run:

* how closely training repeated the record (best step, best STS-B dev): bit for bit on the machine
  and library versions that wrote it, close elsewhere (kernels differ between processors);
* per final task: the fp32 score, the bf16 score of the same weights and their difference (what
  bf16 scoring moves), and the record's own bf16 score;
* that ``harness eval``'s fp32 STS scores of the saved encoder equal the run's own final ones (the
  two paths score alike, so the difference is the precision's alone).

    .venv/bin/python benchmarks/bench_record_precision.py docs/night/runs/records \\
        simcse-2d2848bb590f whitenedcse-1f081506f6c7 simcsepp-8e4c00da5952 --runs-dir /tmp/fp32-runs

Each run takes what it took in the night plus its final tasks about twice more.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_data_root
from harness.jobs.evaluate import EvalOptions, evaluate_encoder
from harness.run.training import train_run
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="a records folder (runs/records or a committed copy)")
    parser.add_argument("run_ids", nargs="+", help="run ids of records scored in bf16")
    parser.add_argument("--runs-dir", type=Path, required=True, help="scratch runs folder for the fp32 runs")
    parser.add_argument("--data-dir", default=None, help="data root (default: as every command finds it)")
    parser.add_argument("--json", type=Path, default=None, help="also write the comparison to this file")
    return parser.parse_args(argv)


def scores(results: Mapping[str, Any]) -> dict[str, float]:
    """``{"sts/STS12": ..., "sts/avg": ..., "transfer/MR": ...}`` of a record's final block (or of
    ``harness eval``'s results)."""
    return {
        f"{group}/{task}": float(value)
        for group in ("sts", "transfer")
        for task, value in (results.get(group) or {}).items()
        if isinstance(value, int | float)
    }


def score_saved(
    folder: Path, config: RunConfig, data_root: Path, tasks: str, precision: str
) -> dict[str, float]:
    """``harness eval`` of a saved encoder with the run's pooler, transfer mode and threads (fp32 sums
    in another order on another thread count)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or threads)
    with tempfile.TemporaryDirectory() as tmp:
        options = EvalOptions(
            output=str(Path(tmp) / "eval.json"),
            model=str(folder),
            pooler=config.eval_pooler,
            tasks=tasks,
            mode=config.transfer_mode,
            data_dir=str(data_root),
            device="cpu",
            precision=precision,
        )
        try:
            return scores(evaluate_encoder(options).report.results)
        finally:
            torch.set_num_threads(threads)


def _curve(record: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Step, loss and dev score of each evaluation point (not its elapsed time)."""
    return [(p["step"], p["loss"], p["stsb_dev"]) for p in record["trajectory"]]


def compare(record: Mapping[str, Any], again: Mapping[str, Any], bf16: Mapping[str, float]) -> dict[str, Any]:
    """One run's row: training against the record, and per task fp32, bf16 and the record's bf16."""
    fp32, recorded = scores(again["final"]), scores(record["final"])
    return {
        "run_id": record["run_id"],
        "fp32_run_id": again["run_id"],
        "training_bit_for_bit": _curve(record) == _curve(again),
        "best_step": [record["best_step"], again["best_step"]],
        "best_stsb_dev": [record["best_stsb_dev"], again["best_stsb_dev"]],
        "tasks": {
            k: {
                "fp32": fp32[k],
                "bf16": bf16[k],
                "bf16_minus_fp32": bf16[k] - fp32[k],
                "record_bf16": recorded[k],
            }
            for k in fp32
        },
        "final_s": {"record_bf16": record.get("final_time_s"), "fp32": again.get("final_time_s")},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data_root = resolve_data_root(args.data_dir)
    store = RunStore(args.runs_dir)
    print(f"cpu {cpu_description()}")
    out = []
    for run_id in args.run_ids:
        record = json.loads((args.records / f"{run_id}.json").read_text(encoding="utf-8"))
        config = RunConfig.from_dict(record["config"])
        if config.eval_precision != "bf16" or config.final_tasks == "none" or config.post_whiten != "none":
            print(
                f"error: {run_id} has no bf16 final scores of its encoder alone (eval_precision "
                f"{config.eval_precision}, final_tasks {config.final_tasks}, "
                f"post_whiten {config.post_whiten})",
                file=sys.stderr,
            )
            return 2
        corpus = data_root / "corpus" / Path(config.corpus).name  # the record's path was another machine's
        fp32 = config.replace(eval_precision="fp32", corpus=str(corpus))
        t0 = time.perf_counter()
        again = train_run(fp32, data_root, store, log=None, save_checkpoint=True)
        saved = store.checkpoint_dir(again["run_id"])
        bf16 = score_saved(saved, config, data_root, config.final_tasks, "bf16")
        same_path = score_saved(saved, config, data_root, "sts", "fp32")
        row = compare(record, again, bf16)
        row["eval_path_equals_run"] = all(same_path[k] == row["tasks"][k]["fp32"] for k in same_path)
        out.append(row)
        print(
            f"{run_id} ({config.method}, final {config.final_tasks}; fp32 as {again['run_id']}, "
            f"{time.perf_counter() - t0:.0f} s): training bit for bit: {row['training_bit_for_bit']} "
            f"(best step {row['best_step'][0]} / {row['best_step'][1]}, STS-B dev "
            f"{row['best_stsb_dev'][0]:.4f} / {row['best_stsb_dev'][1]:.4f}); harness eval's fp32 STS "
            f"equals the run's: {row['eval_path_equals_run']}"
        )
        for task, value in row["tasks"].items():
            delta = value["bf16_minus_fp32"]
            print(
                f"  {task:<26} fp32 {value['fp32']:7.3f}  bf16 {value['bf16']:7.3f}  {delta:+.3f}"
                f"   (record bf16 {value['record_bf16']:7.3f})"
            )
    worst = max((abs(v["bf16_minus_fp32"]), k, r["run_id"]) for r in out for k, v in r["tasks"].items())
    print(f"largest |bf16 - fp32| on the same weights: {worst[0]:.3f} ({worst[1]} of {worst[2]})")
    if args.json:
        text = json.dumps({"cpu": cpu_description(), "runs": out}, indent=2) + "\n"
        args.json.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
