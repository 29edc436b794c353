"""The training loop: one run = one :class:`~harness.store.run_config.RunConfig` -> one run record.

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
* every ``eval_every`` steps (and at the last step) the STS-B dev evaluation (Spearman x100,
  alignment, uniformity) with the evaluation pooler, in eval mode; the best state by STS-B dev is kept
  on the CPU. Step 0 is evaluated too, for the trajectory plots, but it is not a model-selection candidate
  (SimCSE never selects the untrained encoder) unless the run has no training steps;
* at the end the best state is loaded, the method's head is copied into the model's pooler (so the
  ``cls`` pooler uses it) and the final tasks are evaluated, optionally on post-whitened embeddings.
  A method with its own sentence head (:meth:`~methods.base.Method.sentence_head`, IS-BERT's CNN)
  is embedded through that head instead of the pooler, in the dev evaluations and the final tasks alike,
  on the text :meth:`~methods.base.Method.sentence_input` makes of each sentence where the method
  has one (PromptBERT's template).

A step never waits for the device: its loss, metrics and the method's checks (a whitening's
non-finite input, :func:`~methods.checks.device_check`) stay there until the next evaluation point
reads them (:mod:`harness.run.trajectory`). A failed check, a non-finite loss, or one beyond
float16's range (overflowing logits), raises :class:`~harness.errors.TrainingError` there, naming
the step it happened at; so do final scores that are not finite (the run is failed, not finished). Whatever
fails, the record is written with ``status: failed``, the error text and the trajectory so far, then
the error propagates. The record is also written at the start and after every evaluation.

:func:`train_run` is the entry point; the run itself is a :class:`TrainingRun`, whose state lives on
the object and whose steps (setup, start, dev evaluation, select, checkpoint, train loop, final evaluation)
are its methods.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.config.datasets import data_checksums
from harness.config.hardware import default_device, torch_threads
from harness.config.settings import corpus_problems
from harness.encoder.loading import check_loaded, load_encoder
from harness.encoder.precision import describe
from harness.errors import ConfigError
from harness.evaluation.geometry import DevEmbedFn
from harness.evaluation.runner import encoder_functions
from harness.evaluation.tasks import sts_files, stsb_dev_file, transfer_files
from harness.run import checkpoint as ckpt
from harness.run import process_memory as memory
from harness.run.data import batches, read_corpus, seed_everything, total_steps
from harness.run.dev_cache import CACHE_DIR as DEV_CACHE_DIR
from harness.run.dev_cache import DevCache
from harness.run.embedding import RunEmbedding
from harness.run.evaluation_point import CheckpointHook, EvaluationPoints, Log, PointHook, RunCalls, RunTimes
from harness.run.final import FinalStage, ThreadsHook
from harness.run.hooks import FinalEvaluator, cpu_bf16_slowdown, make_dev_eval, make_final_evaluator
from harness.run.step import TrainStep
from harness.run.trajectory import PendingSteps
from harness.store.provenance import now_iso
from harness.store.record import RunRecord, Status, new_record, provenance
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore
from methods import get_method

if TYPE_CHECKING:
    from harness.encoder.model import SentenceEncoder
    from methods.base import Method


# -- the run --------------------------------------------------------------------------------------
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
    on_point: PointHook | None = None,
    on_checkpoint: CheckpointHook | None = None,
    compile: bool | None = None,
    final_threads: ThreadsHook | None = None,
    sentences: list[str] | None = None,
) -> RunRecord:
    """Train and evaluate one run; return its record (also saved to ``store`` when given).

    With a store, the run checkpoints at every evaluation point (``<store>/resume/<run_id>.pt``, see
    :mod:`harness.run.checkpoint`) and, when ``resume`` and such a checkpoint of the same config exists
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
        on_point: called after every evaluation point (the record saved) with the trajectory point,
            ``total_steps`` and the ``best_stsb_dev`` so far (Ray Tune's trials report it live), and
            once after a resume with the point the run resumed from (and ``resumed_from_step``).
        on_checkpoint: called with the resume checkpoint's path and step after each one is written.
        compile: compile the training forward (:class:`~harness.run.step.TrainStep`); None = where
            it helps, on a CUDA GPU (on a CPU it measured slower than the eager step,
            docs/speed.md). Not part of the run id (like the device); the record's provenance says.
        final_threads: asked as the final evaluation starts on a CPU: the threads it may use, when
            more than the run's own (the record's ``final_threads`` then says how many it used).
        sentences: the corpus as :func:`~harness.run.data.read_corpus` read it, where the caller
            read it already (``harness train`` checks it before the record is written); None = read
            here.

    Returns:
        The run record (see :mod:`harness.store`), with ``status: finished``.

    Raises:
        HarnessError: configuration, data, model-loading or training errors (the record, when a
            store is given, says ``failed`` and keeps the trajectory so far).
    """
    if config.threads is not None:
        num_threads = config.threads  # part of the run id: the profile fixes it
    run = TrainingRun(
        config,
        data_root,
        store,
        device=device,
        log=log,
        save_checkpoint=save_checkpoint,
        resume=resume,
        compile=compile,
        on_point=on_point,
        on_checkpoint=on_checkpoint,
        final_threads=final_threads,
        sentences=sentences,
    )
    return run.execute(num_threads)


class TrainingRun:
    """One training run: its state, and the named steps :func:`train_run` takes in order.

    * :meth:`execute`: the shell around the steps: the record is saved at the start, its status,
      error, end time and peak memory are written whatever happens, the resume checkpoint is
      deleted when the run finished;
    * :meth:`setup`: corpus, encoder, method, step function and evaluators, in the order that fixes
      the run's random draws;
    * :meth:`start`: continue from the resume checkpoint, or evaluate the starting encoder (step 0);
    * :meth:`train_loop`: the optimiser steps, with an evaluation point every ``eval_every`` steps
      (:attr:`points`, an :class:`~harness.run.evaluation_point.EvaluationPoints`: the dev evaluation, the
      trajectory point, the best state by STS-B dev, the log line, the resume checkpoint);
    * the end (:attr:`end`, a :class:`~harness.run.final.FinalStage`): the best state loaded, the head
      copied into the pooler, the optional ``save_pretrained``, post-whitening and the final tasks.

    The run owns its state; the evaluation points and the end are parts it builds in :meth:`setup`,
    sharing its record, its best state and its clocks (:class:`~harness.run.evaluation_point.RunTimes`).

    The hooks :func:`make_dev_eval`, :func:`make_final_evaluator` and :func:`cpu_bf16_slowdown` are
    looked up in this module when they are called, so tests can replace them.
    """

    # built by setup()
    sentences: list[str]
    total: int
    encoder: SentenceEncoder
    method: Method
    step_fn: TrainStep
    dev_eval_fn: Callable[[DevEmbedFn], dict[str, float]]
    final_evaluate: FinalEvaluator | None
    points: EvaluationPoints
    end: FinalStage

    def __init__(
        self,
        config: RunConfig,
        data_root: Path,
        store: RunStore | None = None,
        *,
        device: str | None = None,
        log: Log | None = print,
        save_checkpoint: bool = False,
        resume: bool = True,
        compile: bool | None = None,
        on_point: PointHook | None = None,
        on_checkpoint: CheckpointHook | None = None,
        final_threads: ThreadsHook | None = None,
        sentences: list[str] | None = None,
    ) -> None:
        if save_checkpoint and store is None:
            raise ConfigError("save_checkpoint needs a run store (the checkpoint lives under it)")
        self.config = config
        self.data_root = data_root
        self.store = store
        self.device = device
        self.say: Log = log if log is not None else (lambda _line: None)
        self.model_store = store if save_checkpoint else None  # where save_pretrained writes
        self.resume = resume
        self.compile_request = compile
        self.compile = False  # decided in setup(), once the device is known
        self.record = new_record(config)
        self.run_id = self.record["run_id"]
        self.wall0 = time.perf_counter()  # the record's wall time
        self.resume_path = ckpt.checkpoint_path(store.root, config.run_id()) if store is not None else None
        self.dev_cache = DevCache(store.cache_root / DEV_CACHE_DIR) if store is not None else None
        self.best: dict[str, Any] = {"score": -math.inf, "step": None, "encoder": None, "method": None}
        self.times = RunTimes()  # elapsed0 is set by start()
        self.pending = PendingSteps()
        self.on_point = on_point  # told of every evaluation point (train_run's hook)
        self.on_checkpoint = on_checkpoint  # told of every resume checkpoint written
        self.final_threads = final_threads  # asked as the final evaluation starts
        self.corpus = sentences  # read by the caller already, or None (setup() reads it)

    # -- the shell ------------------------------------------------------------------------------
    def save(self) -> None:
        """Write the record (with the wall time so far) to the store, if there is one."""
        self.record["wall_time_s"] = round(time.perf_counter() - self.wall0, 3)
        if self.store is not None:
            self.store.save(self.record)

    def execute(self, num_threads: int | None = None) -> RunRecord:
        """Run every step with ``num_threads`` torch threads; return the record (see the class)."""

        self.save()
        with torch_threads(num_threads):
            memory.reset_peak()
            try:
                self.setup()
                start = self.start()
                self.train_loop(start)
                self.end.final_evaluation()
            except BaseException as exc:
                status: Status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                notes = getattr(exc, "__notes__", None)  # details kept out of the one-line error
                if notes:
                    self.record["error_details"] = "\n".join(str(n) for n in notes)
                self._end(status, f"{type(exc).__name__}: {exc}")
                raise
        self._end("finished")
        if self.store is not None:
            ckpt.remove_checkpoint(self.store.root, self.run_id)
        return self.record

    def _end(self, status: Status, error: str | None = None) -> None:
        self.record["status"] = status
        if error is not None:
            self.record["error"] = error
        self.record["finished_at"] = now_iso()
        peak = memory.peak_rss_bytes()  # this run's peak (reset in execute; a reused worker's is not)
        if peak is not None:
            self.record["peak_rss_mb"] = round(peak / 2**20, 1)
        self.save()

    # -- setup ----------------------------------------------------------------------------------
    def setup(self) -> None:
        """Corpus, encoder, method, step function and evaluators (this order fixes the random draws)."""

        config = self.config
        seed_everything(config.seed)
        self.sentences = (
            self.corpus
            if self.corpus is not None
            else read_corpus(Path(config.corpus), min_sentences=config.batch_size)
        )
        self.total = total_steps(config, len(self.sentences))
        dev = self.device or default_device()
        self.say(
            f"[{self.run_id}] {config.method} on {config.model}, {len(self.sentences)} sentences, "
            f"{self.total} steps of {config.batch_size}, eval every {config.eval_every}, device {dev}"
        )
        self._warn_if_bf16_is_emulated(dev)
        self.encoder = load_encoder(config.model, dev, seed=config.seed)
        poolers = {"train_pooler": config.train_pooler, "eval_pooler": config.eval_pooler}
        check_loaded(self.encoder, config.max_length, poolers)  # not at the first long sentence or step
        too_small = corpus_problems(config, len(self.sentences), self.encoder.hidden_size)
        if too_small:  # harness train and grid said so before; a run built in Python is told here
            raise too_small[0]
        self.compile = (
            self.compile_request if self.compile_request is not None else torch.device(dev).type == "cuda"
        )
        self.record["provenance"] = {
            **provenance(dev, torch.get_num_threads()),
            "compiled": self.compile,
            "arithmetic": {
                "training": describe(config.precision, torch.device(dev).type),
                "evaluation": describe(config.eval_precision, torch.device(dev).type),
            },
            "data": self._data_checksums(),
        }
        self.record["method_notes"] = config.params.describe(self.encoder.hidden_size)
        method_cls = get_method(config.method)
        self.method = method_cls(config.params, self.encoder.hidden_size).to(dev)
        self.step_fn = TrainStep(self.encoder, self.method, config, self.total, compile=self.compile)
        if self.method.sentence_input() is not None and self.method.sentence_head() is None:
            raise RuntimeError(f"{config.method}: sentence_input() needs a sentence_head() to read its text")
        _, token_lengths = encoder_functions(self.encoder, config.eval_pooler)
        self.dev_eval_fn = make_dev_eval(self.data_root, token_lengths)
        final_tasks = config.final_tasks != "none"
        device = self.encoder.device
        self.final_evaluate = make_final_evaluator(token_lengths, device=device) if final_tasks else None
        self._build_parts()

    def _build_parts(self) -> None:
        """The evaluation points and the end of the run, sharing the run's record, best state and clocks."""
        self.embedding = RunEmbedding(self.encoder, self.method, self.config)
        self.points = EvaluationPoints(
            config=self.config,
            record=self.record,
            best=self.best,
            times=self.times,
            total=self.total,
            encoder=self.encoder,
            method=self.method,
            step_fn=self.step_fn,
            dev_eval_fn=self.dev_eval_fn,
            calls=RunCalls(self.save, self.say, self.embedding.head_into_pooler, embed=self.embedding.dev),
            pending=self.pending,
            dev_cache=self.dev_cache,
            resume_path=self.resume_path,
            on_point=self.on_point,
            on_checkpoint=self.on_checkpoint,
        )
        self.end = FinalStage(
            config=self.config,
            record=self.record,
            best=self.best,
            times=self.times,
            data_root=self.data_root,
            encoder=self.encoder,
            method=self.method,
            sentences=self.sentences,
            calls=RunCalls(self.save, self.say, self.embedding.head_into_pooler, embed=self.embedding.final),
            final_evaluate=self.final_evaluate,
            model_store=self.model_store,
            final_threads=self.final_threads,
        )

    def _data_checksums(self) -> dict[str, object]:
        """The SHA-256 of the corpus and of the SentEval files this run reads (its provenance)."""
        senteval = Path(self.data_root) / "senteval"  # a run's test stand-ins may have none
        files = [stsb_dev_file(senteval)]
        if self.config.final_tasks in ("sts", "all"):
            files += sts_files(senteval)
        if self.config.final_tasks in ("transfer", "all"):
            files += transfer_files(senteval)
        return data_checksums(Path(self.config.corpus), senteval, files)

    def _warn_if_bf16_is_emulated(self, dev: str) -> None:
        if "bf16" not in (self.config.precision, self.config.eval_precision):
            return
        if torch.device(dev).type != "cpu":
            return
        # The check draws from the global random stream. A run that trains in bf16 keeps those draws
        # (every committed record has them); one whose final tasks alone are bf16 draws from a fork,
        # so that it trains as with fp32 final tasks.
        trains_in_bf16 = self.config.precision == "bf16"
        with contextlib.nullcontext() if trains_in_bf16 else torch.random.fork_rng(devices=[]):
            slowdown = cpu_bf16_slowdown()
        if slowdown > 2.0:
            self.say(
                f"[{self.run_id}] warning: bf16 matmuls are emulated on this CPU ({slowdown:.0f}x slower "
                "than fp32 here): bf16 will make this run much slower, not faster"
            )

    # -- start: resume or evaluate step 0 --------------------------------------------------------
    def start(self) -> int:
        """Continue from the resume checkpoint when there is one; else evaluate step 0. The first step."""

        self.times.elapsed0 = time.perf_counter()
        resumed, why_not = (
            ckpt.load_checkpoint(self.resume_path, self.record["config"])
            if self.resume_path
            else (None, None)
        )
        if why_not:
            self.say(f"[{self.run_id}] starting from step 0: {why_not}")
        if resumed is not None and self.resume:
            return self._restore(resumed)
        self.points.evaluate(0)
        return 0

    def _restore(self, resumed: dict[str, Any]) -> int:
        start = ckpt.restore_training_state(
            resumed,
            encoder=self.encoder,
            method=self.method,
            optimizer=self.step_fn.optimizer,
            scheduler=self.step_fn.scheduler,
            best=self.best,
            record=self.record,
            scaler=self.step_fn.scaler,
        )
        self.times.train_s, self.times.eval_s = float(resumed["train_time"]), float(resumed["eval_time"])
        last = self.record["trajectory"][-1] if self.record["trajectory"] else {}
        self.times.elapsed0 -= float(last.get("elapsed_s") or 0.0)  # elapsed_s goes on from the checkpoint
        self.record["resumed_from_step"] = start
        self.step_fn.train()
        ckpt.set_rng_state(resumed["rng"])
        self.say(f"[{self.run_id}] resumed from the checkpoint at step {start}/{self.total}")
        if last:  # a grid's progress line starts from there, not from 0
            self.points.tell(last, resumed_from_step=start)
        return start

    # -- the loop and its evaluation points ------------------------------------------------------
    def first_step(self, t0: float) -> None:
        """Add the seconds of this process's first step, the device finished (one wait, once), to
        ``first_step_s``: a compiled step's compilation, a device's warm-up, read apart from the
        steady steps by the calibration and the cost model."""
        if torch.device(self.encoder.device).type == "cuda":
            torch.cuda.synchronize(self.encoder.device)
        self.record["first_step_s"] = round(
            float(self.record.get("first_step_s") or 0.0) + time.perf_counter() - t0, 3
        )

    def train_loop(self, start: int) -> None:
        """Steps ``start + 1 .. total``; an evaluation point every ``eval_every`` steps and at the last."""
        config = self.config
        stream = batches(self.sentences, config.batch_size, config.seed)
        for _ in range(start):  # the stream is a function of the seed: skip the batches already used
            next(stream)
        t0 = time.perf_counter()
        for step in range(start + 1, self.total + 1):
            loss, metrics = self.step_fn(next(stream), step)
            self.pending.add(step, loss, metrics, self.step_fn.checks)
            if step == start + 1:  # compilation and warm-up: what a process's first step costs
                self.first_step(t0)
            if step % config.eval_every == 0 or step == self.total:
                self.pending.check()  # the steps' losses, read once: the device finishes them here
                self.times.train_s += time.perf_counter() - t0
                self.points.evaluate(step)
                t0 = time.perf_counter()
