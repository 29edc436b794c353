"""The training loop: one run = one :class:`~harness.config.RunConfig` -> one run record.

The shared recipe of METHODS.md section 1, method-agnostic:

* seed Python, NumPy and torch from ``config.seed``; read the corpus (one sentence per line; an
  empty line or fewer sentences than one batch is a :class:`~harness.errors.DataError`), shuffle it
  with the seed, and cut it into batches of B sentences (the last partial batch of an epoch is
  dropped, so ``max_steps=None`` = ``len(corpus) // B`` steps; a budget beyond one epoch reshuffles);
* each step tokenises B sentences (truncated to ``max_length``) and calls
  ``method.compute_loss(encode, batch, step)``; the method makes its own views (one encoder call on
  the repeated batch);
* AdamW (fused where PyTorch has the kernel) over the encoder's and the method's parameters,
  linear decay to 0 over the run (optional linear warm-up, 0 by default), gradient-norm clipping
  at ``grad_clip``;
* every ``eval_every`` steps (and at the last step) the STS-B dev probe (Spearman x100, alignment,
  uniformity) with the evaluation pooler, in eval mode; the best state by STS-B dev is kept on the
  CPU. Step 0 is probed too, for the trajectory plots, but it is not a model-selection candidate
  (SimCSE never selects the untrained encoder) unless the run has no training steps;
* at the end the best state is loaded, the method's head is copied into the model's pooler (so the
  ``cls`` pooler uses it) and the final tasks are evaluated, optionally on post-whitened embeddings.

A non-finite loss raises :class:`~harness.errors.TrainingError` naming the step. Whatever fails, the
record is written with ``status: failed``, the error text and the trajectory so far, then the error
propagates. The record is also written at the start and after every evaluation.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from harness.config import RunConfig
from harness.errors import ConfigError, DataError, TrainingError
from harness.probe_cache import CACHE_DIR as PROBE_CACHE_DIR
from harness.probe_cache import ProbeCache, probe_key
from harness.record import RunRecord, new_record
from harness.store import RunStore, now_iso

if TYPE_CHECKING:
    from harness.encoder import SentenceEncoder
    from methods.base import Method

EmbedFn = Callable[[list[str]], np.ndarray]
LengthsFn = Callable[[list[str]], Sequence[int]]
Log = Callable[[str], None]
RESERVED_KEYS: frozenset[str] = frozenset({"step", "loss", "stsb_dev", "align", "uniform", "lr", "elapsed_s"})
EMBED_BATCH = 128


# -- data -----------------------------------------------------------------------------------------
def read_corpus(path: Path, min_sentences: int = 1) -> list[str]:
    """Read a one-sentence-per-line corpus.

    Args:
        path: the corpus file (UTF-8).
        min_sentences: at least this many sentences are required (one batch).

    Returns:
        The sentences in file order, line endings stripped.

    Raises:
        DataError: unreadable file, invalid UTF-8, an empty line (naming the first one), or fewer
            sentences than ``min_sentences``.
    """
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise DataError(f"cannot read corpus {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"corpus {path} is not valid UTF-8 (byte {exc.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    sentences = [line[:-1] if line.endswith("\r") else line for line in lines]
    empty = [i + 1 for i, s in enumerate(sentences) if not s.strip()]
    if empty:
        raise DataError(
            f"corpus {path}: line {empty[0]} is empty ({len(empty)} empty line(s) in all); the corpus "
            "must hold one sentence per line: remove empty lines, e.g. sed -i '/^[[:space:]]*$/d' FILE"
        )
    if len(sentences) < min_sentences:
        raise DataError(
            f"corpus {path} has {len(sentences)} sentence(s), fewer than one batch of {min_sentences}"
        )
    return sentences


def steps_per_epoch(num_sentences: int, batch_size: int) -> int:
    """Full batches in one pass over the corpus (the last partial batch is dropped)."""
    return num_sentences // batch_size


def total_steps(config: RunConfig, num_sentences: int) -> int:
    """The run's number of optimiser steps (``max_steps``, or one epoch when it is None)."""
    if config.max_steps is None:
        return steps_per_epoch(num_sentences, config.batch_size)
    return config.max_steps


def batches(sentences: Sequence[str], batch_size: int, seed: int) -> Iterator[list[str]]:
    """Endless batches of ``batch_size`` sentences: a seeded shuffle per epoch, partial batch dropped."""
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield [sentences[i] for i in order[start : start + batch_size]]


# -- seeding and schedule -------------------------------------------------------------------------
def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (every device's) generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def linear_schedule(total: int, warmup: int = 0) -> Callable[[int], float]:
    """Hugging Face's linear schedule: warm-up from 0, then linear decay to 0 at ``total`` steps."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


# -- one optimiser step ---------------------------------------------------------------------------
class TrainStep:
    """Tokenise, compute the method's loss, back-propagate, clip, step: one optimiser step.

    Shared by :func:`train_run` and the training-speed benchmark, so the benchmark times exactly the
    loop's step.

    Args:
        encoder: the sentence encoder (put in train mode here).
        method: the method module (its parameters are optimised with the encoder's).
        config: the run configuration (lr, weight decay, clipping, max length, precision, pooler).
        total: the run's number of steps (for the learning-rate schedule).
    """

    def __init__(self, encoder: SentenceEncoder, method: Method, config: RunConfig, total: int) -> None:
        from harness.encoder import TrainingEncode

        self.encoder = encoder
        self.method = method
        self.config = config
        self.encode = TrainingEncode(encoder, config.train_pooler, config.length_buckets)
        if method.uses_encoder:
            method.attach(encoder)
        seen: set[int] = set()
        self.parameters: list[nn.Parameter] = []
        for p in [*encoder.parameters(), *method.trainable_parameters()]:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self.parameters.append(p)
        self.optimizer = make_adamw(self.parameters, config.lr, config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, linear_schedule(max(total, 1), config.warmup_steps)
        )
        self.device_type = encoder.device.type
        self.train()

    def train(self) -> None:
        self.encoder.train()
        self.method.train()

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.config.precision == "bf16":
            return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def __call__(self, sentences: Sequence[str], step: int) -> tuple[float, dict[str, float]]:
        """Run step ``step`` (1-based) on ``sentences``; return the loss and the method's metrics.

        The method's ``after_step`` hook runs after the optimiser step; its metrics are merged in.

        Raises:
            TrainingError: the loss is NaN or infinite (nothing is updated).
        """
        batch = self.encoder.tokenize(sentences, self.config.max_length)
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            out = self.method.compute_loss(self.encode, batch, step)
        loss = out.loss
        value = float(loss.detach().float().item())
        if not math.isfinite(value):
            raise TrainingError(f"non-finite loss ({value}) at step {step}")
        loss.backward()
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.config.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        metrics = {k: float(v) for k, v in out.metrics.items()}
        metrics.update({k: float(v) for k, v in self.method.after_step(step).items()})
        return value, metrics


def make_adamw(parameters: list[nn.Parameter], lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW (betas 0.9/0.999, eps 1e-8), fused where PyTorch has a fused kernel for the parameters'
    device and dtype: one kernel over all tensors instead of a loop of element-wise operations per
    tensor (MiniLM on one CPU thread: ~23 ms against ~190 ms per step); the same update up to float
    rounding. Elsewhere the default implementation."""
    kwargs: dict[str, Any] = {"lr": lr, "weight_decay": weight_decay, "betas": (0.9, 0.999), "eps": 1e-8}
    devices = {p.device.type for p in parameters}
    if parameters and devices <= {"cpu", "cuda"} and all(p.dtype == torch.float32 for p in parameters):
        try:
            return torch.optim.AdamW(parameters, fused=True, **kwargs)
        except (RuntimeError, ValueError):  # no fused kernel in this build: the default below
            pass
    return torch.optim.AdamW(parameters, **kwargs)


# -- evaluation hooks (looked up at call time so tests can replace them) --------------------------
def make_probe(
    data_root: Path, token_lengths: LengthsFn | None = None
) -> Callable[[EmbedFn], dict[str, float]]:
    """The STS-B dev probe: ``probe(embed) -> {"stsb_dev", "align", "uniform"}``.

    ``token_lengths`` (the encoder tokenizer's counts) lets the probe batch the dev sentences by token
    length, as ``harness eval`` does; without it batches are sorted by characters and pad far more.
    """
    from harness.evaluation.geometry import StsbDevProbe
    from harness.paths import senteval_dir

    probe: Callable[[EmbedFn], dict[str, float]] = StsbDevProbe(
        senteval_dir(data_root), token_lengths=token_lengths
    )
    return probe


FinalEvaluator = Callable[[EmbedFn, Path, str, str], dict[str, Any]]
FINAL_SECONDS = "seconds"
"""Key of a final evaluator's result holding seconds per task group; the run record keeps it as
``final_seconds`` (what the cost model calibrates the STS and transfer passes from)."""


def make_final_evaluator(token_lengths: LengthsFn | None = None) -> FinalEvaluator:
    """The final evaluation, imported before training starts so that a missing evaluator fails fast.

    Args:
        token_lengths: the encoder tokenizer's counts, so STS batches are sorted by token length
            exactly as ``harness eval`` sorts them (same numbers, far less padding).

    Returns:
        ``evaluate(embed, data_root, tasks, mode) -> {"sts": {..., "avg"}, "transfer": {..., "avg"}}``.
    """
    from harness.evaluation.runner import run_evaluation

    def final(embed: EmbedFn, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        report = run_evaluation(embed, data_root, tasks, mode, token_lengths=token_lengths)
        result: dict[str, Any] = report.record()  # results + sts_aggregates (all/mean/wmean)
        result[FINAL_SECONDS] = {k: round(v, 3) for k, v in report.seconds.items()}
        return result

    return final


def fit_whitening(embed: EmbedFn, sentences: Sequence[str], kind: str) -> EmbedFn:
    """BERT-whitening: estimate mean and matrix on ``embed(sentences)``; return the whitened embed."""
    from methods.whitening import apply_post_whitening, fit_post_whitening

    feats = np.concatenate(
        [embed(list(sentences[i : i + EMBED_BATCH])) for i in range(0, len(sentences), EMBED_BATCH)]
    )
    mu, w = fit_post_whitening(feats, kind)  # type: ignore[arg-type]

    def whitened(batch: list[str]) -> np.ndarray:
        return apply_post_whitening(embed(batch), mu, w)

    return whitened


def _check_post_whitening_available(kind: str) -> None:
    if kind == "none":
        return
    try:
        from methods.whitening import apply_post_whitening, fit_post_whitening  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"post_whiten={kind!r} needs methods.whitening ({exc})") from None


def cpu_bf16_slowdown(n: int = 512) -> float:
    """How many times slower a bf16 matmul is than an fp32 one on this CPU (measured, <= ~1 s).

    CPUs without native bf16 (no AVX512-BF16 / AMX) emulate it, often 10-100x slower; the CPU flags
    that would tell are hidden on some virtual machines, so this measures instead of looking up.
    """
    timings = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        a @ b  # the first calls pick and build the kernel
        a @ b
        best = math.inf
        for _ in range(5):  # the fastest of five: a busy machine slows single calls, not the best one
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        timings[dtype] = best
    return timings[torch.bfloat16] / max(timings[torch.float32], 1e-9)


# -- the run --------------------------------------------------------------------------------------
def _cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def train_run(
    config: RunConfig,
    data_root: Path,
    store: RunStore | None = None,
    *,
    device: str | None = None,
    num_threads: int | None = None,
    log: Log | None = print,
    save_checkpoint: bool = False,
    resume: bool = True,
) -> RunRecord:
    """Train and evaluate one run; return its record (also saved to ``store`` when given).

    With a store, the run checkpoints at every evaluation point (``<store>/resume/<run_id>.pt``, see
    :mod:`harness.checkpoint`) and, when ``resume`` and such a checkpoint of the same config exists
    (a killed run), continues from it with the same numbers as an uninterrupted run. The checkpoint
    is deleted when the run finishes.

    Args:
        config: the resolved run configuration.
        data_root: the data root (``senteval/`` for evaluation; relative corpus paths).
        store: where the record is written (start, every evaluation, end); None = not written.
        device: torch device; default ``cuda`` when available, else ``cpu``.
        num_threads: torch intra-op threads for this run (restored afterwards) when the config does
            not fix them (``config.threads``, part of the run id, wins).
        log: where progress lines go (None = silent).
        save_checkpoint: save the best encoder (``save_pretrained`` + tokenizer) under
            ``store.checkpoint_dir(run_id)``.
        resume: continue from the run's resume checkpoint when there is one.

    Returns:
        The run record (see :mod:`harness.store`), with ``status: finished``.

    Raises:
        HarnessError: configuration, data, model-loading or training errors (the record, when a
            store is given, says ``failed`` and keeps the trajectory so far).
    """
    say: Log = log if log is not None else (lambda _line: None)
    if config.threads is not None:
        num_threads = config.threads  # part of the run id: the profile fixes it
    if save_checkpoint and store is None:
        raise ConfigError("save_checkpoint needs a run store (the checkpoint lives under it)")
    record = new_record(config)
    wall0 = time.perf_counter()

    def save() -> None:
        record["wall_time_s"] = round(time.perf_counter() - wall0, 3)
        if store is not None:
            store.save(record)

    save()
    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    from harness import checkpoint as ckpt
    from harness import memory

    memory.reset_peak()

    def note_peak() -> None:  # this run's peak resident set (reset above; a reused worker's is not)
        peak = memory.peak_rss_bytes()
        if peak is not None:
            record["peak_rss_mb"] = round(peak / 2**20, 1)

    resume_path = ckpt.checkpoint_path(store.root, config.run_id()) if store is not None else None
    probe_cache = ProbeCache(store.root / PROBE_CACHE_DIR) if store is not None else None
    try:
        _run(
            config,
            data_root,
            record,
            save,
            say,
            device,
            store if save_checkpoint else None,
            resume_path,
            resume,
            probe_cache,
        )
        record["status"] = "finished"
    except BaseException as exc:
        record["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["finished_at"] = now_iso()
        note_peak()
        save()
        raise
    finally:
        if num_threads is not None:
            torch.set_num_threads(old_threads)
    record["finished_at"] = now_iso()
    note_peak()
    save()
    if resume_path is not None:
        ckpt.remove_checkpoint(resume_path)
    return record


def _run(
    config: RunConfig,
    data_root: Path,
    record: RunRecord,
    save: Callable[[], None],
    say: Log,
    device: str | None,
    checkpoint_store: RunStore | None,
    resume_path: Path | None = None,
    resume: bool = True,
    probe_cache: ProbeCache | None = None,
) -> None:
    from harness import checkpoint as ckpt
    from harness.encoder import load_encoder
    from harness.evaluation.runner import encoder_functions
    from harness.record import provenance
    from methods import get_method

    run_id = record["run_id"]
    _check_post_whitening_available(config.post_whiten)
    seed_everything(config.seed)
    sentences = read_corpus(Path(config.corpus), min_sentences=config.batch_size)
    total = total_steps(config, len(sentences))
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    say(
        f"[{run_id}] {config.method} on {config.model}, {len(sentences)} sentences, {total} steps of "
        f"{config.batch_size}, eval every {config.eval_every}, device {dev}"
    )
    if "bf16" in (config.precision, config.eval_precision) and torch.device(dev).type == "cpu":
        slowdown = cpu_bf16_slowdown()
        if slowdown > 2.0:
            say(
                f"[{run_id}] warning: bf16 matmuls are emulated on this CPU ({slowdown:.0f}x slower than "
                "fp32 here): bf16 will make this run much slower, not faster"
            )
    encoder = load_encoder(config.model, dev, seed=config.seed)
    record["provenance"] = provenance(dev, torch.get_num_threads())
    record["method_notes"] = config.params.describe(encoder.hidden_size)
    method_cls = get_method(config.method)
    method = method_cls(config.params, encoder.hidden_size).to(dev)
    step_fn = TrainStep(encoder, method, config, total)
    _, token_lengths = encoder_functions(encoder, config.eval_pooler)
    probe = make_probe(data_root, token_lengths)
    final_evaluate = make_final_evaluator(token_lengths) if config.final_tasks != "none" else None

    def embed(batch: list[str]) -> np.ndarray:  # dev probes: the training precision
        return encoder.embed(batch, config.eval_pooler, config.precision)

    def embed_final(batch: list[str]) -> np.ndarray:  # final tasks: fp32 unless asked otherwise
        return encoder.embed(batch, config.eval_pooler, config.eval_precision)

    def head_into_pooler(required: bool) -> None:
        head = method.export_head()
        if head is None:
            return
        try:
            encoder.load_head_into_pooler(head)
        except ConfigError:
            if required:
                raise

    wall0 = time.perf_counter()
    clock = ckpt.CheckpointClock()
    best: dict[str, Any] = {"score": -math.inf, "step": None, "encoder": None, "method": None}
    eval_time = 0.0
    train_time = 0.0
    pending_loss: list[float] = []
    pending_metrics: dict[str, list[float]] = {}

    def evaluate_now(step: int) -> None:
        nonlocal eval_time
        t0 = time.perf_counter()
        if config.eval_pooler == "cls":
            head_into_pooler(required=True)
        key = None
        if step == 0 and probe_cache is not None:  # the starting encoder: shared by every run
            key = probe_key(
                encoder.model,
                probe,
                pooler=config.eval_pooler,
                precision=config.precision,
                device=encoder.device,
            )
        cached = probe_cache.get(key) if probe_cache is not None and key is not None else None
        if cached is not None:
            scores = cached
            record["step0_probe_cached"] = True
        else:
            scores = probe(embed)
            if probe_cache is not None and key is not None:
                probe_cache.put(key, scores, run_id=run_id, model=config.model)
        step_fn.train()
        eval_time += time.perf_counter() - t0
        point: dict[str, Any] = {
            "step": step,
            "loss": float(np.mean(pending_loss)) if pending_loss else None,
            "stsb_dev": float(scores["stsb_dev"]),
            "align": float(scores["align"]),
            "uniform": float(scores["uniform"]),
            "lr": step_fn.lr,
            "elapsed_s": round(time.perf_counter() - wall0, 3),
        }
        for key in sorted(scores):
            if key not in point:
                point[key] = float(scores[key])
        for key, values in sorted(pending_metrics.items()):
            point[key if key not in RESERVED_KEYS else f"method_{key}"] = float(np.mean(values))
        pending_loss.clear()
        pending_metrics.clear()
        record["trajectory"].append(point)
        candidate = step > 0 or total == 0
        if candidate and point["stsb_dev"] > best["score"]:
            best.update(
                score=point["stsb_dev"],
                step=step,
                encoder=_cpu_state(encoder),
                method=method.snapshot_state(),
            )
            record["best_step"] = step
            record["best_stsb_dev"] = point["stsb_dev"]
        record["train_time_s"] = round(train_time, 3)
        record["eval_time_s"] = round(eval_time, 3)
        save()
        say(
            f"[{run_id}] step {step}/{total} loss {_fmt(point['loss'])} stsb_dev {point['stsb_dev']:.2f} "
            f"align {point['align']:.4f} uniform {point['uniform']:.4f} "
            f"({point['elapsed_s']:.0f} s){' *' if record['best_step'] == step else ''}"
        )
        if resume_path is not None and clock.due(step, total):  # last: no random draws after it
            state = ckpt.training_state(
                config=record["config"],
                step=step,
                encoder=encoder,
                method=method,
                optimizer=step_fn.optimizer,
                scheduler=step_fn.scheduler,
                best=best,
                record=record,
                train_time=train_time,
                eval_time=eval_time,
            )
            ckpt.save_checkpoint(resume_path, state)

    start = 0
    resumed, why_not = ckpt.load_checkpoint(resume_path, record["config"]) if resume_path else (None, None)
    if why_not:
        say(f"[{run_id}] starting from step 0: {why_not}")
    if resumed is not None and resume:
        start = ckpt.restore_training_state(
            resumed,
            encoder=encoder,
            method=method,
            optimizer=step_fn.optimizer,
            scheduler=step_fn.scheduler,
            best=best,
            record=record,
        )
        train_time, eval_time = float(resumed["train_time"]), float(resumed["eval_time"])
        last = record["trajectory"][-1] if record["trajectory"] else {}
        wall0 -= float(last.get("elapsed_s") or 0.0)  # elapsed_s goes on from the checkpoint
        record["resumed_from_step"] = start
        step_fn.train()
        ckpt.set_rng_state(resumed["rng"])
        say(f"[{run_id}] resumed from the checkpoint at step {start}/{total}")
    else:
        evaluate_now(0)
    stream = batches(sentences, config.batch_size, config.seed)
    for _ in range(start):  # the stream is a function of the seed: skip the batches already used
        next(stream)
    for step in range(start + 1, total + 1):
        t0 = time.perf_counter()
        loss, metrics = step_fn(next(stream), step)
        train_time += time.perf_counter() - t0
        pending_loss.append(loss)
        for key, value in metrics.items():
            pending_metrics.setdefault(key, []).append(value)
        if step % config.eval_every == 0 or step == total:
            evaluate_now(step)

    if best["encoder"] is not None:
        encoder.load_state_dict(best["encoder"])
        method.restore_state(best["method"])
    encoder.eval()
    head_into_pooler(required=config.eval_pooler == "cls")
    if checkpoint_store is not None:
        target = checkpoint_store.checkpoint_dir(run_id)
        target.mkdir(parents=True, exist_ok=True)
        hf_model: Any = encoder.model
        hf_model.save_pretrained(str(target))
        encoder.tokenizer.save_pretrained(str(target))
        record["checkpoint"] = str(target)
        say(f"[{run_id}] best encoder (step {record['best_step']}) saved to {target}")

    t0 = time.perf_counter()
    final_embed: EmbedFn = embed_final
    if config.post_whiten != "none":
        fit_on = sentences[: config.post_whiten_sentences]
        say(f"[{run_id}] fitting {config.post_whiten} post-whitening on {len(fit_on)} corpus sentences")
        final_embed = fit_whitening(embed_final, fit_on, config.post_whiten)
    if final_evaluate is not None:
        say(
            f"[{run_id}] final evaluation ({config.final_tasks}, transfer {config.transfer_mode}, "
            f"{config.eval_precision})"
        )
        final = final_evaluate(final_embed, data_root, config.final_tasks, config.transfer_mode)
        seconds = final.pop(FINAL_SECONDS, None)
        record["final"] = final
        if isinstance(seconds, dict):
            record["final_seconds"] = seconds
    record["final_time_s"] = round(time.perf_counter() - t0, 3)
    eval_time += time.perf_counter() - t0
    record["train_time_s"] = round(train_time, 3)
    record["eval_time_s"] = round(eval_time, 3)


__all__ = [
    "TrainStep",
    "batches",
    "linear_schedule",
    "make_final_evaluator",
    "make_probe",
    "read_corpus",
    "seed_everything",
    "total_steps",
    "train_run",
]
