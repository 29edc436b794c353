"""The Ray session: a local Ray or a cluster's address, its nodes and resources, each trial's request."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from harness.errors import ConfigError, HarnessError
from harness.grid.capacity import trial_fit_problems, trial_request
from harness.grid.cleanup import TEMP_PREFIX, pids_using, remove_stale_temp_dirs, start_times, stop_processes
from harness.grid.plan.memory import estimate_bytes
from harness.grid.progress.report import Log
from harness.grid.signals import keep_sigterm_handler
from harness.grid.tune.head_watch import Answer, gcs_question
from harness.store.bookkeeping import short_error

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig

HEAD_ANSWER_S = 10.0
"""How long ``check`` and ``grid --address`` wait for the head's answer (Ray's client adds up to 10 s
to connect) before they say it does not answer: a live head answers in milliseconds, a busy one
(a loaded machine, a niced head) in seconds."""


def trial_slots(
    cpus_per_trial: float, gpus_per_trial: float, custom: Mapping[str, float] | None = None
) -> int:
    resources = ray.cluster_resources()
    by_cpu = int(resources.get("CPU", 1) // cpus_per_trial) if cpus_per_trial > 0 else 1_000_000
    by_gpu = int(resources.get("GPU", 0) // gpus_per_trial) if gpus_per_trial > 0 else 1_000_000
    by_custom = [int(resources.get(k, 0) // v) for k, v in (custom or {}).items() if v > 0]
    return max(1, min(by_cpu, by_gpu, *by_custom))


def check_fits_cluster(
    cpus_per_trial: int, gpus: float, custom: Mapping[str, float] | None = None, *, local: bool = False
) -> None:
    """A trial that no alive node can take would wait for ever: refuse it at once, judged by
    :func:`~harness.grid.capacity.trial_fit_problems` on the Ray session's nodes (``local``: a Ray
    this driver started, the machine's own)."""
    totals = {k: float(v) for k, v in ray.cluster_resources().items()}
    nodes = [
        {k: float(v) for k, v in (n.get("Resources") or {}).items()} for n in ray.nodes() if n.get("Alive")
    ]
    where = "the local Ray's" if local else "the cluster's"
    problems = trial_fit_problems(totals, trial_request(cpus_per_trial, gpus, custom), nodes or None, where)
    if problems:
        raise ConfigError(f"{'; '.join(problems)}; no trial could start")


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

        # its note that token auth is on says what this function chose: not a line for the user
        quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
        finally:
            quiet.setLevel(level)
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


def check_address(address: str | None, timeout_s: float = 5.0, answer_s: float = HEAD_ANSWER_S) -> None:
    """Fail fast, with one line, on a Ray address that cannot work (before ``ray.init`` retries).

    ``ray://`` needs the ``ray[client]`` extra (not installed here); ``host:port`` must accept a TCP
    connection within ``timeout_s`` and its GCS answer Ray's health question within ``answer_s`` (a
    stopped head accepts connections, then ``ray.init`` would wait minutes). ``auto`` and ``None``
    are left to Ray.
    """

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
    if not address.startswith("ray://") and _ask_quietly(target, answer_s) is not Answer.YES:
        raise ConfigError(
            f"--address {address}: the Ray head there accepts connections but does not answer (no reply "
            f"to Ray's health check within {answer_s:g} s): the head node is stopped, hung or overloaded"
        )


def _ask_quietly(address: str, timeout_s: float) -> Answer:
    """:func:`gcs_question` once, with file descriptor 2 sent to a scratch file while it runs (Ray's
    C++ client writes its retries there: the caller says what went wrong in one line)."""
    _use_cluster_token()  # a head with token auth answers a client with the token only
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as scratch:
            os.dup2(scratch.fileno(), 2)
            try:
                return gcs_question(address, timeout_s=timeout_s)()
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


@contextlib.contextmanager
def ray_session(*, address: str | None = None, smoke: bool = False) -> Iterator[float]:
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
        kwargs["num_cpus"] = os.cpu_count() or 1  # a trial asks for no more (ClusterOptions)
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
        # the local Ray's processes, known by their logs in its folder while they still hold them
        ours = start_times(pids_using(temp_root)) if temp_root is not None else {}
        with contextlib.suppress(Exception):
            ray.shutdown()
        if temp_root is not None:
            # ray.shutdown() returns before every worker and agent has exited (on a loaded machine,
            # seconds later, some with their files already closed): wait for them, stop stragglers
            stop_processes(sorted({*ours, *pids_using(temp_root)}), started=ours)
            shutil.rmtree(temp_root, ignore_errors=True)


@contextlib.contextmanager
def quiet_tune_logs() -> Iterator[None]:
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


def resources_fn(
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
