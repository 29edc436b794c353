"""Benchmark: bf16 against fp32 training, side by side, for runs of committed records.

For each given record (a run of the night, trained in bf16), the same run is trained twice on this
machine from the record's own config: once as recorded (``precision = "bf16"``) and once with
``precision = "fp32"`` (another run id). Everything else stays, the final evaluation's precision
included, except that the final tasks are STS only (``final_tasks = "sts"``; the transfer tasks cost
most of a run and do not depend on how it trained). The two arms of a run share its seed, so they
draw the same batches and dropout masks: their difference is the arithmetic's alone, on one
processor and one code version. ``--jobs 2`` trains two arms at once (a run's two arms are queued
one after the other, so they run under much the same load).

Printed per run: each arm's best step, best STS-B dev and STS avg, their difference and the largest
difference along the STS-B dev trajectory; per configuration (the record's group): the mean
difference over its seeds against the spread of its seeds in the records folder (the night's 5).
With SimCSE's runs among them, also each configuration's difference to SimCSE on the same seeds in
both arms (what a claim against SimCSE compares).

    nice .venv/bin/python benchmarks/bench_train_precision.py docs/night/runs/records \\
        simcse-2d2848bb590f whitenedcse-1f081506f6c7 --runs-dir /tmp/precision-runs --jobs 2 \\
        --json precision.json

The runs folder keeps finished runs: started again, the benchmark trains only what is missing
(``--report``: nothing, and compares the runs whose two arms are there).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from harness.atomic import write_json
from harness.config.hardware import cpu_description
from harness.config.paths import resolve_data_root
from harness.stats.paired import t_interval
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore

ARMS = ("bf16", "fp32")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="a records folder (runs/records or a committed copy)")
    parser.add_argument("run_ids", nargs="+", help="run ids of records trained in bf16, in the order to run")
    parser.add_argument("--runs-dir", type=Path, required=True, help="scratch runs folder for both arms")
    parser.add_argument("--data-dir", default=None, help="data root (default: as every command finds it)")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at once (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the comparison to this file")
    parser.add_argument(
        "--report", action="store_true", help="train nothing: compare the runs whose two arms are finished"
    )
    return parser.parse_args(argv)


def arm_config(record: Mapping[str, Any], precision: str, data_root: Path) -> RunConfig:
    """The record's run with ``precision`` for training, STS as its final tasks and the corpus found
    under this machine's data root (the record's path was another machine's)."""
    config = RunConfig.from_dict(record["config"])
    corpus = data_root / "corpus" / Path(config.corpus).name
    return config.replace(precision=precision, final_tasks="sts", corpus=str(corpus))


def _train(config_dict: dict[str, Any], data_root: str, runs_dir: str) -> dict[str, Any]:
    """One arm in a worker process (each worker trains one arm at a time, with its own threads)."""
    from harness.run.training import train_run

    config = RunConfig.from_dict(config_dict)
    return dict(train_run(config, Path(data_root), RunStore(runs_dir), log=None))


def curve(record: Mapping[str, Any]) -> dict[int, float]:
    return {
        int(p["step"]): float(p["stsb_dev"]) for p in record["trajectory"] if p.get("stsb_dev") is not None
    }


def sts_avg(record: Mapping[str, Any]) -> float:
    return float(record["final"]["sts"]["avg"])


def compare_run(record: Mapping[str, Any], arms: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One run's row: both arms' best step, best dev and STS avg, and fp32 minus bf16."""
    bf16, fp32 = arms["bf16"], arms["fp32"]
    a, b = curve(bf16), curve(fp32)
    return {
        "run_id": record["run_id"],
        "group_id": record["group_id"],
        "method": record["config"]["method"],
        "seed": record["config"]["seed"],
        "arm_run_ids": {arm: arms[arm]["run_id"] for arm in ARMS},
        "best_step": {arm: arms[arm]["best_step"] for arm in ARMS},
        "best_stsb_dev": {arm: arms[arm]["best_stsb_dev"] for arm in ARMS},
        "sts_avg": {arm: sts_avg(arms[arm]) for arm in ARMS},
        "fp32_minus_bf16": {
            "best_stsb_dev": fp32["best_stsb_dev"] - bf16["best_stsb_dev"],
            "sts_avg": sts_avg(fp32) - sts_avg(bf16),
            "dev_trajectory_max_abs": max(abs(b[s] - a[s]) for s in a.keys() & b.keys()),
        },
        "record_sts_avg": sts_avg(record) if record.get("final") else None,
        "train_s": {arm: arms[arm]["train_time_s"] for arm in ARMS},
    }


def seed_spread(records: list[Mapping[str, Any]], group_id: str) -> tuple[int, float | None]:
    """Seeds and standard deviation of STS avg of a group's finished records (the night's seeds)."""
    values = [sts_avg(r) for r in records if r["group_id"] == group_id and r.get("final")]
    return len(values), statistics.stdev(values) if len(values) > 1 else None


def mean_interval(values: list[float]) -> dict[str, float | None]:
    """Mean and 95% t-interval of paired differences (no interval from one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "low": None, "high": None}
    low, high = t_interval(values)
    return {"mean": mean, "low": low, "high": high}


def summarise(rows: list[dict[str, Any]], records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Per configuration: each arm's mean STS avg and fp32 - bf16 over its seeds, against the
    spread of its seeds in the records folder; per configuration beside SimCSE: its difference to
    SimCSE on shared seeds in each arm (what a claim against SimCSE estimates)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["group_id"]].append(row)
    configs = {}
    for group_id, members in groups.items():
        n, sd = seed_spread(records, group_id)
        diffs = [m["fp32_minus_bf16"]["sts_avg"] for m in members]
        configs[group_id] = {
            "method": members[0]["method"],
            "seeds": sorted(m["seed"] for m in members),
            "sts_avg": {arm: statistics.fmean(m["sts_avg"][arm] for m in members) for arm in ARMS},
            "fp32_minus_bf16_sts_avg": mean_interval(diffs),
            "max_abs_fp32_minus_bf16_sts_avg": max(abs(d) for d in diffs),
            "max_abs_dev_trajectory": max(m["fp32_minus_bf16"]["dev_trajectory_max_abs"] for m in members),
            "seed_sd_sts_avg": sd,
            "seed_sd_from": n,
            "best_step_equal": sum(m["best_step"]["bf16"] == m["best_step"]["fp32"] for m in members),
        }
    simcse = {row["seed"]: row for row in rows if row["method"] == "simcse"}
    against = {}
    for group_id, members in groups.items():
        shared = [m for m in members if m["seed"] in simcse and m["method"] != "simcse"]
        if shared:
            against[group_id] = {
                arm: mean_interval([m["sts_avg"][arm] - simcse[m["seed"]]["sts_avg"][arm] for m in shared])
                for arm in ARMS
            } | {"seeds": sorted(m["seed"] for m in shared), "method": members[0]["method"]}
    pooled = mean_interval([row["fp32_minus_bf16"]["sts_avg"] for row in rows]) if rows else None
    return {"configs": configs, "against_simcse": against, "all_runs": pooled}


def print_row(row: Mapping[str, Any]) -> None:
    d = row["fp32_minus_bf16"]
    print(
        f"{row['run_id']} ({row['method']}, seed {row['seed']}): best step {row['best_step']['bf16']} / "
        f"{row['best_step']['fp32']}, STS-B dev {row['best_stsb_dev']['bf16']:.3f} / "
        f"{row['best_stsb_dev']['fp32']:.3f}, STS avg {row['sts_avg']['bf16']:.3f} / "
        f"{row['sts_avg']['fp32']:.3f} (bf16 / fp32; fp32 - bf16 {d['sts_avg']:+.3f}, dev trajectory "
        f"within {d['dev_trajectory_max_abs']:.3f}; train {row['train_s']['bf16']:.0f} s / "
        f"{row['train_s']['fp32']:.0f} s)",
        flush=True,
    )


def interval(value: Mapping[str, float | None]) -> str:
    mean, low, high = value["mean"], value["low"], value["high"]
    assert mean is not None
    return f"{mean:+.3f}" if low is None or high is None else f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def print_summary(summary: Mapping[str, Any]) -> None:
    print("per configuration (STS avg: bf16, fp32, fp32 - bf16 with its 95% interval over the seeds;")
    print("  seed sd: the records folder's seeds of the configuration, trained in bf16):")
    for group_id, c in summary["configs"].items():
        sd = "n/a" if c["seed_sd_sts_avg"] is None else f"{c['seed_sd_sts_avg']:.3f} ({c['seed_sd_from']})"
        print(
            f"  {group_id:<26} {c['method']:<13} seeds {','.join(map(str, c['seeds']))}: "
            f"{c['sts_avg']['bf16']:.3f}, {c['sts_avg']['fp32']:.3f}, "
            f"{interval(c['fp32_minus_bf16_sts_avg'])}; seed sd {sd}; "
            f"same best step {c['best_step_equal']}/{len(c['seeds'])}"
        )
    if summary["all_runs"] is not None:
        print(f"  every run compared: fp32 - bf16 {interval(summary['all_runs'])}")
    if summary["against_simcse"]:
        print("against SimCSE on the same seeds (STS avg, mean difference and 95% interval, bf16 / fp32):")
        for group_id, c in summary["against_simcse"].items():
            print(
                f"  {group_id:<26} {c['method']:<13} {interval(c['bf16'])} / {interval(c['fp32'])} "
                f"(seeds {','.join(map(str, c['seeds']))})"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.jobs < 1:
        print(f"error: --jobs {args.jobs}: at least one run at a time", file=sys.stderr)
        return 2
    data_root = resolve_data_root(args.data_dir)
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(args.records.glob("*.json"))]
    by_id = {r["run_id"]: r for r in records}
    missing = [run_id for run_id in args.run_ids if run_id not in by_id]
    if missing:
        print(f"error: no record {missing[0]} in {args.records}", file=sys.stderr)
        return 2
    wrong = [i for i in args.run_ids if by_id[i]["config"]["precision"] != "bf16"]
    if wrong:
        print(
            f"error: {wrong[0]} did not train in bf16 (precision {by_id[wrong[0]]['config']['precision']})",
            file=sys.stderr,
        )
        return 2
    store = RunStore(args.runs_dir)
    doing = "the finished ones compared (--report)" if args.report else f"{args.jobs} at a time"
    print(f"cpu {cpu_description()}; {len(args.run_ids)} runs, two arms each, {doing}", flush=True)
    jobs = [
        (run_id, arm, arm_config(by_id[run_id], arm, data_root)) for run_id in args.run_ids for arm in ARMS
    ]
    done: dict[str, dict[str, Any]] = defaultdict(dict)
    rows: list[dict[str, Any]] = []
    failed: list[str] = []

    def finish(run_id: str, arm: str, result: Mapping[str, Any]) -> None:
        done[run_id][arm] = dict(result)
        if len(done[run_id]) == len(ARMS):
            rows.append(compare_run(by_id[run_id], done[run_id]))
            print_row(rows[-1])
            if args.json:
                write_json(
                    args.json, {"cpu": cpu_description(), "runs": rows, **summarise(rows, records)}, indent=2
                )

    todo = []
    for run_id, arm, config in jobs:
        have = store.load(config.run_id())
        if have is not None and have.get("status") == "finished":
            finish(run_id, arm, have)
        elif not args.report:
            todo.append((run_id, arm, config))
    t0 = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        running: dict[Future[dict[str, Any]], tuple[str, str]] = {
            pool.submit(_train, config.to_dict(), str(data_root), str(args.runs_dir)): (run_id, arm)
            for run_id, arm, config in todo
        }
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                run_id, arm = running.pop(future)
                try:
                    finish(run_id, arm, future.result())
                except Exception as exc:  # one failed arm loses nothing else: the others go on
                    failed.append(f"{run_id} ({arm}): {type(exc).__name__}: {exc}")
                    print(f"error: {failed[-1]}", file=sys.stderr, flush=True)
    if todo:
        print(f"trained {len(todo)} arms in {time.perf_counter() - t0:.0f} s", flush=True)
    print_summary(summarise(rows, records))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
