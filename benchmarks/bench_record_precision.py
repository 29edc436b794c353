"""Benchmark: how far scoring a run's final tasks in bf16 moves its numbers, on committed records.

The ``night`` profile scores its final tasks in bf16 where the CPU has native bf16, and keeps no
encoders. This script trains the given records' runs again, from their own configs, with the final
evaluation in fp32 (``eval_precision = "fp32"``, a different run id, into a scratch runs folder),
and prints for each run:

* whether training repeated itself: best step and best STS-B dev equal to the record's (training and
  the dev probes do not depend on the final evaluation's precision);
* per final task, the fp32 score, the record's bf16 score and the difference, and the same for the
  STS and transfer averages.

    .venv/bin/python benchmarks/bench_record_precision.py docs/night/runs/records \\
        simcse-2d2848bb590f whitenedcse-1f081506f6c7 simcsepp-8e4c00da5952 --runs-dir /tmp/fp32-runs

Each run takes what it took in the night plus its final tasks in fp32 (about 1.5x their bf16 time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_data_root
from harness.config.run_config import RunConfig
from harness.run.training import train_run
from harness.store.run_store import RunStore


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="a records folder (runs/records or a committed copy)")
    parser.add_argument("run_ids", nargs="+", help="run ids of records scored in bf16")
    parser.add_argument("--runs-dir", type=Path, required=True, help="scratch runs folder for the fp32 runs")
    parser.add_argument("--data-dir", default=None, help="data root (default: as every command finds it)")
    parser.add_argument("--json", type=Path, default=None, help="also write the comparison to this file")
    return parser.parse_args(argv)


def scores(final: Mapping[str, Any]) -> dict[str, float]:
    """``{"sts/STS12": ..., "sts/avg": ..., "transfer/MR": ...}`` of a record's final block."""
    return {
        f"{group}/{task}": float(value)
        for group in ("sts", "transfer")
        for task, value in (final.get(group) or {}).items()
        if isinstance(value, int | float)
    }


def compare(record: Mapping[str, Any], again: Mapping[str, Any]) -> dict[str, Any]:
    bf16, fp32 = scores(record["final"]), scores(again["final"])
    return {
        "run_id": record["run_id"],
        "fp32_run_id": again["run_id"],
        "same_training": record["best_step"] == again["best_step"]
        and record["best_stsb_dev"] == again["best_stsb_dev"],
        "best_step": [record["best_step"], again["best_step"]],
        "best_stsb_dev": [record["best_stsb_dev"], again["best_stsb_dev"]],
        "tasks": {k: {"fp32": fp32[k], "bf16": bf16[k], "bf16_minus_fp32": bf16[k] - fp32[k]} for k in bf16},
        "final_s": {"bf16": record.get("final_time_s"), "fp32": again.get("final_time_s")},
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
        if config.eval_precision != "bf16":
            print(f"error: {run_id} was scored in {config.eval_precision}, not bf16", file=sys.stderr)
            return 2
        corpus = data_root / "corpus" / Path(config.corpus).name  # the record's path was another machine's
        fp32 = config.replace(eval_precision="fp32", corpus=str(corpus))
        t0 = time.perf_counter()
        again = train_run(fp32, data_root, store, log=None)
        row = compare(record, again)
        out.append(row)
        print(
            f"{run_id} ({config.method}, final {config.final_tasks}; fp32 again as {again['run_id']}, "
            f"{time.perf_counter() - t0:.0f} s): training repeated: {row['same_training']} "
            f"(best step {row['best_step'][0]} / {row['best_step'][1]}, "
            f"STS-B dev {row['best_stsb_dev'][0]:.4f} / {row['best_stsb_dev'][1]:.4f})"
        )
        for task, value in row["tasks"].items():
            delta = value["bf16_minus_fp32"]
            print(f"  {task:<26} fp32 {value['fp32']:7.3f}  bf16 {value['bf16']:7.3f}  {delta:+.3f}")
    worst = max((abs(v["bf16_minus_fp32"]), k, r["run_id"]) for r in out for k, v in r["tasks"].items())
    print(f"largest |bf16 - fp32|: {worst[0]:.3f} ({worst[1]} of {worst[2]})")
    if args.json:
        text = json.dumps({"cpu": cpu_description(), "runs": out}, indent=2) + "\n"
        args.json.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
