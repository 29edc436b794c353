"""The Ray Tune adapter: the ONLY module of the harness that imports ``ray``.

:func:`run_trials` runs one Tune trial per resolved :class:`~harness.config.RunConfig`. Each trial is
a function trainable that calls :func:`harness.train.train_run`, which writes the run record into the
harness's own run store (``runs/records/<run_id>.json``), the only thing tables read.

* Live curves: the real trial body reports every evaluation point through Tune (step, loss, STS-B
  dev, alignment, uniformity, elapsed), then once more at its end (status, best STS-B dev, work
  seconds). Tune's own folder of a grid, ``<runs>/tune/<grid name>-<time>/`` (TensorBoard event
  files, ``progress.csv`` and ``result.json`` per run, error files of failed trials), is kept:
  ``tensorboard --logdir`` on it shows every run's curves while the grid runs. ``--track mlflow`` /
  ``wandb`` add Ray's own MLflow and Weights & Biases callbacks (:mod:`harness.tracking`).
* Ray starts locally with every CPU and GPU it sees, or connects to ``address`` (an existing
  cluster; records then need storage every node shares). ``smoke=True`` starts a small local Ray
  (no GPUs) for tests and CI.
* Resources per trial: ``cpus_per_trial`` CPUs (also the trial's torch thread count) and
  ``gpus_per_trial`` GPUs (fractions share a GPU between small trials; default 1 when Ray sees a
  GPU, else 0).
* A failing trial does not stop the others (``max_failures=0``, ``fail_fast=False``). ``train_run``
  records its own failures; a trial that dies before or outside it (an import error, a worker
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
* Each trial gets one frozen :class:`TrialSpec` (data root, store root, device, threads, the train
  function) and its :class:`~harness.config.RunConfig` itself, already validated by the grid.
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

from harness.atomic import MIN_FREE_BYTES, free_bytes
from harness.bookkeeping import ensure_failed_record, mark_interrupted, short_error
from harness.cleanup import TEMP_PREFIX, remove_stale_temp_dirs
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
    from harness.store import RunStore

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
    """The real trial body: :func:`harness.train.train_run`, silent, writing into ``store``, reporting
    each evaluation point to Tune."""
    from harness.train import train_run

    start = time.perf_counter()
    run_id = config.run_id()

    def report_point(point: Mapping[str, Any]) -> None:
        # every report has the same keys (Tune's CSV keeps the first report's columns); a missing
        # value (no loss at step 0) is None, which the loggers skip
        live = {key: point.get(key) for key in LIVE_KEYS}
        tune.report({"run_id": run_id, "status": "running", **live, "work_s": time.perf_counter() - start})

    return train_run(
        config,
        data_root,
        store,
        device=device,
        num_threads=num_threads,
        log=None,
        save_checkpoint=save_checkpoint,
        on_point=report_point,
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


@dataclass(frozen=True)
class TrialSpec:
    """What every trial of a grid gets besides its run (one frozen value, shipped by Ray).

    Attributes:
        train_fn: the trial body (:func:`default_train_fn`, or a test's fake).
        data_root: the data root (absolute; every node must read it).
        store_root: the run store's folder (absolute; every node must see the same one).
        device: ``cuda`` or ``cpu``.
        num_threads: torch threads of the trial (its CPUs).
        save_model: keep the run's best encoder under the store (``harness export``).
    """

    train_fn: TrainFn
    data_root: Path
    store_root: Path
    device: str
    num_threads: int
    save_model: bool = False


def _trial_body(tune_config: dict[str, Any], *, spec: TrialSpec) -> None:
    """One Tune trial: train the run it was given, report; record any failure."""
    from harness.memory import release_freed
    from harness.store import RunStore

    config: RunConfig = tune_config["run_entry"]["run"]  # validated by the grid: trusted as it is
    store = RunStore(spec.store_root)
    start = time.perf_counter()
    try:
        extra: dict[str, Any] = {"save_checkpoint": True} if spec.save_model else {}
        record = spec.train_fn(
            config, spec.data_root, store, device=spec.device, num_threads=spec.num_threads, **extra
        )
    except BaseException as exc:
        ensure_failed_record(store, config, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        release_freed()
    tune.report(
        {
            "run_id": config.run_id(),
            "status": str(record.get("status")),
            "best_stsb_dev": record.get("best_stsb_dev"),
            "work_s": time.perf_counter() - start,
        }
    )


def _trial_name(trial: Any) -> str:
    """Short trial names (Tune's default puts the whole config into the folder name)."""
    return f"{_entry(trial).get('run_id', 'trial')}_{trial.trial_id}"


def _entry(trial: Any) -> dict[str, Any]:
    """The ``{"run": RunConfig, "run_id": id}`` entry a trial was given."""
    return dict((trial.config or {}).get("run_entry") or {})


class _Progress(GridProgress, tune.Callback):
    """Tune's callbacks feeding :class:`~harness.progress.GridProgress` (its lines and failed records).

    Tune pickles its callbacks with the experiment state. The log sink is a driver-side object (the
    ``print`` builtin may even have been replaced since it was captured), so it is left out of the
    pickled state and falls back to :func:`~harness.progress.print_line` if the callback is ever
    restored.
    """

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["log"] = print_line
        return state

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.trial_started(_entry(trial).get("run_id"))

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.trial_result(_entry(trial).get("run_id"), result)

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.tick()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.trial_finished(_entry(trial).get("run_id"), trial.last_result or {})

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        reason = short_error(_trial_error_text(trial)).replace("harness.atomic.WriteError", "WriteError")
        # a write that failed (a full disk) says all in its line: no pointer to Ray's error file
        trace = None if reason.startswith("WriteError: ") else trial.error_file
        self.trial_failed(_entry(trial)["run"], reason, trace)


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


def _slots(cpus_per_trial: float, gpus_per_trial: float) -> int:
    resources = ray.cluster_resources()
    by_cpu = int(resources.get("CPU", 1) // cpus_per_trial) if cpus_per_trial > 0 else 1_000_000
    by_gpu = int(resources.get("GPU", 0) // gpus_per_trial) if gpus_per_trial > 0 else 1_000_000
    return max(1, min(by_cpu, by_gpu))


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
    storage_dir: Path | None
    log: Log
    save_model: bool
    name: str = "grid"
    estimates: Mapping[str, float] | None = None
    steps_shares: Mapping[str, float] | None = None
    tracking: Tracking | None = None

    def storage(self, store: RunStore) -> Path:
        """Tune's folder: ``storage_dir``, default ``<store root>/tune``."""
        return Path(self.storage_dir) if self.storage_dir is not None else Path(store.root) / "tune"


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
    storage_dir: Path | None = None,
    log: Log = print_line,
    save_model: bool = False,
    name: str = "grid",
    estimates: Mapping[str, float] | None = None,
    steps_shares: Mapping[str, float] | None = None,
    tracking: Tracking | None = None,
) -> GridReport:
    """Run one Tune trial per config; records go into ``store``.

    Args:
        configs: resolved configs (already deduplicated and filtered by the grid).
        data_root: data root handed to every trial (must be readable on every node).
        store: the run store (every node must see the same folder when ``address`` is a cluster).
        address: Ray cluster address (``auto``, ``ray://host:10001``, ...); None = start Ray locally.
        gpus_per_trial: GPUs per trial (fractions allowed); None = 1 if Ray sees a GPU, else 0.
        cpus_per_trial: CPUs per trial; also the torch thread count inside the trial.
        smoke: start a small local Ray without GPUs (tests, CI); ``address`` is ignored.
        train_fn: the trial body (default :func:`default_train_fn`); tests pass a fast fake.
        storage_dir: Tune's folder (default ``<store root>/tune``); this grid's is
            ``<storage_dir>/<name>-<time>``.
        log: where progress lines go.
        save_model: keep each run's best encoder under the store.
        name: the grid's name (its specs), for Tune's folder.
        estimates: the cost model's seconds per run, by run id (the progress lines' ETA).
        steps_shares: the share of each estimate that the run's steps take (the rest: final tasks).
        tracking: ``--track`` trackers (MLflow, Weights & Biases) beside Tune's own files.

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


def _check_fits_cluster(cpus_per_trial: int, gpus: float) -> None:
    """A trial that asks for more than the cluster has would wait for ever: refuse it at once."""
    resources = ray.cluster_resources()
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
    configs: Sequence[RunConfig], cpus_per_trial: int, gpus: float, slots: int, log: Log
) -> Callable[[dict[str, Any]], Any]:
    """Tune's per-trial resource request: CPUs, GPUs and (CPU trials) the run's host memory."""
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
        spec: dict[str, float] = {"cpu": cpus_per_trial, "gpu": gpus}
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
    _check_fits_cluster(request.cpus_per_trial, gpus)
    report.slots = _slots(request.cpus_per_trial, gpus)
    spec = TrialSpec(
        train_fn=request.train_fn or default_train_fn,
        data_root=Path(data_root).resolve(),
        store_root=Path(store.root).resolve(),
        device="cuda" if gpus > 0 else "cpu",
        num_threads=int(request.cpus_per_trial),
        save_model=request.save_model,
    )
    _register_by_value(spec.train_fn)
    trainable = tune.with_resources(
        tune.with_parameters(_trial_body, spec=spec),
        _resources_fn(configs, request.cpus_per_trial, gpus, report.slots, request.log),
    )
    progress = _Progress(
        len(configs), store, request.log, request.estimates, report.slots, steps_shares=request.steps_shares
    )
    storage = request.storage(store)
    storage.mkdir(parents=True, exist_ok=True)
    name = f"{request.name}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"
    report.tune_dir = storage.resolve() / name
    report.watch = request.tracking.lines() if request.tracking else []
    for line in report.where_lines():
        request.log(line)
    callbacks = [progress, *_tracker_callbacks(request.tracking, request.name)]
    tuner = _tuner(trainable, configs, report.slots, callbacks, storage, name)
    fit0 = time.perf_counter()
    with _quiet_tune_logs():
        results = tuner.fit()
    report.fit_s = time.perf_counter() - fit0
    _collect(results, store, progress, report)


def _tuner(
    trainable: Any, configs: Sequence[RunConfig], slots: int, callbacks: list[Any], storage: Path, name: str
) -> tune.Tuner:
    """One trial per run (its RunConfig object itself is the trial's config), ``slots`` at a time."""
    entries = [{"run": c, "run_id": c.run_id()} for c in configs]
    return tune.Tuner(
        trainable,
        param_space={"run_entry": tune.grid_search(entries)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=slots,
            reuse_actors=True,  # one worker process per slot: torch and the harness import once
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(storage.resolve()),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=0, fail_fast=False),
            callbacks=callbacks,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
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
