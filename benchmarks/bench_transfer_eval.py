"""Benchmark: SentEval's sequential classifier fits vs the harness's parallel, overhead-free fits.

Embeds the seven transfer tasks once with the packaged encoder (SentEval's batches, cached as an
``.npz`` so a second run pays no encoding), then runs the classifier protocol twice on the same
features:

* ``sentevalstyle``: every fit one after another in this process, with SentEval's classifier code
  path (``nn.Module``, autograd, ``torch.optim``, ``deepcopy``): what SentEval costs.
* ``harness``: :func:`harness.evaluation.transfer.classify_tasks` with a process pool and the fast
  fit (same kernels, no framework overhead).

It checks that the accuracies are identical and prints wall times and the speed-up. Optionally
(``--fast-sequential``) it also times the fast fit with one worker, to separate the two gains.
``--device cuda`` also times the final evaluation's device path (every fit of a stage at once on
that device, :func:`harness.evaluation.logreg_batched.fit_batched`) and checks each task within 0.1 of
the CPU path (``--skip-cpu``: the device path alone, as ``benchmarks/gpu_check.py`` times it).

Usage::

    .venv/bin/python benchmarks/bench_transfer_eval.py                 # fasttest, all tasks
    .venv/bin/python benchmarks/bench_transfer_eval.py --mode test     # much slower
    .venv/bin/python benchmarks/bench_transfer_eval.py --tasks TREC MRPC --smoke-test
    .venv/bin/python benchmarks/bench_transfer_eval.py --mode test --device cuda --model random:bert-base
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_data_root, senteval_dir
from harness.evaluation.transfer import (
    TRANSFER_TASKS,
    average,
    classify_tasks,
    embed_task,
    read_task,
)
from harness.evaluation.transfer_protocol import TaskFeatures, TransferTiming

DEFAULT_CACHE = Path("runs") / "bench_cache"


DEVICE_TOLERANCE = 0.1
"""Largest difference from the CPU path a task's accuracy on the device may show (percent)."""


def load_features(
    tasks: list[str], senteval: Path, model: str, cache_dir: Path, limit: int | None, device: str = "cpu"
) -> dict[str, TaskFeatures]:
    """Embedded tasks, from the cache when present (one ``.npz`` per task and encoder)."""
    features: dict[str, TaskFeatures] = {}
    embed: Callable[[list[str]], np.ndarray] | None = None
    for task in tasks:
        path = cache_dir / f"transfer_{model.replace('/', '_').replace(':', '_')}_{task}.npz"
        text = read_task(senteval, task)
        if path.is_file():
            with np.load(path) as blob:
                splits = {name: (blob[f"{name}_X"], blob[f"{name}_y"]) for name in text.splits}
            features[task] = TaskFeatures(task, text.nclasses, splits)
            print(f"[cache] {task}: {path}", flush=True)
        else:
            if embed is None:
                from harness.encoder.loading import load_encoder

                embed = functools.partial(load_encoder(model, device).embed, pooler="cls_before_pooler")
            start = time.perf_counter()
            feats = embed_task(text, embed)
            path.parent.mkdir(parents=True, exist_ok=True)
            arrays = {
                f"{name}_{part}": xy[i] for name, xy in feats.splits.items() for i, part in enumerate("Xy")
            }
            np.savez(path, **arrays)  # type: ignore[arg-type]
            features[task] = feats
            print(f"[embed] {task}: {time.perf_counter() - start:.1f} s -> {path}", flush=True)
        if limit is not None:  # smoke test: `limit` random rows of every split, in order
            f = features[task]
            splits = {}
            for name, (x, y) in f.splits.items():
                keep = np.sort(np.random.RandomState(0).permutation(len(y))[:limit])
                splits[name] = (x[keep], y[keep])
            features[task] = TaskFeatures(task, f.nclasses, splits)
    return features


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["fasttest", "test", "both"], default="fasttest")
    parser.add_argument("--tasks", nargs="+", default=list(TRANSFER_TASKS), choices=TRANSFER_TASKS)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--model", default="minilm", help="encoder name for harness.encoder.loading.load_encoder"
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--fast-sequential", action="store_true", help="also time the fast fit, 1 worker")
    parser.add_argument("--skip-sentevalstyle", action="store_true", help="time only the harness path")
    parser.add_argument("--smoke-test", action="store_true", help="500 random rows per split (CI)")
    parser.add_argument("--device", default=None, help="also time the classifiers on this device (cuda)")
    parser.add_argument("--skip-cpu", action="store_true", help="with --device: time the device path alone")
    args = parser.parse_args(argv)

    senteval = senteval_dir(resolve_data_root(args.data_dir))
    features = load_features(
        args.tasks,
        senteval,
        args.model,
        args.cache_dir,
        500 if args.smoke_test else None,
        args.device or "cpu",
    )
    modes = ["fasttest", "test"] if args.mode == "both" else [args.mode]
    print(
        f"cpus={os.cpu_count()} ({cpu_description()}) workers={args.workers} load={os.getloadavg()}",
        flush=True,
    )
    ok = True
    for mode in modes:
        runs: dict[str, tuple[dict[str, float], TransferTiming]] = {}
        plan: list[tuple[str, int, str, str | None]] = []
        if args.device is not None:
            plan.append(("device", 1, "batched", args.device))
        if not (args.device is not None and args.skip_cpu):
            plan.append(("harness", args.workers, "fast", None))
            if args.fast_sequential:
                plan.append(("fast-1worker", 1, "fast", None))
            if not args.skip_sentevalstyle:
                plan.append(("sentevalstyle", 1, "reference", None))
        for label, workers, engine, device in plan:
            timing = TransferTiming()
            accs = classify_tasks(
                features, mode=mode, workers=workers, engine=engine, timing=timing, device=device
            )
            runs[label] = (accs, timing)
            print(f"[{mode}] {label:14s} {timing.seconds:8.1f} s  {accs}  avg={average(accs)}", flush=True)
        print(f"\n== {mode} ==")
        print(f"{'task':6s}" + "".join(f"{label:>16s}" for label in runs))
        for task in args.tasks:
            print(f"{task:6s}" + "".join(f"{runs[label][0][task]:16.2f}" for label in runs))
        print(f"{'avg':6s}" + "".join(f"{average(runs[label][0]):16.2f}" for label in runs))
        print(f"{'wall s':6s}" + "".join(f"{runs[label][1].seconds:16.1f}" for label in runs))
        reference = runs.get("sentevalstyle")
        if reference is not None:
            ratio = reference[1].seconds / runs["harness"][1].seconds
            same = all(accs == reference[0] for label, (accs, _) in runs.items() if label != "device")
            ok &= same
            print(f"speed-up harness vs SentEval-style: {ratio:.2f}x; accuracies identical: {same}")
        if "device" in runs and "harness" in runs:
            gap = {t: abs(runs["device"][0][t] - runs["harness"][0][t]) for t in args.tasks}
            within = max(gap.values()) <= DEVICE_TOLERANCE
            ok &= within
            speedup = runs["harness"][1].seconds / runs["device"][1].seconds
            print(
                f"device {args.device} vs CPU path: {speedup:.2f}x; "
                f"max |difference| {max(gap.values()):.2f} ({max(gap, key=gap.__getitem__)}); "
                f"within {DEVICE_TOLERANCE}: {within}"
            )
        print(flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
