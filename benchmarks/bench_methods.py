"""Step time of every registered method (and key variants) relative to SimCSE, side by side.

One step = ``method.compute_loss`` (encoder forward on the method's rows, head, loss) + backward +
gradient clipping at 1.0 + an AdamW step, exactly as the training loop runs it. Every variant runs on
the same encoder and the same batches of real corpus sentences; repetitions are interleaved (and the
variant order rotated each round) so that drift in a shared machine's load hits every variant
alike. The table reports the median step time, its ratio to SimCSE's, the ratio of encoder rows
(the measured footprint, :func:`harness.run.footprint.footprint`: the cost a method cannot avoid, what
``harness.grid.plan.cost`` scales by),
and the target where METHODS.md / the issue sets one.

A second table times the method-specific extra work alone (whitening, DCL, the Barlow rank) on fixed
features, which is far less noisy than the difference of two step times on a shared CPU.

Usage::

    .venv/bin/python benchmarks/bench_methods.py                 # packaged encoder, B=64, len 32
    .venv/bin/python benchmarks/bench_methods.py --reps 5 --threads 2
    .venv/bin/python benchmarks/bench_methods.py --smoke         # tiny random encoder, seconds
    .venv/bin/python benchmarks/bench_methods.py --threads 1 --bf16 --length-buckets 4 \
        --compare-lookups --only simcsepp,noise                  # the night's setting, two lookups
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.config.hardware import cpu_description
from harness.config.paths import resolve_corpus, resolve_data_root
from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.grid.plan.cost import NO_GRAD_ROW_COST
from harness.run.footprint import footprint
from harness.run.step import make_adamw
from methods import REGISTRY, build_params
from methods.base import Method
from methods.losses import cross_correlation, dcl_loss
from methods.whitenedcse import WhitenedCSE
from methods.whitening import group_whiten, random_permutations


@dataclass
class Variant:
    label: str
    method: str
    overrides: dict[str, Any] = field(default_factory=dict)
    target: str = ""
    per_bucket_lookups: bool = False
    """Look the word embeddings up once per length bucket (the old path) instead of once per call."""


def variants(num_groups: int, k_samples: int) -> list[Variant]:
    g = {"num_groups": num_groups}
    return [
        Variant("simcse", "simcse"),
        Variant("whitenedcse sgw m=2", "whitenedcse", {**g, "num_positives": 2}, "<= +5%"),
        Variant("whitenedcse sgw m=3", "whitenedcse", {**g, "num_positives": 3}, "<= rows"),
        Variant("whitenedcse sgw m=3 released", "whitenedcse", {**g, "reading": "released"}, "<= rows"),
        Variant("whitenedcse sgw m=3 source=sgw", "whitenedcse", {**g, "positive_source": "sgw"}),
        Variant("whitenedcse none m=3", "whitenedcse", {**g, "whitening": "none"}, "<= rows"),
        Variant("whitenedcse zca m=2", "whitenedcse", {"whitening": "zca", "num_positives": 2}),
        Variant("simcsepp (off-dropout + DCL)", "simcsepp", {}),
        Variant("simcsepp off-dropout only", "simcsepp", {"lambda_dcl": 0.0}),
        Variant("simcse + DCL", "simcsepp", {"off_dropout": False, "m": 1.0}, "<= +3%"),
        Variant("DCL only", "simcsepp", {"infonce": False}),
        Variant("barlow M=0", "barlow_probe", {}),
        Variant("barlow M=300", "barlow_probe", {"padding_rows": 300}),
        Variant("noise pos+noise", "noise_probe", {"variant": "pos_plus_noise"}),
        Variant("noise neg+noise", "noise_probe", {"variant": "neg_plus_noise"}),
        Variant(
            f"noise pos-noise K={k_samples}",
            "noise_probe",
            {"variant": "pos_minus_noise", "k_samples": k_samples},
        ),
        Variant(
            f"noise neg-noise K={k_samples}",
            "noise_probe",
            {"variant": "neg_minus_noise", "k_samples": k_samples},
        ),
    ]


def all_variants(num_groups: int, k_samples: int) -> list[Variant]:
    """:func:`variants`, plus every registered method they leave out, at its defaults and with each
    of its non-empty ``smoke_params`` (the re-implemented baselines: their cost declarations, the
    ``x rows`` column, get a measured step beside them)."""
    chosen = variants(num_groups, k_samples)
    covered = {v.method for v in chosen}
    for name in sorted(set(REGISTRY) - covered):
        chosen.append(Variant(name, name))
        for overrides in REGISTRY[name].smoke_params:
            if overrides:
                label = f"{name} " + " ".join(f"{k}={v}" for k, v in overrides.items())
                chosen.append(Variant(label, name, dict(overrides)))
    return chosen


def load_sentences(n: int, seed: int) -> list[str]:
    path = resolve_corpus(None, resolve_data_root(None))
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return random.Random(seed).sample(lines, n)


def time_call(fn: Callable[[], Any], reps: int) -> float:
    """Median seconds of ``fn`` over ``reps`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="encoder name (default: the packaged MiniLM, d=384)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--num-groups", type=int, default=128, help="SGW groups (must divide d)")
    ap.add_argument("--k-samples", type=int, default=10, help="K of the -noise probes")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per variant")
    ap.add_argument("--reps", type=int, default=3, help="timed, interleaved steps per variant")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--only", default="", help="comma-separated substrings of variant labels to run")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--smoke", action="store_true", help="tiny random encoder, B=8, 1 rep")
    ap.add_argument("--device", default="cpu", help="torch device (cuda on a GPU box)")
    ap.add_argument("--bf16", action="store_true", help="autocast the steps to bfloat16 (the CPU profiles)")
    ap.add_argument("--length-buckets", type=int, default=1, help="length buckets per encoder call")
    ap.add_argument(
        "--compare-lookups",
        action="store_true",
        help="time each variant also with a word-embedding lookup per bucket (label '+lookups')",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.model, args.batch, args.num_groups, args.k_samples = "random:tiny", 8, 16, 2
        args.warmup, args.reps = 1, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    encoder = load_encoder(args.model, device=args.device)
    encoder.train()

    def sync() -> None:
        if encoder.device.type == "cuda":
            torch.cuda.synchronize()

    d = encoder.hidden_size
    encode = TrainingEncode(encoder, length_buckets=args.length_buckets)
    chosen = all_variants(args.num_groups, args.k_samples)
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        chosen = [v for v in chosen if v.label == "simcse" or any(k in v.label for k in keys)]
    if args.compare_lookups:
        chosen = [
            w
            for v in chosen
            for w in (v, Variant(f"{v.label} +lookups", v.method, v.overrides, per_bucket_lookups=True))
        ]
    cast = (
        (lambda: torch.autocast(device_type=encoder.device.type, dtype=torch.bfloat16))
        if args.bf16
        else contextlib.nullcontext
    )
    methods: dict[str, Method] = {}
    for v in chosen:
        method = REGISTRY[v.method](build_params(v.method, v.overrides), d)
        method.bind(encoder)  # as the loop does: before the optimiser is built
        methods[v.label] = method.to(encoder.device)
    params = list(encoder.parameters()) + [p for m in methods.values() for p in m.parameters()]
    opt = make_adamw(params, lr=3e-5, weight_decay=0.0)  # the training loop's (fused where it can be)
    rounds = args.warmup + args.reps
    sentences = load_sentences(args.batch * rounds, args.seed)
    batches = [
        encoder.tokenize(sentences[i * args.batch : (i + 1) * args.batch], max_length=args.max_length)
        for i in range(rounds)
    ]

    def step(v: Variant, batch: dict[str, torch.Tensor], k: int) -> float:
        method = methods[v.label]
        encoder.one_word_lookup = not v.per_bucket_lookups
        opt.zero_grad(set_to_none=True)
        sync()
        t0 = time.perf_counter()
        with cast():
            out = method.compute_loss(encode, batch, k)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        return time.perf_counter() - t0

    print(
        f"# encoder={encoder.name} d={d} B={args.batch} len<={args.max_length} groups={args.num_groups} "
        f"threads={torch.get_num_threads()} warmup={args.warmup} reps={args.reps} bf16={args.bf16} "
        f"buckets={args.length_buckets} cpu={cpu_description()!r}",
        flush=True,
    )
    times: dict[str, list[float]] = {v.label: [] for v in chosen}
    for r in range(rounds):
        order = chosen[r % len(chosen) :] + chosen[: r % len(chosen)]
        for v in order:
            t = step(v, batches[r], r)
            if r >= args.warmup:
                times[v.label].append(t)
            print(f"#   round {r + 1} {v.label}: {t:.3f} s", flush=True)
        print(f"# round {r + 1}/{rounds} done", flush=True)

    base = statistics.median(times["simcse"])
    print()
    print(f"| {'variant':34} | {'step s':>7} | {'x simcse':>8} | {'x rows':>6} | target |")
    print(f"|{'-' * 36}|{'-' * 9}|{'-' * 10}|{'-' * 8}|--------|")
    for v in chosen:
        med = statistics.median(times[v.label])
        measured = footprint(v.method, methods[v.label].params, d)
        rows = (measured.rows + NO_GRAD_ROW_COST * measured.no_grad_rows) / 2
        print(f"| {v.label:34} | {med:7.3f} | {med / base:8.3f} | {rows:6.2f} | {v.target:6} |")

    # -- the extra work alone, on fixed features (no encoder) ---------------------------------------
    b = args.batch
    feats = torch.randn(b, 3, d, device=encoder.device)
    z = torch.randn(b, d, device=encoder.device)
    sgw = methods.get("whitenedcse sgw m=3")
    whiten = sgw.whiten if isinstance(sgw, WhitenedCSE) else None
    extra: list[tuple[str, Callable[[], Any]]] = [
        ("group_whiten m=2 blocks", lambda: group_whiten(feats[:, :2].transpose(0, 1), args.num_groups)),
        (
            "sgw whiten m=2 (perm + whiten)",
            lambda: group_whiten(
                feats[:, :2].transpose(0, 1), args.num_groups, perm=random_permutations(2, d, encoder.device)
            ),
        ),
        ("dcl_loss fwd", lambda: dcl_loss(z, z.flip(0))),
        ("corr rank (d x d)", lambda: torch.linalg.matrix_rank(cross_correlation(z, z.flip(0)))),
    ]
    if whiten is not None:
        extra.insert(2, ("WhitenedCSE.whiten m=3", lambda: whiten(feats, 0)))
    print()
    print(f"| {'extra work alone':34} | {'ms':>7} | {'% simcse step':>13} |")
    print(f"|{'-' * 36}|{'-' * 9}|{'-' * 15}|")
    for label, fn in extra:
        with torch.no_grad():
            t = time_call(fn, max(5, args.reps))
        print(f"| {label:34} | {t * 1e3:7.2f} | {100 * t / base:12.2f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
