"""The Ray Tune adapter: the ONLY module of the harness that imports ``ray``.

:func:`run_trials` runs one Tune trial per resolved :class:`~harness.config.RunConfig`. Each trial is
a function trainable that calls :func:`harness.train.train_run` on whichever node Ray gives it.

* Records travel through Ray, not through a shared folder: the trial's store is a relay
  (:class:`TrialStore`) whose saves ride on the trial's Tune reports, and the driver alone writes
  the run store (``runs/records/<run_id>.json``, the only thing tables read) from its callback, with
  the store's own rules (attempts; a record sent twice is one record). See :mod:`harness.relay`.
* Resume checkpoints and ``--save-model`` weights go through Tune's storage (``storage_dir``: a
  folder or a pyarrow URI; default ``<runs>/tune``): each resume checkpoint is reported with
  ``tune.report(..., checkpoint=...)``; a trial Tune retries (``max_failures``, e.g. after its node
  was lost) starts from ``tune.get_checkpoint()``, on any node that reaches the storage; a grid
  started again after its driver was killed hands each run the checkpoint the driver noted
  (``<runs>/resume/<run_id>.json``). A finished run's last checkpoint is its saved encoder (the driver
  fetches it into ``<runs>/checkpoints/<run_id>``) or a small marker, so Tune (``num_to_keep=1``)
  drops its resume checkpoint.

* Live curves: the real trial body reports every evaluation point through Tune (step, loss, STS-B
  dev, alignment, uniformity, elapsed), then once more at its end (status, best STS-B dev, work
  seconds). Tune's own folder of a grid, ``<runs>/tune/<grid name>-<time>/`` (TensorBoard event
  files, ``progress.csv`` and ``result.json`` per run, error files of failed trials), is kept:
  ``tensorboard --logdir`` on it shows every run's curves while the grid runs. ``--track mlflow`` /
  ``wandb`` add Ray's own MLflow and Weights & Biases callbacks (:mod:`harness.tracking`).
* Ray starts locally with every CPU and GPU it sees, or connects to ``address`` (an existing
  cluster; no node needs the driver's runs folder, every node reads the data root at the driver's
  path). ``smoke=True`` starts a small local Ray (no GPUs) for tests and CI.
* Resources per trial: ``cpus_per_trial`` CPUs (also the trial's torch thread count) and
  ``gpus_per_trial`` GPUs (fractions share a GPU between small trials; default 1 when Ray sees a
  GPU, else 0), plus ``trial_resources`` (custom Ray resources: trials go only to nodes offering them).
* A failing trial does not stop the others (``fail_fast=False``; no retry unless ``max_failures``).
  ``train_run`` records its own failures; a trial that dies before or outside it (an import error, a worker
  killed for memory) gets a ``failed`` record written by the trial wrapper or, failing that, by the
  driver, with the reason.
* Memory: a CPU trial also asks Ray for the host memory it needs at its peak
  (:func:`harness.memory.estimate_bytes`, at most the largest node's ``memory`` resource), so Ray starts
  no more trials at once than the node holds (two K = 10 noise probes at ~5 GB each fit in 24 GB,
  three do not); after every trial the worker gives its freed memory back to the system (a reused
  worker runs the next trial in a new thread, whose allocator would not reuse it).
* Ray Tune itself failing (Tune 2.5x raises on the ``OutOfMemoryError`` of a worker Ray's memory
  monitor killed; tests/test_tune_smoke.py replays it) ends the grid with
  :class:`~harness.progress.GridStopped`: runs left ``running`` are marked ``interrupted`` with
  Tune's reason, finished ones stay, the next grid resumes.
* Progress: a line per trial start and end, per evaluation point and at least every 30 s (done /
  running / failed / remaining, with an ETA from the cost model's estimates), written by
  :class:`harness.progress.GridProgress`; ``_Progress`` only adapts it to Tune's callbacks.
* Each trial gets one frozen :class:`TrialSpec` (data root, device, threads, the train function) and
  its :class:`~harness.config.RunConfig` itself, already validated by the grid; it works in a folder
  of its own, ``<tmp>/harness-trial-<worker pid>-*`` on its node, removed when it ends.
* Record bookkeeping (a ``failed`` record for a trial that died, ``interrupted`` marks) lives in
  :mod:`harness.bookkeeping`; SIGTERM handling in :mod:`harness.signals`.
* Resuming is the grid's job: killed and started again, it skips runs with a finished record
  (:mod:`harness.grid`), so only the remaining ones run.
* Ctrl-C: the trials are stopped, Ray shuts down, runs left ``running`` are marked ``interrupted``
  (the next grid runs them again) and :class:`KeyboardInterrupt` propagates (exit status 130).
* A locally started Ray keeps its session files in a fresh ``harness-ray-<pid>-*`` folder under the
  system temporary folder, removed at shutdown; folders left by killed grids (dead pid) are removed
  at the next start.

The returned :class:`~harness.progress.GridReport` says how much of the wall time was trial work
and how much was Ray start-up and scheduling.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import MIN_FREE_BYTES, WriteError, free_bytes, write_json
from harness.bookkeeping import ensure_failed_record, mark_interrupted, short_error
from harness.cleanup import TEMP_PREFIX, TRIAL_PREFIX, remove_stale_temp_dirs, remove_stale_trial_dirs
from harness.errors import ConfigError, HarnessError
from harness.progress import (
    GridInterrupted,
    GridProgress,
    GridReport,
    GridStopped,
    Log,
    print_line,
    save_traceback,
)
from harness.signals import keep_sigterm_handler
from harness.store import RunStore
from harness.tracking import Tracking

_QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage-stats reporting
    "RAY_AIR_NEW_OUTPUT": "0",  # the legacy reporter honours verbose=0
    "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "600",
    # Ctrl-C raises KeyboardInterrupt in the driver (Tune's own handler would end fit() quietly and
    # the grid would report success); run_trials marks the interrupted runs and re-raises it.
    "TUNE_DISABLE_SIGINT_HANDLER": "1",
}
for _key, _value in _QUIET_ENV.items():
    os.environ.setdefault(_key, _value)

import ray  # noqa: E402  (the environment above must be set first)
from ray import tune  # noqa: E402

if TYPE_CHECKING:
    from harness.config import RunConfig

TrainFn = Callable[..., Mapping[str, Any]]
"""``train_fn(config, data_root, store, *, device, num_threads) -> record`` (default: train_run)."""


def default_train_fn(
    config: RunConfig,
    data_root: Path,
    store: RunStore,
    *,
    device: str,
    num_threads: int,
    save_checkpoint: bool = False,
) -> Mapping[str, Any]:
    """The real trial body: :func:`harness.train.train_run`, silent, writing into ``store`` (the
    trial's relay), reporting each evaluation point and resume checkpoint to Tune."""
    from harness.train import train_run

    relay = store if isinstance(store, TrialStore) else None
    return train_run(
        config,
        data_root,
        store,
        device=device,
        num_threads=num_threads,
        log=None,
        save_checkpoint=save_checkpoint,
        on_point=relay.point if relay is not None else None,
        on_checkpoint=relay.checkpointed if relay is not None else None,
    )


LIVE_KEYS: tuple[str, ...] = (
    "step",
    "total_steps",
    "loss",
    "stsb_dev",
    "align",
    "uniform",
    "lr",
    "elapsed_s",
    "best_stsb_dev",
)
"""What a trial reports to Tune at each evaluation point (besides run id, status and work seconds)."""

REPORT_KEYS: tuple[str, ...] = ("run_id", "status", *LIVE_KEYS, "work_s", "record", "resume_step", "model")
"""Every report of a trial has these keys (Tune's CSV keeps the first report's columns); ``record``
is the run record's JSON text when it changed since the last report, ``resume_step`` marks a report
that carries a resume checkpoint, ``model`` one that carries the saved encoder."""


@dataclass(frozen=True)
class TrialSpec:
    """What every trial of a grid gets besides its run (one frozen value, shipped by Ray).

    Attributes:
        train_fn: the trial body (:func:`default_train_fn`, or a test's fake).
        data_root: the data root (absolute; every node reads it at this path).
        store_root: the driver's run store folder: only a trial on the driver's node uses it (it
            shares the driver's step-0 probe cache); records go back through Ray.
        device: ``cuda`` or ``cpu``.
        num_threads: torch threads of the trial (its CPUs).
        save_model: keep the run's best encoder (it travels through Tune's storage to the driver).
        driver_node: the Ray node id of the driver (None: the trial runs beside the driver).
    """

    train_fn: TrainFn
    data_root: Path
    store_root: Path
    device: str
    num_threads: int
    save_model: bool = False
    driver_node: str | None = None

    def cache_root(self) -> Path:
        """Where this node's trials share their step-0 probe cache: the driver's runs folder on the
        driver's node, else a folder of this node's own."""
        if self.driver_node is None or ray.get_runtime_context().get_node_id() == self.driver_node:
            return self.store_root
        return Path(tempfile.gettempdir()) / "harness-node-cache"


class TrialStore(RunStore):
    """A trial's run store: its records go to the driver in the trial's Tune reports; its files
    (the resume checkpoint as it is written, the saved model before it is handed to Tune) stay in a
    folder of the trial's own on whatever node runs it.

    The first :meth:`save` of the record (the run starts) is reported at once; every later one is
    kept and sent with the next report: an evaluation point (:meth:`point`), a resume checkpoint
    (:meth:`checkpointed`) or the trial's end (:meth:`report`).
    """

    def __init__(self, root: Path, cache_root: Path, run_id: str) -> None:
        super().__init__(root)  # the layout of the store's files, in the trial's own folder
        self.cache_root = cache_root
        self.run_id = run_id
        self.start = time.perf_counter()
        self.last: dict[str, Any] | None = None
        self.pending = False
        self.can_checkpoint = True

    def save(self, record: Mapping[str, Any]) -> Path:
        from harness.relay import decode_record, encode_record

        first = self.last is None
        self.last = decode_record(encode_record(record))  # a copy, as the store would read it back
        self.pending = True
        if first:  # the run has started: the driver's store says so at once, as it always did
            self.report()
        return self.path(str(record.get("run_id")))

    def load(self, run_id: str) -> dict[str, Any] | None:
        return dict(self.last) if self.last is not None and self.last.get("run_id") == run_id else None

    def report(self, fields: Mapping[str, Any] | None = None, checkpoint: Any = None) -> None:
        """One Tune report with every key of :data:`REPORT_KEYS` (the record, if it changed)."""
        from harness.relay import encode_record

        metrics: dict[str, Any] = dict.fromkeys(REPORT_KEYS)
        metrics.update(run_id=self.run_id, status=(self.last or {}).get("status", "running"))
        metrics.update(fields or {})
        metrics["work_s"] = time.perf_counter() - self.start
        if self.pending and self.last is not None:
            metrics["record"] = encode_record(self.last)
        if checkpoint is None:
            tune.report(metrics)
        else:
            tune.report(metrics, checkpoint=checkpoint)
        self.pending = False

    def point(self, point: Mapping[str, Any]) -> None:
        """An evaluation point (the record was saved just before it)."""
        self.report({**{key: point.get(key) for key in LIVE_KEYS}, "status": "running"})

    def checkpointed(self, path: Path, step: int) -> None:
        """The resume checkpoint of ``step`` is written: hand its folder to Tune's storage.

        A storage this node cannot reach (a local ``storage_path`` on another node: Ray refuses it)
        leaves the run without resume checkpoints rather than failing it.
        """
        if not self.can_checkpoint:
            return
        try:
            self.report({"resume_step": step}, checkpoint=tune.Checkpoint.from_directory(str(path.parent)))
        except RuntimeError as exc:
            if "storage" not in str(exc):
                raise
            self.can_checkpoint = False


def _trial_body(tune_config: dict[str, Any], *, spec: TrialSpec) -> None:
    """One Tune trial: resume from its last checkpoint, train the run it was given, report; record
    any failure. Everything the driver keeps travels in the reports (see :class:`TrialStore`)."""
    from harness.memory import release_freed

    entry = tune_config["run_entry"]
    config: RunConfig = entry["run"]  # validated by the grid: trusted as it is
    remove_stale_trial_dirs()
    root = Path(tempfile.mkdtemp(prefix=f"{TRIAL_PREFIX}{os.getpid()}-"))
    store = TrialStore(root, spec.cache_root(), config.run_id())
    try:
        _restore_checkpoint(store, entry.get("resume_from"))
        try:
            extra: dict[str, Any] = {"save_checkpoint": True} if spec.save_model else {}
            record = spec.train_fn(
                config, spec.data_root, store, device=spec.device, num_threads=spec.num_threads, **extra
            )
        except Exception as exc:
            ensure_failed_record(store, config, f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(Exception):  # the failed record to the driver, then the error
                store.report()
            raise
        finally:
            release_freed()
        store.save(record)  # a fake train_fn may return a record it did not save
        final = {"best_stsb_dev": record.get("best_stsb_dev")}
        checkpoint = _final_checkpoint(store, spec.save_model)
        try:
            store.report({**final, "model": spec.save_model or None}, checkpoint=checkpoint)
        except RuntimeError as exc:  # Ray refuses this node the storage: the record comes back alone
            if checkpoint is None or "storage" not in str(exc):
                raise
            store.pending = True
            store.report(final)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _restore_checkpoint(store: TrialStore, earlier: Mapping[str, Any] | None) -> None:
    """Put the run's last resume checkpoint where :func:`~harness.train.train_run` finds it: Tune's
    (this trial restarted after a failure, maybe on another node), else an earlier grid's."""
    from harness.relay import storage_filesystem

    checkpoint = tune.get_checkpoint()
    if checkpoint is None and earlier:
        with contextlib.suppress(Exception):
            checkpoint = tune.Checkpoint(earlier["path"], filesystem=storage_filesystem(earlier["storage"]))
    if checkpoint is None:
        return
    with contextlib.suppress(Exception):  # unreadable from this node: the run starts from step 0
        checkpoint.to_directory(str(store.root / "resume"))


def _final_checkpoint(store: TrialStore, save_model: bool) -> Any:
    """The finished run's last checkpoint: its saved encoder, else a small marker (Tune then drops
    the resume checkpoint, keeping one per trial); None when the run did not finish."""
    if not store.can_checkpoint or (store.last or {}).get("status") != "finished":
        return None
    folder = store.checkpoint_dir(store.run_id)
    if not (save_model and folder.is_dir()):
        folder = store.root / "finished"
        write_json(folder / "finished.json", {"run_id": store.run_id})
    return tune.Checkpoint.from_directory(str(folder))


def _trial_name(trial: Any) -> str:
    """Short trial names (Tune's default puts the whole config into the folder name)."""
    return f"{_entry(trial).get('run_id', 'trial')}_{trial.trial_id}"


def _entry(trial: Any) -> dict[str, Any]:
    """The ``{"run": RunConfig, "run_id": id}`` entry a trial was given."""
    return dict((trial.config or {}).get("run_entry") or {})


class _Progress(GridProgress, tune.Callback):
    """Tune's callbacks feeding :class:`~harness.progress.GridProgress` (its lines and failed records),
    and the driver's side of the trials' reports: every record a report carries is written to the
    store here (the driver alone writes it), resume checkpoints are noted, saved encoders fetched.

    Tune pickles its callbacks with the experiment state. The log sink is a driver-side object (the
    ``print`` builtin may even have been replaced since it was captured), so it is left out of the
    pickled state and falls back to :func:`~harness.progress.print_line` if the callback is ever
    restored.
    """

    storage: str = ""  # Tune's storage path or URI (where the checkpoints this grid notes live)
    unwritable: dict[str, str]  # run id -> why its record could not be written (its trial is stopped)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["log"] = print_line
        return state

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.trial_started(_entry(trial).get("run_id"))

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.receive(trial, result)
        self.trial_result(_entry(trial).get("run_id"), result)

    def receive(self, trial: Any, result: Mapping[str, Any]) -> None:
        """Write the record a report carried (a retried report writes the same attempt again)."""
        from harness.relay import decode_record, forget_checkpoint

        record = decode_record(result.get("record"))
        if record is None:
            return
        run_id = record["run_id"]
        record.pop("checkpoint", None)  # the trial's own folder: no path of this machine
        if result.get("model") and record.get("status") == "finished":
            record["checkpoint"] = str(self.store.checkpoint_dir(run_id))  # fetched by on_checkpoint
        try:
            self.store.save(record)
        except WriteError as exc:
            self.unwritable.setdefault(run_id, f"WriteError: {exc}")
            return
        if record.get("status") == "finished":
            with contextlib.suppress(OSError):
                forget_checkpoint(self.store.root, run_id, keep_under=_experiment_path(trial))

    def on_checkpoint(
        self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        from harness.relay import remember_checkpoint

        result = trial.last_result or {}
        run_id = str(_entry(trial).get("run_id"))
        step = result.get("resume_step")
        try:
            if isinstance(step, int):
                remember_checkpoint(self.store.root, run_id, checkpoint.path, self.storage, step)
            elif result.get("model"):
                self._fetch_model(run_id, checkpoint)
        except WriteError as exc:
            self.unwritable.setdefault(run_id, f"WriteError: {exc}")

    def _fetch_model(self, run_id: str, checkpoint: Any) -> None:
        """The saved encoder, from Tune's storage into ``<runs>/checkpoints/<run_id>`` (``harness
        export`` reads it there); with a local storage Tune's copy is then removed (one copy kept)."""
        from harness.atomic import atomic_folder

        target = self.store.checkpoint_dir(run_id)
        with atomic_folder(target, replace=True) as building:
            checkpoint.to_directory(str(building))
        if "://" not in self.storage:
            with contextlib.suppress(Exception):
                checkpoint.filesystem.delete_dir(checkpoint.path)
        self.line(f"saved encoder of {run_id}: {target}")

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.tick()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        run_id = _entry(trial).get("run_id")
        if str(run_id) in self.unwritable:
            self.trial_failed(_entry(trial)["run"], self.unwritable[str(run_id)])
            return
        self.trial_finished(run_id, trial.last_result or {})

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        """A failed trial Tune runs again (``--max-failures``): from its last resume checkpoint."""
        run_id = str(_entry(trial).get("run_id"))
        self.running = max(0, self.running - 1)
        self.live.pop(run_id, None)
        self.line(f"retrying {run_id}: {short_error(_trial_error_text(trial))}")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        reason = short_error(_trial_error_text(trial)).replace("harness.atomic.WriteError", "WriteError")
        reason = self.unwritable.get(str(_entry(trial).get("run_id")), reason)
        # a write that failed (a full disk) says all in its line: no pointer to Ray's error file
        trace = None if reason.startswith("WriteError: ") else trial.error_file
        self.trial_failed(_entry(trial)["run"], reason, trace)


class _StopUnwritable(tune.Stopper):
    """Stops a trial whose record the driver could not write (a full disk): its work would be lost."""

    def __init__(self, progress: _Progress) -> None:
        self.progress = progress

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return str(result.get("run_id")) in self.progress.unwritable

    def stop_all(self) -> bool:
        return False


def _experiment_path(trial: Any) -> str | None:
    """The grid's own folder in Tune's storage (as Tune's filesystem names it)."""
    with contextlib.suppress(Exception):
        return str(trial.storage.experiment_fs_path)
    return None


def _trial_error_text(trial: Any) -> str | None:
    """The trial's error text: Tune's stored copy, else the local error file it just wrote."""
    with contextlib.suppress(Exception):
        text = trial.get_error()
        if text:
            return str(text)
    path = getattr(trial, "error_file", None)
    if path:
        with contextlib.suppress(OSError):
            return Path(path).read_text(encoding="utf-8", errors="replace")
    return None


def _slots(cpus_per_trial: float, gpus_per_trial: float, custom: Mapping[str, float] | None = None) -> int:
    resources = ray.cluster_resources()
    by_cpu = int(resources.get("CPU", 1) // cpus_per_trial) if cpus_per_trial > 0 else 1_000_000
    by_gpu = int(resources.get("GPU", 0) // gpus_per_trial) if gpus_per_trial > 0 else 1_000_000
    by_custom = [int(resources.get(k, 0) // v) for k, v in (custom or {}).items() if v > 0]
    return max(1, min(by_cpu, by_gpu, *by_custom))


def _register_by_value(fn: Callable[..., Any]) -> None:
    """Ship a train function defined outside the installed packages (a test's) by value."""
    module = inspect.getmodule(fn)
    if module is None or module.__name__.split(".")[0] in ("harness", "methods"):
        return
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(module)


@dataclass(frozen=True)
class GridRequest:
    """How :func:`run_trials` was asked to run its trials (see its arguments)."""

    address: str | None
    gpus_per_trial: float | None
    cpus_per_trial: int
    smoke: bool
    train_fn: TrainFn | None
    storage_dir: Path | str | None
    log: Log
    save_model: bool
    name: str = "grid"
    estimates: Mapping[str, float] | None = None
    steps_shares: Mapping[str, float] | None = None
    tracking: Tracking | None = None
    max_failures: int = 0
    trial_resources: Mapping[str, float] | None = None

    def remote_storage(self) -> bool:
        """Whether Tune's storage is a pyarrow URI (``s3://``, ``gs://``, ...), not a folder."""
        return self.storage_dir is not None and "://" in str(self.storage_dir)

    def storage(self, store: RunStore) -> Path:
        """Tune's local folder: ``storage_dir``, default ``<store root>/tune`` (with a URI storage:
        ``<store root>/tune``, where the driver keeps a traceback of a grid Tune stopped)."""
        if self.storage_dir is not None and not self.remote_storage():
            return Path(self.storage_dir)
        return Path(store.root) / "tune"

    def storage_uri(self, store: RunStore) -> str:
        """Tune's ``storage_path``: the URI as given, else the local folder, absolute."""
        return str(self.storage_dir) if self.remote_storage() else str(self.storage(store).resolve())


def run_trials(
    configs: Sequence[RunConfig],
    data_root: Path,
    store: RunStore,
    *,
    address: str | None = None,
    gpus_per_trial: float | None = None,
    cpus_per_trial: int = 1,
    smoke: bool = False,
    train_fn: TrainFn | None = None,
    storage_dir: Path | str | None = None,
    log: Log = print_line,
    save_model: bool = False,
    name: str = "grid",
    estimates: Mapping[str, float] | None = None,
    steps_shares: Mapping[str, float] | None = None,
    tracking: Tracking | None = None,
    max_failures: int = 0,
    trial_resources: Mapping[str, float] | None = None,
) -> GridReport:
    """Run one Tune trial per config; records go into ``store`` (written by this driver alone).

    Args:
        configs: resolved configs (already deduplicated and filtered by the grid).
        data_root: data root handed to every trial (every node reads it at this path).
        store: the run store, on the driver's machine (the trials' records come back through Ray).
        address: Ray cluster address (``auto``, ``ray://host:10001``, ...); None = start Ray locally.
        gpus_per_trial: GPUs per trial (fractions allowed); None = 1 if Ray sees a GPU, else 0.
        cpus_per_trial: CPUs per trial; also the torch thread count inside the trial.
        smoke: start a small local Ray without GPUs (tests, CI); ``address`` is ignored.
        train_fn: the trial body (default :func:`default_train_fn`); tests pass a fast fake.
        storage_dir: Tune's storage (default ``<store root>/tune``): a folder or a pyarrow URI
            (``s3://...``, ``gs://...``); this grid's is ``<storage_dir>/<name>-<time>``. Resume
            checkpoints and saved encoders travel through it: on a cluster, a place every node reaches.
        log: where progress lines go.
        save_model: keep each run's best encoder under the store.
        name: the grid's name (its specs), for Tune's folder.
        estimates: the cost model's seconds per run, by run id (the progress lines' ETA).
        steps_shares: the share of each estimate that the run's steps take (the rest: final tasks).
        tracking: ``--track`` trackers (MLflow, Weights & Biases) beside Tune's own files.
        max_failures: Tune's retries of a failed trial (a lost node: resumed from its last checkpoint).
        trial_resources: custom Ray resources every trial asks for (e.g. ``{"worker_node": 1}``).

    Returns:
        A :class:`~harness.progress.GridReport` (counts, failures, and where the time went).

    Raises:
        GridInterrupted: Ctrl-C or SIGTERM (the runs left ``running`` are marked ``interrupted``).
        GridStopped: Ray Tune stopped with an error of its own (same marks; traceback saved).
        HarnessError: the grid's own checks (resources, address).
    """
    report = GridReport(total=len(configs))
    if not configs:
        return report
    request = GridRequest(
        address=address,
        gpus_per_trial=gpus_per_trial,
        cpus_per_trial=cpus_per_trial,
        smoke=smoke,
        train_fn=train_fn,
        storage_dir=storage_dir,
        log=log,
        save_model=save_model,
        name=name,
        estimates=estimates,
        steps_shares=steps_shares,
        tracking=tracking,
        max_failures=max_failures,
        trial_resources=dict(trial_resources or {}),
    )
    return _run_grid(configs, data_root, store, report, request)


def _run_grid(
    configs: Sequence[RunConfig], data_root: Path, store: RunStore, report: GridReport, request: GridRequest
) -> GridReport:
    """Check the request, open the Ray session, fit; whatever stops the grid marks what it left."""
    from harness.resources import check_resource_request

    check_resource_request(request.cpus_per_trial, request.gpus_per_trial)
    check_address(None if request.smoke else request.address)
    wall0 = time.perf_counter()
    try:
        session = ray_session(address=request.address, smoke=request.smoke, min_cpus=request.cpus_per_trial)
        with session as start_s:
            report.ray_start_s = start_s
            _fit(configs, data_root, store, report, request)
    except KeyboardInterrupt:
        # Ray is shut down by now (its workers are gone): what they left "running" was interrupted
        why = "interrupted (Ctrl-C or SIGTERM on the grid driver)"
        report.interrupted = mark_interrupted(store, configs, why)
        report.wall_s = time.perf_counter() - wall0
        raise GridInterrupted(report) from None
    except Exception as exc:  # the grid's own checks, or Ray Tune giving up (see the module notes)
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        free = free_bytes(request.storage(store))
        if free is not None and free < MIN_FREE_BYTES:  # Tune's own state files hit the full disk
            reason = f"no space left on the device of {request.storage(store)} (then {reason})"
        report.interrupted = mark_interrupted(store, configs, f"the grid stopped: {reason[:300]}")
        report.wall_s = time.perf_counter() - wall0
        if isinstance(exc, HarnessError):
            raise
        raise GridStopped(report, reason[:300], save_traceback(request.storage(store))) from exc
    report.wall_s = time.perf_counter() - wall0
    return report


def _check_fits_cluster(cpus_per_trial: int, gpus: float, custom: Mapping[str, float] | None = None) -> None:
    """A trial that asks for more than the cluster has would wait for ever: refuse it at once."""
    resources = ray.cluster_resources()
    for key, amount in (custom or {}).items():
        if amount > float(resources.get(key, 0)):
            raise ConfigError(
                f"--trial-resources {key}={amount:g} is more than the {float(resources.get(key, 0)):g} "
                f"the Ray cluster offers (a node offers it with `ray start --resources '{{\"{key}\": N}}'`); "
                "no trial could start"
            )
    have_cpu = float(resources.get("CPU", 0))
    have_gpu = float(resources.get("GPU", 0))
    if gpus > have_gpu:
        raise ConfigError(
            f"--gpus-per-trial {gpus:g} is more than the {have_gpu:g} GPU(s) Ray sees; no trial could start"
        )
    if cpus_per_trial > have_cpu:
        raise ConfigError(
            f"--cpus-per-trial {cpus_per_trial} is more than the {have_cpu:g} CPU(s) Ray sees; no trial "
            "could start"
        )


def _use_cluster_token() -> None:
    """Token auth as ``ray start --head`` sets it up: the driver sends the token when it has one.

    ``ray start`` writes ``~/.ray/auth_token`` and its cluster refuses drivers without it, but a
    driver only sends it with ``RAY_AUTH_MODE=token``. Set that (unless the user chose a mode) when a
    token is at hand: ``$RAY_AUTH_TOKEN``, ``$RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``.
    """
    if os.environ.get("RAY_AUTH_MODE"):
        return
    try:  # what ray.init does for address="auto" (it sets the mode and refreshes Ray's config)
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )

        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    except ImportError:  # another Ray version: the environment variable is the documented switch
        token_path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
        if os.environ.get("RAY_AUTH_TOKEN") or Path(token_path).is_file():
            os.environ["RAY_AUTH_MODE"] = "token"


def _connect_error(exc: BaseException) -> str:
    """One line for a failed ``ray.init(address=...)`` (the cause chain holds the real reason)."""
    texts = []
    while exc is not None:
        texts.append(str(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    joined = " ".join(texts)
    if "InvalidAuthToken" in joined or "Authentication" in joined:
        return (
            "the Ray cluster refused this driver's authentication token (token auth): put the cluster's "
            "token in ~/.ray/auth_token or $RAY_AUTH_TOKEN (see `ray get-auth-token`) and set "
            "RAY_AUTH_MODE=token"
        )
    first = next((t.strip().splitlines()[0] for t in texts if t.strip()), type(exc).__name__)
    return f"cannot connect to Ray: {first}"


def cluster_resources(address: str | None = None) -> dict[str, float]:
    """The CPUs, GPUs, ... of the Ray cluster at ``address`` (connects and disconnects)."""
    with ray_session(address=address):
        return {k: float(v) for k, v in ray.cluster_resources().items()}


def visit_nodes(
    address: str, fn: Callable[..., Any], *args: Any, timeout_s: float = 300.0
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Run ``fn(*args)`` once on every alive node of the cluster at ``address`` (a task pinned to the
    node, asking for no CPU); return the cluster's resources and, per node, its id, address, Ray
    resources and ``result`` (what ``fn`` returned) or ``error`` (one line: the node could not run it,
    e.g. the harness is not importable there)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    with ray_session(address=address):
        resources = {k: float(v) for k, v in ray.cluster_resources().items()}
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        task = ray.remote(num_cpus=0, max_retries=0)(fn)
        refs = [
            task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
            ).remote(*args)
            for n in nodes
        ]
        visits = []
        for node, ref in zip(nodes, refs):
            visit: dict[str, Any] = {
                "node_id": node["NodeID"],
                "ip": node.get("NodeManagerAddress", "?"),
                "resources": {k: float(v) for k, v in (node.get("Resources") or {}).items()},
            }
            try:
                visit["result"] = ray.get(ref, timeout=timeout_s)
            except Exception as exc:  # the task failed on that node: say why in one line
                visit["error"] = short_error(str(exc))
            visits.append(visit)
    return resources, visits


def check_address(address: str | None, timeout_s: float = 5.0) -> None:
    """Fail fast, with one line, on a Ray address that cannot work (before ``ray.init`` retries).

    ``ray://`` needs the ``ray[client]`` extra (not installed here); ``host:port`` must accept a TCP
    connection within ``timeout_s``. ``auto`` and ``None`` are left to Ray.
    """
    import importlib.util
    import socket

    if address is None or address in ("auto", "local"):
        return
    target = address
    if address.startswith("ray://"):
        if importlib.util.find_spec("grpc") is None:
            raise ConfigError(
                f"--address {address}: ray:// addresses need the ray[client] extra, which is not "
                "installed; run the grid on the cluster's head node with --address HOST:PORT (the GCS "
                "port, 6379 by default) or --address auto"
            )
        target = address[len("ray://") :]
    host, sep, port_text = target.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ConfigError(f"--address {address}: expected HOST:PORT (e.g. 127.0.0.1:6379), 'auto' or ray://")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConfigError(
            f"--address {address}: no Ray head reachable there ({exc.strerror or exc}); start one with "
            "`ray start --head` or check the address"
        ) from None


@contextlib.contextmanager
def ray_session(*, address: str | None = None, smoke: bool = False, min_cpus: int = 1) -> Iterator[float]:
    """Start (or connect to) Ray unless it already runs; yield the start-up seconds; shut down after.

    A session opened around several :func:`run_trials` calls (tests do this) pays Ray's start-up
    once: calls inside it reuse the running Ray and report a start-up time of 0.
    """
    if ray.is_initialized():
        yield 0.0
        return
    start = time.perf_counter()
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    temp_root: Path | None = None
    if smoke or address is None:
        # "local": always a fresh Ray of our own, even when a head runs on this machine or
        # RAY_ADDRESS is set (ray.init() would otherwise join that cluster and refuse num_cpus).
        kwargs["address"] = "local"
        kwargs["num_cpus"] = max(os.cpu_count() or 1, min_cpus)
        if smoke:
            kwargs["num_gpus"] = 0
            kwargs["object_store_memory"] = 80 * 1024 * 1024
        remove_stale_temp_dirs()
        temp_root = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
        kwargs["_temp_dir"] = str(temp_root)
    else:
        kwargs["address"] = address
        _use_cluster_token()
    try:
        try:
            with keep_sigterm_handler():  # ray.init replaces it with sys.exit; keep the caller's
                ray.init(**kwargs)
        except (ConnectionError, RuntimeError, TimeoutError) as exc:
            if address is None or smoke:
                raise HarnessError(f"cannot start a local Ray: {_connect_error(exc)}") from None
            raise ConfigError(f"--address {address}: {_connect_error(exc)}") from None
        yield time.perf_counter() - start
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        if temp_root is not None:
            shutil.rmtree(temp_root, ignore_errors=True)


@contextlib.contextmanager
def _quiet_tune_logs() -> Iterator[None]:
    """Trial tracebacks go to the trials' error files, not to the driver's terminal."""
    loggers = [logging.getLogger(n) for n in ("ray.tune", "ray.train", "ray.air")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def trial_memory(configs: Sequence[RunConfig], gpus_per_trial: float, budget: float | None) -> dict[str, int]:
    """Host memory each run asks Ray for, by run id (CPU trials only; at most ``budget``, the largest
    node's ``memory`` resource, so that a run larger than any node still starts, alone)."""
    from harness.memory import estimate_bytes

    if gpus_per_trial > 0:
        return {}
    need = {c.run_id(): estimate_bytes(c, "cpu") for c in configs}
    if budget:
        need = {k: min(v, int(budget)) for k, v in need.items()}
    return need


def _node_memory() -> float | None:
    """Ray's ``memory`` resource of its largest live node (a trial runs on one node), else None."""
    with contextlib.suppress(Exception):
        sizes = [float(n.get("Resources", {}).get("memory", 0.0)) for n in ray.nodes() if n.get("Alive")]
        if sizes:
            return max(sizes) or None
    return float(ray.cluster_resources().get("memory", 0.0)) or None


def _resources_fn(
    configs: Sequence[RunConfig],
    cpus_per_trial: int,
    gpus: float,
    slots: int,
    log: Log,
    custom: Mapping[str, float] | None = None,
) -> Callable[[dict[str, Any]], Any]:
    """Tune's per-trial resource request: CPUs, GPUs, (CPU trials) the run's host memory, and the
    custom resources asked for (``--trial-resources``: trials only go to nodes that offer them)."""
    from ray.tune.execution.placement_groups import resource_dict_to_pg_factory

    budget = _node_memory()
    need = trial_memory(configs, gpus, budget)
    if need and budget:
        most = max(need.values())
        together = int(budget // most) if most else len(configs)
        if together < slots:
            log(
                f"memory: the largest run needs about {most / 2**30:.1f} GB of a node's "
                f"{budget / 2**30:.1f} GB, so at most {max(1, together)} such run(s) at once "
                "(Ray schedules by memory too)"
            )

    def resources(tune_config: dict[str, Any]) -> Any:
        run_id = str((tune_config.get("run_entry") or {}).get("run_id"))
        spec: dict[str, float] = {**(custom or {}), "cpu": cpus_per_trial, "gpu": gpus}
        if run_id in need:
            spec["memory"] = float(need[run_id])
        return resource_dict_to_pg_factory(spec)

    return resources


def _fit(
    configs: Sequence[RunConfig], data_root: Path, store: RunStore, report: GridReport, request: GridRequest
) -> None:
    """Build the Tuner, run it, read the results back into ``report``."""
    gpus = (
        float(request.gpus_per_trial)
        if request.gpus_per_trial is not None
        else (1.0 if ray.cluster_resources().get("GPU", 0) >= 1 and not request.smoke else 0.0)
    )
    custom = dict(request.trial_resources or {})
    _check_fits_cluster(request.cpus_per_trial, gpus, custom)
    report.slots = _slots(request.cpus_per_trial, gpus, custom)
    spec = TrialSpec(
        train_fn=request.train_fn or default_train_fn,
        data_root=Path(data_root).resolve(),
        store_root=Path(store.root).resolve(),
        device="cuda" if gpus > 0 else "cpu",
        num_threads=int(request.cpus_per_trial),
        save_model=request.save_model,
        driver_node=ray.get_runtime_context().get_node_id(),
    )
    _register_by_value(spec.train_fn)
    trainable = tune.with_resources(
        tune.with_parameters(_trial_body, spec=spec),
        _resources_fn(configs, request.cpus_per_trial, gpus, report.slots, request.log, custom),
    )
    progress = _Progress(
        len(configs), store, request.log, request.estimates, report.slots, steps_shares=request.steps_shares
    )
    progress.storage = request.storage_uri(store)
    progress.unwritable = {}
    if not request.remote_storage():
        request.storage(store).mkdir(parents=True, exist_ok=True)
    _warn_local_storage(request, store)
    name = f"{request.name}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"
    report.tune_dir = None if request.remote_storage() else request.storage(store).resolve() / name
    report.watch = request.tracking.lines() if request.tracking else []
    for line in report.where_lines():
        request.log(line)
    callbacks = [progress, *_tracker_callbacks(request.tracking, request.name)]
    run_config = tune.RunConfig(
        name=name,
        storage_path=progress.storage,
        verbose=0,
        failure_config=tune.FailureConfig(max_failures=request.max_failures, fail_fast=False),
        callbacks=callbacks,
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),  # the last resume checkpoint only
        stop=_StopUnwritable(progress),
    )
    tuner = _tuner(trainable, configs, report.slots, run_config, _earlier_checkpoints(store, configs))
    fit0 = time.perf_counter()
    with _quiet_tune_logs():
        results = tuner.fit()
    report.fit_s = time.perf_counter() - fit0
    _collect(results, store, progress, report)


def _earlier_checkpoints(store: RunStore, configs: Sequence[RunConfig]) -> dict[str, dict[str, Any]]:
    """The last resume checkpoint an earlier grid noted for each run (see :mod:`harness.relay`)."""
    from harness.relay import earlier_checkpoint

    notes = {c.run_id(): earlier_checkpoint(store.root, c.run_id()) for c in configs}
    return {run_id: note for run_id, note in notes.items() if note is not None}


def _warn_local_storage(request: GridRequest, store: RunStore) -> None:
    """On a cluster of several nodes, a local storage folder reaches only this node: say what that
    costs (Ray refuses checkpoints from the other nodes; records still come back)."""
    if request.smoke or request.address is None or request.storage_dir is not None:
        return  # a local grid, or a storage the user chose (a shared mount or a URI)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) > 1:
        request.log(
            f"note: {len(nodes)} Ray nodes and Tune's storage is this machine's {request.storage(store)}: "
            "trials on other nodes keep no resume checkpoint and --save-model needs --storage on "
            "shared storage or a URI (s3://, gs://) every node reaches; records come back either way"
        )


def _tuner(
    trainable: Any,
    configs: Sequence[RunConfig],
    slots: int,
    run_config: tune.RunConfig,
    earlier: Mapping[str, Mapping[str, Any]],
) -> tune.Tuner:
    """One trial per run (its RunConfig object itself is the trial's config, with the resume
    checkpoint an earlier grid left), ``slots`` at a time."""
    entries = [{"run": c, "run_id": c.run_id(), "resume_from": earlier.get(c.run_id())} for c in configs]
    return tune.Tuner(
        trainable,
        param_space={"run_entry": tune.grid_search(entries)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=slots,
            reuse_actors=True,  # one worker process per slot: torch and the harness import once
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=run_config,
    )


def _collect(results: Any, store: RunStore, progress: _Progress, report: GridReport) -> None:
    """Read the ResultGrid back: work time, finished count; a failed record for any errored trial."""
    failed = dict(progress.failed)
    for result in results:
        entry = (result.config or {}).get("run_entry") or {}
        run_id = str(entry.get("run_id"))
        metrics = result.metrics or {}
        if isinstance(metrics.get("work_s"), int | float):
            report.work_s += float(metrics["work_s"])
        if result.error is not None:
            if run_id not in failed and entry.get("run"):
                reason = short_error(str(result.error))
                ensure_failed_record(store, entry["run"], reason)
                failed[run_id] = str((store.load(run_id) or {}).get("error") or reason)
            continue
        record = store.load(run_id) or {}
        if record.get("status") == "finished":
            report.finished += 1
        elif run_id not in failed:
            failed[run_id] = str(record.get("error") or "trial ended without a finished record")
    report.failed = sorted(failed.items())


def _tracker_callbacks(tracking: Tracking | None, grid_name: str) -> list[Any]:
    """Ray's own MLflow / Weights & Biases logger callbacks for ``--track`` (packages checked before)."""
    if tracking is None:
        return []
    callbacks: list[Any] = []
    if "mlflow" in tracking.trackers:
        tracking.runs_root.mkdir(parents=True, exist_ok=True)
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # not its database set-up notes
        mlflow_callback = _mlflow_callback_class()
        callbacks.append(
            mlflow_callback(tracking_uri=tracking.mlflow_uri(), experiment_name=f"harness-{grid_name}")
        )
    if "wandb" in tracking.trackers:
        from ray.air.integrations.wandb import WandbLoggerCallback

        tracking.wandb_dir().mkdir(parents=True, exist_ok=True)
        mode = tracking.wandb_mode()
        os.environ.setdefault("WANDB_MODE", mode)  # Ray's callback asks for a key unless offline
        callbacks.append(
            WandbLoggerCallback(
                project="cse-harness", group=grid_name, dir=str(tracking.wandb_dir()), mode=mode
            )
        )
    return callbacks


def _run_params(trial: Any) -> dict[str, Any]:
    """A trial's parameters as a tracker shows them: the run id and its config's fields."""
    entry = _entry(trial)
    run = entry.get("run")
    fields = run.to_dict() if run is not None else {}
    return {"run_id": entry.get("run_id"), **fields}


def _mlflow_callback_class() -> type:
    """Defined on demand: Ray's MLflow module imports ``mlflow`` (seconds) as it loads."""
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    class MLflowCallback(MLflowLoggerCallback):
        """Ray's MLflow callback, with each run's config fields as its parameters (Tune's trial
        config holds the RunConfig object itself, which MLflow would log as one long string)."""

        def log_trial_start(self, trial: Any) -> None:
            if trial not in self._trial_runs:
                tags = {**(self.tags or {}), "trial_name": str(trial)}
                run = self.mlflow_util.start_run(tags=tags, run_name=str(_entry(trial).get("run_id")))
                self._trial_runs[trial] = run.info.run_id
                self.mlflow_util.log_params(run_id=self._trial_runs[trial], params_to_log=_run_params(trial))

    return MLflowCallback
