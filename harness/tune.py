"""The Ray Tune adapter: the ONLY module of the harness that imports ``ray``.

:func:`run_trials` runs one Tune trial per resolved :class:`~harness.config.RunConfig`. Each trial is
a function trainable that calls :func:`harness.train.train_run`, which writes the run record into the
harness's own run store (``runs/records/<run_id>.json``): Tune's results folder is only scratch
space, kept under ``<runs dir>/ray``.

* Tune's own folder of a grid (``<runs>/ray/grid-<time>``) is removed when every trial finished;
  after a failure it stays, with the trials' error files.
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
* Ray Tune itself failing (on 2026-11-23 Tune 2.5x raised on the ``OutOfMemoryError`` of a worker
  Ray's memory monitor had killed) ends the grid with :class:`GridStopped`: runs left ``running``
  are marked ``interrupted`` with Tune's reason, finished ones stay, the next grid resumes.
* Progress: one line per trial start and end (done / running / failed / remaining, with an ETA).
* Resuming is the grid's job: killed and started again, it skips runs with a finished record
  (:mod:`harness.grid`), so only the remaining ones run.
* Ctrl-C: the trials are stopped, Ray shuts down, runs left ``running`` are marked ``interrupted``
  (the next grid runs them again) and :class:`KeyboardInterrupt` propagates (exit status 130).
* A locally started Ray keeps its session files in a fresh ``harness-ray-<pid>-*`` folder under the
  system temporary folder, removed at shutdown; folders left by killed grids (dead pid) are removed
  at the next start.

The returned :class:`GridReport` says how much of the wall time was trial work and how much was Ray
start-up and scheduling.
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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cleanup import TEMP_PREFIX, remove_stale_temp_dirs
from harness.errors import HarnessError

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

Log = Callable[[str], None]
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
    """The real trial body: :func:`harness.train.train_run`, silent, writing into ``store``."""
    from harness.train import train_run

    return train_run(
        config,
        data_root,
        store,
        device=device,
        num_threads=num_threads,
        log=None,
        save_checkpoint=save_checkpoint,
    )


def ensure_failed_record(store: RunStore, config: RunConfig, error: str) -> bool:
    """Make sure the run has a ``failed`` record with a reason; return True if this wrote one.

    A record that already says ``failed`` (written by ``train_run``, with its own reason) or
    ``finished`` is left alone; a missing or ``running`` one becomes ``failed``.
    """
    from harness.store import new_record, now_iso

    record = store.load(config.run_id())
    if record is not None and record.get("status") in ("failed", "finished"):
        return False
    if record is None:
        record = dict(new_record(config))
    record["status"] = "failed"
    record["error"] = error
    record["finished_at"] = now_iso()
    store.save(record)
    return True


def mark_interrupted(store: RunStore, configs: Sequence[RunConfig], reason: str) -> list[str]:
    """Mark the runs of ``configs`` whose record, or whose attempt beside a finished record (a run
    asked again for more final tasks), still says ``running`` as ``interrupted``.

    Returns the ids marked. Finished and failed records and attempts are left alone.
    """
    from harness.store import now_iso

    marked = []
    for config in configs:
        run_id = config.run_id()
        record = store.load(run_id)
        if record is None:
            continue
        candidates = [record] if record.get("status") == "running" else []
        if record.get("status") == "finished":
            candidates = [a for a in store.attempts(run_id) if a.get("status") == "running"]
        for running in candidates:
            running.update(status="interrupted", error=reason, finished_at=now_iso())
            store.save(running)
        if candidates:
            marked.append(run_id)
    return marked


def _short_error(text: str | None) -> str:
    """One line out of a trial's error: the exception line, or why Ray says the worker died."""
    import re

    body = (text or "").strip()
    died = re.search(
        r"Worker exit type: (\S+)\s+Worker exit detail: (.*?)(?:\s+Some common causes|$)", body, re.S
    )
    if died:
        pid = re.search(r"\bpid: (\d+)", body)
        who = f" (pid {pid.group(1)})" if pid else ""
        detail = " ".join(died.group(2).split())
        return (
            f"the trial's Ray worker{who} died: {died.group(1)}: {detail} (Ray names as common causes "
            "the OOM killer, `ray stop --force`, or a crash such as SIGSEGV)"
        )
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    return lines[-1] if lines else "the trial errored in its Ray worker (Ray gave no reason)"


def _trial_body(
    tune_config: dict[str, Any],
    *,
    train_fn: TrainFn,
    data_root: str,
    store_root: str,
    num_threads: int,
    use_gpu: bool,
    save_model: bool = False,
) -> None:
    """One Tune trial: rebuild the config, train, report; record any failure."""
    from harness.config import RunConfig
    from harness.memory import release_freed
    from harness.store import RunStore

    config = RunConfig.from_dict(tune_config["run_entry"]["run"])
    store = RunStore(store_root)
    start = time.perf_counter()
    try:
        extra: dict[str, Any] = {"save_checkpoint": True} if save_model else {}
        device = "cuda" if use_gpu else "cpu"
        record = train_fn(config, Path(data_root), store, device=device, num_threads=num_threads, **extra)
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


def _fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class GridReport:
    """What a grid did and where its time went.

    Attributes:
        total: trials started.
        finished: trials that ended with a finished record.
        failed: ``(run_id, reason)`` per failed trial.
        wall_s: wall time of :func:`run_trials` (Ray start-up included).
        ray_start_s: time to start or connect to Ray.
        fit_s: time inside ``Tuner.fit`` (scheduling and trials).
        work_s: sum over trials of the time spent inside the trial body (training and evaluation).
        slots: how many trials could run at once with the resources Ray saw.
    """

    total: int = 0
    finished: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    ray_start_s: float = 0.0
    fit_s: float = 0.0
    work_s: float = 0.0
    slots: int = 1
    interrupted: list[str] = field(default_factory=list)

    def overhead_s(self) -> float:
        """Wall time not explained by trial work spread over the slots (start-up, scheduling)."""
        return max(0.0, self.wall_s - self.work_s / max(1, min(self.slots, max(1, self.total))))

    def summary(self) -> list[str]:
        lines = [
            f"grid: {self.finished} finished, {len(self.failed)} failed of {self.total} trials "
            f"in {self.wall_s:.1f} s",
            f"time: Ray start-up {self.ray_start_s:.1f} s; Tune fit {self.fit_s:.1f} s; trial work "
            f"{self.work_s:.1f} s summed over trials ({self.slots} slot(s) in parallel); start-up and "
            f"scheduling overhead about {self.overhead_s():.1f} s "
            f"({100 * self.overhead_s() / max(self.wall_s, 1e-9):.0f}% of the wall time)",
        ]
        lines.extend(f"failed: {run_id}: {reason}" for run_id, reason in self.failed)
        lines.extend(f"interrupted: {run_id} (the next grid runs it again)" for run_id in self.interrupted)
        return lines


def _trial_name(trial: Any) -> str:
    """Short trial names (Tune's default puts the whole config into the folder name)."""
    return f"{_entry(trial).get('run_id', 'trial')}_{trial.trial_id}"


def _entry(trial: Any) -> dict[str, Any]:
    """The ``{"run": config dict, "run_id": id}`` entry a trial was given."""
    return dict((trial.config or {}).get("run_entry") or {})


def print_line(line: str) -> None:
    """The default progress sink (a module-level function, so Tune can pickle it by reference)."""
    print(line, flush=True)


class _Progress(tune.Callback):
    """Prints one line per trial start and end; records driver-side failures.

    Tune pickles its callbacks with the experiment state. The log sink is a driver-side object (the
    ``print`` builtin may even have been replaced since it was captured), so it is left out of the
    pickled state and falls back to :func:`print_line` if the callback is ever restored.
    """

    def __init__(self, total: int, store: RunStore, log: Log) -> None:
        self.total = total
        self.store = store
        self.log: Log = log
        self.start = time.perf_counter()
        self.running = 0
        self.done = 0
        self.failed: list[tuple[str, str]] = []

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["log"] = print_line
        return state

    def _line(self, event: str) -> None:
        ended = self.done + len(self.failed)
        remaining = self.total - ended
        elapsed = time.perf_counter() - self.start
        eta = f", ETA {_fmt_duration(elapsed / ended * remaining)}" if ended and remaining else ""
        self.log(
            f"[{ended}/{self.total}] done {self.done}, running {self.running}, failed {len(self.failed)}, "
            f"remaining {remaining}{eta} ({_fmt_duration(elapsed)} elapsed) | {event}"
        )

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.running += 1
        self._line(f"started {_entry(trial).get('run_id')}")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.running = max(0, self.running - 1)
        self.done += 1
        result = trial.last_result or {}
        dev = result.get("best_stsb_dev")
        dev_text = f"STS-B dev {dev:.2f}, " if isinstance(dev, int | float) else ""
        work = result.get("work_s")
        work_text = f"{work:.1f} s" if isinstance(work, int | float) else "?"
        self._line(f"finished {_entry(trial).get('run_id')} ({dev_text}{work_text})")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        from harness.config import RunConfig

        self.running = max(0, self.running - 1)
        run_id = str(_entry(trial).get("run_id"))
        reason = _short_error(_trial_error_text(trial))
        where = f" (traceback: {trial.error_file})" if trial.error_file else ""
        config = RunConfig.from_dict(_entry(trial)["run"])
        ensure_failed_record(self.store, config, reason)
        record = self.store.load(run_id) or {}
        self.failed.append((run_id, str(record.get("error") or reason)))
        self._line(f"FAILED {run_id}: {self.failed[-1][1]}{where}")


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
        storage_dir: Tune's scratch folder (default ``<store root>/ray``).
        log: where progress lines go.

    Returns:
        A :class:`GridReport` (counts, failures, and where the time went).
    """
    report = GridReport(total=len(configs))
    if not configs:
        return report
    from harness.resources import check_resource_request

    check_resource_request(cpus_per_trial, gpus_per_trial)
    check_address(None if smoke else address)
    wall0 = time.perf_counter()
    try:
        with ray_session(address=address, smoke=smoke, min_cpus=cpus_per_trial) as start_s:
            report.ray_start_s = start_s
            _fit(
                configs,
                data_root,
                store,
                report,
                gpus_per_trial,
                cpus_per_trial,
                smoke,
                train_fn,
                storage_dir,
                log,
                save_model,
            )
    except KeyboardInterrupt:
        # Ray is shut down by now (its workers are gone): what they left "running" was interrupted
        why = "interrupted (Ctrl-C or SIGTERM on the grid driver)"
        report.interrupted = mark_interrupted(store, configs, why)
        report.wall_s = time.perf_counter() - wall0
        raise GridInterrupted(report) from None
    except Exception as exc:  # the grid's own checks, or Ray Tune giving up (see the module notes)
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        report.interrupted = mark_interrupted(store, configs, f"the grid stopped: {reason[:300]}")
        report.wall_s = time.perf_counter() - wall0
        if isinstance(exc, HarnessError):
            raise
        trace = _save_traceback(Path(storage_dir) if storage_dir is not None else Path(store.root) / "ray")
        raise GridStopped(report, reason[:300], trace) from exc
    report.wall_s = time.perf_counter() - wall0
    return report


class GridStopped(HarnessError):
    """Ray Tune stopped the grid with an error of its own; ``report.interrupted`` lists the runs it
    left ``running`` (now marked ``interrupted``: the next grid runs them again)."""

    def __init__(self, report: GridReport, reason: str, trace: Path | None = None) -> None:
        where = f" (traceback: {trace})" if trace is not None else ""
        super().__init__(
            f"Ray Tune stopped the grid: {reason}{where}. Finished runs are kept; "
            f"{len(report.interrupted)} run(s) it left running are marked interrupted; "
            "the same command resumes the grid"
        )
        self.report = report


def _save_traceback(folder: Path) -> Path | None:
    """Write the exception being handled to ``folder/grid-stopped-<time>.txt``; its path, or None."""
    import traceback

    path = folder / f"grid-stopped-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}.txt"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc(), encoding="utf-8")
    except OSError:
        return None
    return path


class GridInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_trials`; ``report`` says what was finished and what was interrupted."""

    def __init__(self, report: GridReport) -> None:
        super().__init__("interrupted")
        self.report = report


def _check_fits_cluster(cpus_per_trial: int, gpus: float) -> None:
    """A trial that asks for more than the cluster has would wait for ever: refuse it at once."""
    from harness.errors import ConfigError

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


def _sigterm_handler() -> Any:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.getsignal(signal.SIGTERM)


def _restore_sigterm(handler: Any) -> None:
    import signal

    if callable(handler):  # a Python handler the caller installed (the grid's: stop as Ctrl-C does)
        signal.signal(signal.SIGTERM, handler)


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

    from harness.errors import ConfigError

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
            sigterm = _sigterm_handler()
            ray.init(**kwargs)
            _restore_sigterm(sigterm)  # ray.init replaces it with sys.exit; keep the caller's
        except (ConnectionError, RuntimeError, TimeoutError) as exc:
            if "address" not in kwargs:
                raise
            from harness.errors import ConfigError

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
    configs: Sequence[RunConfig],
    data_root: Path,
    store: RunStore,
    report: GridReport,
    gpus_per_trial: float | None,
    cpus_per_trial: int,
    smoke: bool,
    train_fn: TrainFn | None,
    storage_dir: Path | None,
    log: Log,
    save_model: bool = False,
) -> None:
    """Build the Tuner, run it, read the results back into ``report``."""
    gpus = (
        float(gpus_per_trial)
        if gpus_per_trial is not None
        else (1.0 if ray.cluster_resources().get("GPU", 0) >= 1 and not smoke else 0.0)
    )
    _check_fits_cluster(cpus_per_trial, gpus)
    report.slots = _slots(cpus_per_trial, gpus)
    fn = train_fn or default_train_fn
    _register_by_value(fn)
    trainable = tune.with_resources(
        tune.with_parameters(
            _trial_body,
            train_fn=fn,
            data_root=str(Path(data_root).resolve()),
            store_root=str(Path(store.root).resolve()),
            num_threads=int(cpus_per_trial),
            use_gpu=gpus > 0,
            save_model=save_model,
        ),
        _resources_fn(configs, cpus_per_trial, gpus, report.slots, log),
    )
    entries = [{"run": c.to_dict(), "run_id": c.run_id()} for c in configs]
    progress = _Progress(len(configs), store, log)
    storage = Path(storage_dir) if storage_dir is not None else Path(store.root) / "ray"
    storage.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    tuner = tune.Tuner(
        trainable,
        param_space={"run_entry": tune.grid_search(entries)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=report.slots,
            reuse_actors=True,  # one worker process per slot: torch and the harness import once
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=tune.RunConfig(
            name=f"grid-{stamp}",
            storage_path=str(storage.resolve()),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=0, fail_fast=False),
            callbacks=[progress],
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
    )
    fit0 = time.perf_counter()
    with _quiet_tune_logs():
        results = tuner.fit()
    report.fit_s = time.perf_counter() - fit0
    _collect(results, store, progress, report)
    if not report.failed:  # Tune's scratch of a clean grid holds nothing anyone reads; errors are kept
        shutil.rmtree(storage / f"grid-{stamp}", ignore_errors=True)


def _collect(results: Any, store: RunStore, progress: _Progress, report: GridReport) -> None:
    """Read the ResultGrid back: work time, finished count; a failed record for any errored trial."""
    from harness.config import RunConfig

    failed = dict(progress.failed)
    for result in results:
        entry = (result.config or {}).get("run_entry") or {}
        run_id = str(entry.get("run_id"))
        metrics = result.metrics or {}
        if isinstance(metrics.get("work_s"), int | float):
            report.work_s += float(metrics["work_s"])
        if result.error is not None:
            if run_id not in failed and entry.get("run"):
                reason = _short_error(str(result.error))
                ensure_failed_record(store, RunConfig.from_dict(entry["run"]), reason)
                failed[run_id] = str((store.load(run_id) or {}).get("error") or reason)
            continue
        record = store.load(run_id) or {}
        if record.get("status") == "finished":
            report.finished += 1
        elif run_id not in failed:
            failed[run_id] = str(record.get("error") or "trial ended without a finished record")
    report.failed = sorted(failed.items())
