"""The SentEval transfer tasks (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC), with SentEval's numbers.

Reading, embedding and the classifier fits on the CPU (a process pool); the model selection is in
:mod:`harness.evaluation.transfer_protocol`, the device's batched fits in
:mod:`harness.evaluation.transfer_batched`.

The tasks (files, readers) are values of :mod:`harness.evaluation.tasks`; the readers are in
:mod:`harness.evaluation.readers`.

The protocol is ``shared/docs/SENTEVAL_PROTOCOL.md`` ("Transfer tasks"); in short:

* Readers as SentEval's: MR/CR/SUBJ/MPQA are Latin-1 with empty lines kept, positives then
  negatives; SST2 has train/dev/test; TREC uses the coarse labels; MRPC's features are
  ``[|u - v|, u * v]``.
* Before embedding, every split is stable-sorted by ``(len(tokens), label)`` (MRPC:
  ``(len A, len B, label)``) and embedded in chunks of 128; that order is the one the folds and
  permutations see.
* Logistic regression with SentEval's model selection
  (:mod:`harness.evaluation.transfer_protocol`); accuracies are rounded exactly where SentEval
  rounds them.

Speed without changing a number: a fit depends only on its rows, its L2 value and the parameter
set (every fit reseeds), so independent fits (L2 values, folds, tasks) run in a process pool. Fits
that depend on a selection (the refit with the chosen L2) are submitted as soon as the fits they
depend on are done. The features reach the workers once, by ``fork`` (or once per worker where
only ``spawn`` exists), never per fit. Each fit uses :func:`~harness.evaluation.logreg.fit_fast`,
which issues the same kernels as SentEval's classifier without autograd and optimiser overhead.
``workers=1`` runs the same fits one after another in this process.

On a GPU (``device``), as SentEval runs its PyTorch classifier there, every fit of a stage trains
at once on the device instead (:func:`~harness.evaluation.transfer_batched.classify_batched`).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np
import torch

from harness.config.hardware import torch_threads
from harness.errors import ConfigError, DataError
from harness.evaluation.embed import EmbedFn
from harness.evaluation.logreg import FITTERS, PARAMETER_SETS, ClassifierConfig
from harness.evaluation.readers import TaskText, Tokens, sort_split
from harness.evaluation.tasks import check_names, transfer_task, transfer_task_names
from harness.evaluation.transfer_batched import classify_batched
from harness.evaluation.transfer_protocol import FitJob, TaskFeatures, TaskProtocol, TransferTiming, run_fit
from harness.parent_death import die_with_parent

BATCH_SIZE = 128
"""SentEval's ``params.batch_size``: sentences per encoder call."""

TRANSFER_TASKS: tuple[str, ...] = transfer_task_names()
"""The transfer tasks registered when this module was imported, in SimCSE's table order (for tests
and benchmarks; the code asks :func:`~harness.evaluation.tasks.transfer_task_names`)."""


def read_task(senteval_path: Path, task: str) -> TaskText:
    """Read one registered task and sort every split in SentEval's order."""
    text = transfer_task(task).read(Path(senteval_path))
    return TaskText(text.name, text.nclasses, {k: sort_split(v) for k, v in text.splits.items()})


# --------------------------------------------------------------------------------------------------
# Embedding
# --------------------------------------------------------------------------------------------------
def embed_column(sentences: Sequence[Tokens], embed: EmbedFn, batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Embed token lists as SentEval does: ``' '.join(tokens)``, chunks of ``batch_size``, vstack."""
    chunks = []
    for start in range(0, len(sentences), batch_size):
        batch = [" ".join(tokens) for tokens in sentences[start : start + batch_size]]
        out = np.asarray(embed(batch))
        if out.ndim != 2 or out.shape[0] != len(batch):
            raise ConfigError(
                f"embed must return an array [n, d] for n sentences; got shape {out.shape} for n={len(batch)}"
            )
        chunks.append(out)
    if not chunks:
        raise DataError("nothing to embed: a task split is empty")
    return np.vstack(chunks)


def embed_task(text: TaskText, embed: EmbedFn) -> TaskFeatures:
    """Embed every split; MRPC's features are ``np.c_[|A - B|, A * B]`` in the embedding dtype."""
    splits = {}
    for name, split in text.splits.items():
        cols = [embed_column(col, embed) for col in split.columns]
        feats = cols[0] if len(cols) == 1 else np.c_[np.abs(cols[0] - cols[1]), cols[0] * cols[1]]
        # torch.FloatTensor(X) at every SentEval fit; casting once here is the same, element-wise.
        splits[name] = (np.ascontiguousarray(feats, dtype=np.float32), split.labels)
    return TaskFeatures(text.name, text.nclasses, splits)


# --------------------------------------------------------------------------------------------------
# The CPU engine: fits in a process pool (or one after another)
# --------------------------------------------------------------------------------------------------
# Worker-side state: set once per worker process (inherited by fork, or unpickled once by spawn).
_WORKER_FEATURES: dict[str, TaskFeatures] = {}
_WORKER_CONFIG: list[ClassifierConfig] = []
_WORKER_ENGINE: list[str] = []


def _init_worker(
    features: dict[str, TaskFeatures], config: ClassifierConfig, engine: str, parent_pid: int
) -> None:
    die_with_parent(parent_pid)  # a run SIGKILLed mid-evaluation takes its classifiers with it
    torch.set_num_threads(1)
    _WORKER_FEATURES.clear()
    _WORKER_FEATURES.update(features)
    _WORKER_CONFIG[:] = [config]
    _WORKER_ENGINE[:] = [engine]


def _worker_fit(job: FitJob) -> float:
    return run_fit(job, _WORKER_FEATURES[job.task], _WORKER_CONFIG[0], _WORKER_ENGINE[0])


def _mp_context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _expected_cost(protocol: TaskProtocol) -> int:
    rows = sum(len(y) for _, y in protocol.features.splits.values())
    return rows * (1 if protocol.kind == "nested" else 4)


def default_workers() -> int:
    """Classifier-fit processes by default: the process's torch CPU threads (its CPU share)."""
    import torch

    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))


ENGINES: tuple[str, ...] = (*FITTERS, "batched")
"""The classifier fits' implementations: ``fast`` and ``reference`` one fit at a time on the CPU
(:mod:`~harness.evaluation.logreg`), ``batched`` every fit of a stage at once on any device."""


def classify_tasks(
    features: Mapping[str, TaskFeatures],
    mode: str = "fasttest",
    workers: int | None = None,
    engine: str | None = None,
    timing: TransferTiming | None = None,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Run SentEval's classifier protocol on embedded tasks and return each task's ``acc``.

    Args:
        features: Embedded tasks by name (from :func:`embed_task`).
        mode: ``"fasttest"`` or ``"test"`` (SimCSE's parameter sets), as the callers checked it
            (:func:`~harness.evaluation.runner.check_mode`, the run settings).
        workers: Processes to fit in; 1 runs every fit in this process. Default: torch's thread count
            (the CPU share a run was given: a grid trial with one CPU fits in one process, not in as
            many as the machine has cores).
        engine: ``"fast"`` (same numbers, less overhead), ``"reference"`` (SentEval's classifier
            code path, for comparisons) or ``"batched"``
            (:func:`~harness.evaluation.transfer_batched.classify_batched`); default ``batched`` on an
            accelerator, ``fast`` on the CPU.
        timing: Filled with wall times when given.
        device: Where the ``batched`` fits run (default: the CPU); an accelerator chooses them.

    Returns:
        Test accuracy in percent per task, rounded as SentEval rounds it.
    """
    place = torch.device(device if device is not None else "cpu")
    engine = engine if engine is not None else ("fast" if place.type == "cpu" else "batched")
    if engine not in ENGINES:
        raise ConfigError(f"unknown classifier engine {engine!r}; choose one of {', '.join(ENGINES)}")
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    config = PARAMETER_SETS[mode]
    for name, feats in features.items():
        if name != feats.name:
            raise ConfigError(f"features[{name!r}] holds task {feats.name!r}")
    protocols = {name: TaskProtocol(feats, config) for name, feats in features.items()}
    start = time.perf_counter()
    timing = timing if timing is not None else TransferTiming()
    results: dict[str, float] = {}
    if engine == "batched":
        results = classify_batched(protocols, config, place, timing, start)
        timing.seconds = time.perf_counter() - start
        return {name: results[name] for name in features}
    with torch_threads(1):
        if workers == 1:
            for name, proto in protocols.items():
                sel = [run_fit(j, proto.features, config, engine) for j in proto.selection_jobs]
                fin = [run_fit(j, proto.features, config, engine) for j in proto.final_jobs(sel)]
                results[name] = proto.accuracy(fin)
                timing.finished_at[name] = time.perf_counter() - start
        else:
            results = _classify_parallel(protocols, config, engine, workers, timing, start)
    timing.seconds = time.perf_counter() - start
    return {name: results[name] for name in features}


def _classify_parallel(
    protocols: dict[str, TaskProtocol],
    config: ClassifierConfig,
    engine: str,
    workers: int,
    timing: TransferTiming,
    start: float,
) -> dict[str, float]:
    """Stage-1 fits of every task in one queue; a task's refits jump the queue once it is ready.

    At most ``2 * workers`` fits are in flight, so a refit waits for at most that many fits, and
    an interrupt cancels little.
    """
    feats = {p.name: p.features for p in protocols.values()}
    selection: dict[str, list[float]] = {n: [0.0] * len(p.selection_jobs) for n, p in protocols.items()}
    finals: dict[str, list[float]] = {}
    left = {name: len(p.selection_jobs) for name, p in protocols.items()}
    results: dict[str, float] = {}
    # Longest chains first (SST2's refit on 67k rows waits for its selection fits).
    order = sorted(protocols, key=lambda n: -_expected_cost(protocols[n]))
    ready: deque[tuple[str, str, int, FitJob]] = deque(
        (name, "selection", i, job) for name in order for i, job in enumerate(protocols[name].selection_jobs)
    )
    pending: dict[Future[float], tuple[str, str, int]] = {}
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_mp_context(),
        initializer=_init_worker,
        initargs=(feats, config, engine, os.getpid()),
    )
    try:
        while ready or pending:
            while ready and len(pending) < 2 * workers:
                name, stage, i, job = ready.popleft()
                pending[pool.submit(_worker_fit, job)] = (name, stage, i)
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                name, stage, i = pending.pop(fut)
                value = fut.result()
                left[name] -= 1
                if stage == "selection":
                    selection[name][i] = value
                    if left[name] == 0:
                        jobs = protocols[name].final_jobs(selection[name])
                        finals[name] = [0.0] * len(jobs)
                        left[name] = len(jobs)
                        ready.extendleft(
                            (name, "final", j, job) for j, job in reversed(list(enumerate(jobs)))
                        )
                else:
                    finals[name][i] = value
                    if left[name] == 0:
                        results[name] = protocols[name].accuracy(finals[name])
                        timing.finished_at[name] = time.perf_counter() - start
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results


def check_tasks(tasks: Sequence[str] | None) -> list[str]:
    """The requested tasks (all registered by default), validated, duplicates dropped, order kept."""
    if tasks is None or isinstance(tasks, str):
        return list(check_names("transfer", tasks))
    check_names("transfer", tasks)
    return list(dict.fromkeys(tasks))


def average(accuracies: Mapping[str, float]) -> float:
    """The table's average as SimCSE prints it: ``"%.2f" % (sum / count)`` of the task accuracies."""
    values = [float(v) for v in accuracies.values()]
    return float("%.2f" % (sum(values) / len(values)))


def evaluate_transfer(
    embed: EmbedFn,
    senteval_path: Path,
    mode: str = "fasttest",
    tasks: Sequence[str] | None = None,
    workers: int | None = None,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Evaluate an encoder on the SentEval transfer tasks with SentEval's exact protocol.

    Args:
        embed: Embeds exactly the sentences it is given (``list[str]`` -> ``[n, d]``); called with
            SentEval's batches (sorted splits, chunks of 128).
        senteval_path: The SentEval data folder (``.../senteval``).
        mode: ``"fasttest"`` (5 folds, RMSprop, batch 128, tenacity 3, epoch size 2) or ``"test"``
            (10 folds, Adam, batch 64, tenacity 5, epoch size 4), as the callers checked it
            (:func:`~harness.evaluation.runner.check_mode`, the run settings).
        tasks: Registered task names (:mod:`harness.evaluation.tasks`); default all of them.
        workers: Processes for the classifier fits; default :func:`default_workers` (torch's thread
            count); 1 = sequential.
        device: The run's device: an accelerator fits the classifiers there (:func:`classify_tasks`);
            ``None`` or the CPU, in processes on the CPU.

    Returns:
        Test accuracy in percent per task (SentEval's ``acc``) and ``avg``, their mean rounded to 2
        decimals.

    Raises:
        ConfigError: Unknown task, bad ``workers``, or an ``embed`` returning a bad shape.
        DataError: A missing or malformed data file (the message names the file and line).
    """
    names = check_tasks(tasks)
    texts = [read_task(Path(senteval_path), name) for name in names]  # read all before embedding
    features = {text.name: embed_task(text, embed) for text in texts}
    accuracies = classify_tasks(features, mode=mode, workers=workers, device=device)
    return {**accuracies, "avg": average(accuracies)}
