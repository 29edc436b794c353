"""The trial side: what runs inside one Ray Tune trial (the train function, its relay store, checkpoints)."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray import tune

from harness.atomic import write_json
from harness.grid.cleanup import TRIAL_PREFIX, remove_stale_trial_dirs
from harness.grid.progress.tracking import final_keys, final_metrics
from harness.grid.relay import decode_record, encode_record, storage_filesystem
from harness.grid.slots import SlotBoard
from harness.run.checkpoint import DEFAULT_EVERY_S, checkpoint_every
from harness.run.process_memory import release_freed
from harness.run.training import train_run
from harness.store.bookkeeping import ensure_failed_record
from harness.store.run_store import RunStore

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig


TrainFn = Callable[..., Mapping[str, Any]]
"""``train_fn(config, data_root, store, *, device, num_threads, **extra) -> record`` (default:
train_run); ``extra`` may hold ``save_checkpoint``, ``compile`` and ``final_threads``."""


def default_train_fn(
    config: RunConfig,
    data_root: Path,
    store: RunStore,
    *,
    device: str,
    num_threads: int,
    save_checkpoint: bool = False,
    compile: bool | None = None,
    final_threads: Callable[[], int] | None = None,
) -> Mapping[str, Any]:
    """The real trial body: :func:`harness.run.training.train_run`, silent, writing into ``store`` (the
    trial's relay), reporting each evaluation point and resume checkpoint to Tune."""

    relay = store if isinstance(store, TrialStore) else None
    return train_run(
        config,
        data_root,
        store,
        device=device,
        num_threads=num_threads,
        log=None,
        save_checkpoint=save_checkpoint,
        compile=compile,
        final_threads=final_threads,
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
    "resumed_from_step",
)
"""What a trial reports to Tune at each evaluation point (besides run id, status and work seconds);
``resumed_from_step`` only with the point a resumed run starts from."""


REPORT_KEYS: tuple[str, ...] = (
    "run_id",
    "status",
    *LIVE_KEYS,
    "work_s",
    "record",
    "resume_step",
    "model",
    *final_keys(),
)
"""Every report of a trial has these keys (Tune's CSV keeps the first report's columns); ``record``
is the run record's JSON text when it changed since the last report (for the driver: no logger gets
it), ``resume_step`` marks a report that carries a resume checkpoint, ``model`` one that carries the
saved encoder, and ``final/<group>/<task>`` the final scores, in the last report of a finished run."""


@dataclass(frozen=True)
class TrialSpec:
    """What every trial of a grid gets besides its run (one frozen value, shipped by Ray).

    Attributes:
        train_fn: the trial body (:func:`default_train_fn`, or a test's fake).
        data_root: the data root (absolute; every node reads it at this path).
        store_root: the driver's run store folder: only a trial on the driver's node uses it (it
            shares the driver's step-0 dev evaluation cache); records go back through Ray.
        device: ``cuda`` or ``cpu``.
        num_threads: torch threads of the trial (its CPUs).
        save_model: keep the run's best encoder (it travels through Tune's storage to the driver).
        driver_node: the Ray node id of the driver (None: the trial runs beside the driver).
        compile: compile the training forward (None: where it helps, on a GPU).
        slot_board: the grid's :class:`~harness.grid.slots.SlotBoard` folder on each node (a CPU
            grid's; None: no threads handed to the last runs).
        checkpoint_every_s: the least seconds between two resume checkpoints, as the driver read
            them (``$HARNESS_CHECKPOINT_EVERY_S``; a node's own environment is not read).
    """

    train_fn: TrainFn
    data_root: Path
    store_root: Path
    device: str
    num_threads: int
    save_model: bool = False
    driver_node: str | None = None
    compile: bool | None = None
    slot_board: str | None = None
    checkpoint_every_s: float = DEFAULT_EVERY_S

    def cache_root(self) -> Path:
        """Where this node's trials share their step-0 dev evaluation cache: the driver's runs
        folder on the driver's node, else a folder of this node's own."""
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
        first = self.last is None
        self.last = decode_record(encode_record(record))  # a copy, as the store would read it back
        self.pending = True
        if first:  # the run has started: the driver's store says so at once
            self.report()
        return self.path(str(record.get("run_id")))

    def load(self, run_id: str) -> dict[str, Any] | None:
        return dict(self.last) if self.last is not None and self.last.get("run_id") == run_id else None

    def report(self, fields: Mapping[str, Any] | None = None, checkpoint: Any = None) -> None:
        """One Tune report with every key of :data:`REPORT_KEYS` (the record, if it changed)."""

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
        hold_while_told()


HOLD_ENV = "HARNESS_TEST_HOLD"
"""A test hook: while the file this names exists, a trial waits after each resume checkpoint it
reported, so the cluster tests lose a node or the head while a run is known to be at that step."""


def hold_while_told() -> None:
    """Wait while the file named by ``$HARNESS_TEST_HOLD`` exists (unset: return at once)."""
    hold = os.environ.get(HOLD_ENV)
    while hold and os.path.exists(hold):
        time.sleep(0.2)


def trial_body(tune_config: dict[str, Any], *, spec: TrialSpec) -> None:
    """One Tune trial: resume from its last checkpoint, train the run it was given, report; record
    any failure. Everything the driver keeps travels in the reports (see :class:`TrialStore`)."""

    entry = tune_config["run_entry"]
    config: RunConfig = entry["run"]  # validated by the grid: trusted as it is
    remove_stale_trial_dirs()
    root = Path(tempfile.mkdtemp(prefix=f"{TRIAL_PREFIX}{os.getpid()}-"))
    store = TrialStore(root, spec.cache_root(), config.run_id())
    board = SlotBoard(Path(spec.slot_board)) if spec.slot_board else None
    try:
        _restore_checkpoint(store, entry.get("resume_from"))
        try:
            extra: dict[str, Any] = {"save_checkpoint": True} if spec.save_model else {}
            if spec.compile is not None:
                extra["compile"] = spec.compile
            with (
                board.joined() if board is not None else contextlib.nullcontext(),
                checkpoint_every(spec.checkpoint_every_s),
            ):
                if board is not None:
                    extra["final_threads"] = functools.partial(board.threads, spec.num_threads)
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
        final = {"best_stsb_dev": record.get("best_stsb_dev"), **final_metrics(record)}
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
    """Put the run's last resume checkpoint where :func:`~harness.run.training.train_run` finds it: Tune's
    (this trial restarted after a failure, maybe on another node), else an earlier grid's."""

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
