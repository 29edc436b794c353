"""The driver side: one grid's trials through Ray Tune, records written as they come back."""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray import tune

from harness.atomic import FULL_DISK_BYTES, free_bytes
from harness.errors import HarnessError
from harness.grid.capacity import CapacityWatch
from harness.grid.lock import release_held_locks
from harness.grid.options import ClusterOptions, GridRequest, decide_trial_gpus
from harness.grid.progress.report import (
    CapacityLost,
    GridInterrupted,
    GridReport,
    GridStopped,
    Log,
    print_line,
    save_traceback,
)
from harness.grid.progress.tracking import environment_kept
from harness.grid.relay import earlier_checkpoint
from harness.grid.slots import SlotBoard
from harness.grid.tune.callbacks import (
    GridStopper,
    TuneProgress,
    alive_nodes,
    logger_callbacks,
    tracker_callbacks,
    trial_name,
)
from harness.grid.tune.cluster import (
    check_address,
    check_fits_cluster,
    quiet_tune_logs,
    ray_session,
    resources_fn,
    trial_slots,
)
from harness.grid.tune.head_watch import watching_head
from harness.grid.tune.trial import TrialSpec, default_train_fn, trial_body
from harness.run.checkpoint import every_from_env
from harness.store.bookkeeping import (
    ensure_failed_record,
    ensure_interrupted_record,
    mark_interrupted,
    short_error,
)
from harness.store.run_store import RunStore

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig


def _register_by_value(fn: Callable[..., Any]) -> None:
    """Ship a train function defined outside the installed packages (a test's) by value."""
    module = inspect.getmodule(fn)
    if module is None or module.__name__.split(".")[0] in ("harness", "methods"):
        return
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(module)


def run_trials(
    configs: Sequence[RunConfig],
    data_root: Path,
    store: RunStore,
    request: GridRequest | None = None,
) -> GridReport:
    """Run one Tune trial per config; records go into ``store`` (written by this driver alone).

    Args:
        configs: resolved configs (already deduplicated and filtered by the grid).
        data_root: data root handed to every trial (every node reads it at this path).
        store: the run store, on the driver's machine (the trials' records come back through Ray).
        request: where the trials run and how (:class:`~harness.grid.options.GridRequest`; default:
            a local Ray, one CPU per trial, the real trial body). Tune's storage (``cluster.storage``,
            default ``<store root>/tune``) holds this grid's folder ``<name>-<time>``; resume
            checkpoints and saved encoders travel through it, so on a cluster it is a place every
            node reaches.

    Returns:
        A :class:`~harness.grid.progress.report.GridReport` (counts, failures, and where the time went).

    Raises:
        GridInterrupted: Ctrl-C or SIGTERM (the runs left ``running`` are marked ``interrupted``).
        GridStopped: Ray Tune stopped with an error of its own (same marks; traceback saved).
        HarnessError: the grid's own checks (resources, address).
    """
    report = GridReport(total=len(configs))
    if not configs:
        return report
    return _run_grid(configs, data_root, store, report, request or GridRequest())


INTERRUPTED = "interrupted (Ctrl-C or SIGTERM on the grid driver)"
"""The reason an interrupted grid's runs are marked with."""


class _Stalled(Exception):
    """Inside the driver: the waiting runs had no node for the stated wait (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _run_grid(
    configs: Sequence[RunConfig], data_root: Path, store: RunStore, report: GridReport, request: GridRequest
) -> GridReport:
    """Check the request, open the Ray session, fit; whatever stops the grid marks what it left."""
    cluster = request.cluster
    if not request.address_checked:  # the grid's own check (launch.check_cluster) is trusted
        check_address(None if cluster.smoke else cluster.address)
    wall0 = time.perf_counter()
    try:
        session = ray_session(address=cluster.address, smoke=cluster.smoke)
        with session as start_s:
            report.ray_start_s = start_s
            # the address this driver reached the head at (the head's own may name another interface)
            given = (
                cluster.address if cluster.address and ":" in cluster.address and not cluster.smoke else None
            )
            head = given.removeprefix("ray://") if given else ray.get_runtime_context().gcs_address
            with watching_head(
                head,
                lambda reason: _head_lost(store, configs, reason),
                wait_s=cluster.lost_node_wait,
                say=request.log or print_line,
                on_signal=lambda _signum: _interrupted_without_head(store, configs, head),
            ):
                _fit(configs, data_root, store, report, request)
    except _Stalled as stalled:  # lost capacity: every run not done is interrupted, none failed
        report.interrupted = mark_interrupted(store, configs, stalled.reason)
        for config in configs:  # those Tune had not started yet get a record saying so
            marked = ensure_interrupted_record(store, config, stalled.reason)
            if marked and config.run_id() not in report.interrupted:
                report.interrupted.append(config.run_id())
        report.wall_s = time.perf_counter() - wall0
        runs = ", ".join(report.interrupted) or "none"
        raise CapacityLost(report, f"{stalled.reason}: run(s) marked interrupted: {runs}") from None
    except KeyboardInterrupt:
        # Ray is shut down by now (its workers are gone): what they left "running" was interrupted
        report.interrupted = mark_interrupted(store, configs, INTERRUPTED)
        report.wall_s = time.perf_counter() - wall0
        raise GridInterrupted(report) from None
    except Exception as exc:  # the grid's own checks, or Ray Tune giving up (see the module notes)
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        folder = cluster.storage_folder(store.root)
        free = free_bytes(folder)
        if free is not None and free < FULL_DISK_BYTES:  # Tune's own state files hit the full disk
            reason = f"no space left on the device of {folder} (then {reason})"
        report.interrupted = mark_interrupted(store, configs, f"the grid stopped: {reason[:300]}")
        report.wall_s = time.perf_counter() - wall0
        if isinstance(exc, HarnessError):
            raise
        raise GridStopped(report, reason[:300], save_traceback(folder)) from exc
    report.wall_s = time.perf_counter() - wall0
    return report


def _fit(
    configs: Sequence[RunConfig], data_root: Path, store: RunStore, report: GridReport, request: GridRequest
) -> None:
    """Build the Tuner, run it, read the results back into ``report``."""
    cluster = request.cluster
    log = request.log or print_line
    gpus = request.trial_gpus
    if gpus is None:  # not decided by a grid (the Python API): the same rule, on the Ray joined
        gpus = decide_trial_gpus(cluster, float(ray.cluster_resources().get("GPU", 0)))
    custom = dict(cluster.trial_resources)
    check_fits_cluster(cluster.cpus, gpus, custom, local=cluster.smoke or cluster.address is None)
    report.slots = trial_slots(cluster.cpus, gpus, custom)
    name = f"{request.name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
    board = SlotBoard.for_grid(f"{name}-{os.getpid()}") if gpus == 0 else None
    spec = TrialSpec(
        train_fn=request.train_fn or default_train_fn,
        data_root=Path(data_root).resolve(),
        store_root=Path(store.root).resolve(),
        device="cuda" if gpus > 0 else "cpu",
        num_threads=cluster.cpus,
        save_model=request.save_model,
        driver_node=ray.get_runtime_context().get_node_id(),
        compile=request.compile,
        slot_board=str(board.path) if board is not None else None,
        checkpoint_every_s=every_from_env()
        if request.checkpoint_every_s is None
        else request.checkpoint_every_s,
    )
    _register_by_value(spec.train_fn)
    trainable = tune.with_resources(
        tune.with_parameters(trial_body, spec=spec),
        resources_fn(configs, cluster.cpus, gpus, report.slots, log, custom),
    )
    progress = TuneProgress(
        len(configs), store, log, request.estimates, report.slots, steps_shares=request.steps_shares
    )
    progress.storage = cluster.storage_uri(store.root)
    progress.unwritable = {}
    progress.capacity = CapacityWatch(cluster.lost_node_wait)
    progress.capacity.observe(alive_nodes(), {})  # the nodes at the start: a later loss is named
    progress.board = board
    if board is not None:
        board.set_pending(len(configs))
    if not cluster.remote_storage():
        cluster.storage_folder(store.root).mkdir(parents=True, exist_ok=True)
    _warn_local_storage(cluster, store, log)
    report.tune_dir = (
        None if cluster.remote_storage() else cluster.storage_folder(store.root).resolve() / name
    )
    report.watch = request.tracking.lines() if request.tracking else []
    for line in report.where_lines():
        log(line)
    callbacks = [progress, *logger_callbacks(), *tracker_callbacks(request.tracking, request.name)]
    run_config = tune.RunConfig(
        name=name,
        storage_path=progress.storage,
        verbose=0,
        failure_config=tune.FailureConfig(max_failures=cluster.max_failures, fail_fast=False),
        callbacks=callbacks,
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),  # the last resume checkpoint only
        stop=GridStopper(progress),
    )
    tuner = _tuner(trainable, configs, report.slots, run_config, _earlier_checkpoints(store, configs))
    fit0 = time.perf_counter()
    try:
        with quiet_tune_logs(), environment_kept():  # a second grid of this process logs where it says
            results = tuner.fit()
    finally:
        if board is not None:
            board.remove()
    report.fit_s = time.perf_counter() - fit0
    if progress.capacity_stop is not None:
        raise _Stalled(progress.capacity_stop)
    _collect(results, store, progress, report)


def _head_lost(store: RunStore, configs: Sequence[RunConfig], reason: str) -> None:
    """The Ray head is gone or has not answered for ``--lost-node-wait`` (in
    :class:`~harness.grid.tune.head_watch.HeadWatch`'s thread): mark what runs ``interrupted``,
    release the grid lock, say so in one line and end the process now (Ray would end it later
    without a word of the harness, or block it for as long as the head is stopped)."""
    try:
        marked = mark_interrupted(store, configs, reason)
        release_held_locks()
        which = f" ({', '.join(marked)})" if marked else ""
        print(
            f"harness grid: error: {reason}; {len(marked)} run(s) it left running are marked interrupted"
            f"{which}, finished runs are kept and the grid lock is released: start the cluster again "
            "and the same command resumes the grid",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
    finally:
        os._exit(1)


def _interrupted_without_head(store: RunStore, configs: Sequence[RunConfig], head: str) -> None:
    """Ctrl-C or SIGTERM while the Ray head does not answer (in the head watch's thread: the main
    thread is blocked in Ray): the grid's interrupted path, without waiting for Ray; exit 130."""
    try:
        marked = mark_interrupted(store, configs, INTERRUPTED)
        release_held_locks()
        which = f" ({', '.join(marked)})" if marked else ""
        print(
            f"grid interrupted while the Ray head at {head} did not answer: {len(marked)} run(s) it left "
            f"running are marked interrupted{which} (the next grid runs them again), finished runs are kept "
            "and the grid lock is released",
            file=sys.stderr,
        )
        print("harness grid: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
    finally:
        os._exit(130)


def _earlier_checkpoints(store: RunStore, configs: Sequence[RunConfig]) -> dict[str, dict[str, Any]]:
    """The last resume checkpoint an earlier grid noted for each run (see :mod:`harness.grid.relay`)."""

    notes = {c.run_id(): earlier_checkpoint(store.root, c.run_id()) for c in configs}
    return {run_id: note for run_id, note in notes.items() if note is not None}


def _warn_local_storage(cluster: ClusterOptions, store: RunStore, log: Log) -> None:
    """On a cluster of several nodes, a local storage folder reaches only this node: say what that
    costs (Ray refuses checkpoints from the other nodes; records still come back)."""
    if cluster.smoke or cluster.address is None or cluster.storage is not None:
        return  # a local grid, or a storage the user chose (a shared mount or a URI)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) > 1:
        log(
            f"note: {len(nodes)} Ray nodes and Tune's storage is this machine's "
            f"{cluster.storage_folder(store.root)}: "
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
            trial_name_creator=trial_name,
            trial_dirname_creator=trial_name,
        ),
        run_config=run_config,
    )


def _collect(results: Any, store: RunStore, progress: TuneProgress, report: GridReport) -> None:
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
