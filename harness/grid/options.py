"""What a grid is asked to do, typed: which specs and seeds, where its trials run, how the driver runs them.

The command line builds these once (:mod:`harness.commands.grid_cmd`, ``check_cmd``); the grid's
functions take them instead of flags. Each record checks its own values when it is built, so a bad
number is one error line before anything is planned, whichever command took it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.coerce import read_number
from harness.config.settings import resolve_settings
from harness.errors import ConfigError
from harness.grid.capacity import DEFAULT_LOST_NODE_WAIT_S, MAX_LOST_NODE_WAIT_S
from harness.grid.progress.tracking import check_trackers
from harness.grid.relay import storage_filesystem
from harness.run.checkpoint import every_from_env
from harness.specs.cells import check_seed_count

if TYPE_CHECKING:
    from harness.grid.progress.tracking import Tracking

RESERVED_RESOURCES = frozenset({"cpu", "gpu", "memory", "object_store_memory"})
"""Ray resources the other options set (not a custom ``--trial-resources`` name)."""
MAX_FAILURES = 100


@dataclass(frozen=True)
class ClusterOptions:
    """Where a grid's trials run and what each asks for.

    Attributes:
        address: a Ray cluster's address (``HOST:PORT``, ``auto``, ``ray://...``); None = start Ray
            locally with every CPU and GPU of this machine.
        gpus_per_trial: GPUs per trial, fractions allowed; None = 1 where the trials' machine (this
            one, or the cluster) has a GPU, else 0 (:func:`decide_trial_gpus`, once per grid).
        cpus_per_trial: CPUs per trial, also the trial's torch thread count (at most this machine's
            CPUs without ``address``); None = not given: 1 (:attr:`cpus`).
        trial_resources: custom Ray resources every trial asks for (``{"worker_node": 1}``): trials go
            only to the nodes that offer them.
        storage: Ray Tune's storage (a folder every node reaches, or an ``s3://``/``gs://`` URI);
            None = ``<runs>/tune`` on the driver.
        max_failures: Tune's retries of a failed trial (a lost node), from its last checkpoint.
        smoke: a small local Ray without GPUs (tests, CI); it takes no ``address``.
        lost_node_wait: seconds a grid waits for a node that can take its waiting trials once no
            alive node can (its nodes were lost); then it stops, the waiting runs marked
            ``interrupted`` (:mod:`harness.grid.capacity`).
    """

    address: str | None = None
    gpus_per_trial: float | None = None
    cpus_per_trial: int | None = None
    trial_resources: Mapping[str, float] = field(default_factory=dict)
    storage: str | None = None
    max_failures: int = 0
    smoke: bool = False
    lost_node_wait: float = DEFAULT_LOST_NODE_WAIT_S

    def __post_init__(self) -> None:
        if self.smoke and self.address is not None:
            raise ConfigError(
                f"--smoke starts a small local Ray and cannot use the cluster at --address {self.address}: "
                "give one or the other"
            )
        wait = self.lost_node_wait
        if not math.isfinite(wait) or not 0 <= wait <= MAX_LOST_NODE_WAIT_S:
            raise ConfigError(
                f"--lost-node-wait must be seconds from 0 to {MAX_LOST_NODE_WAIT_S:.0f} (a week), got {wait}"
            )
        self._check_cpus()
        gpus = self.gpus_per_trial
        if gpus is not None and (not math.isfinite(gpus) or gpus < 0):
            raise ConfigError(f"--gpus-per-trial must be finite and >= 0, got {gpus}")
        if gpus is not None and gpus > 1 and gpus != int(gpus):
            raise ConfigError(
                f"--gpus-per-trial must be a fraction <= 1 or a whole number of GPUs, got {gpus}"
            )
        if self.smoke and gpus:
            raise ConfigError(
                f"--smoke starts a small local Ray without GPUs and cannot give --gpus-per-trial {gpus:g}: "
                "give one or the other"
            )
        for name, amount in self.trial_resources.items():
            if name.lower() in RESERVED_RESOURCES:
                raise ConfigError(
                    f"--trial-resources {name}: set CPUs and GPUs with --cpus-per-trial / --gpus-per-trial "
                    "(memory is asked for by the grid itself)"
                )
            if not math.isfinite(amount) or amount <= 0:
                raise ConfigError(
                    f"--trial-resources {name}={amount:g}: N must be a number > 0 (e.g. {name}=1)"
                )
        if not 0 <= self.max_failures <= MAX_FAILURES:
            raise ConfigError(f"--max-failures must be between 0 and {MAX_FAILURES}, got {self.max_failures}")
        if self.storage is not None and "://" in self.storage:
            _check_storage_uri(self.storage)

    def _check_cpus(self) -> None:
        """``cpus_per_trial`` >= 1 and, on a local Ray (no ``address``), within this machine's CPUs:
        the local Ray has no more, so such a trial could never start."""
        cpus = self.cpus_per_trial
        if cpus is None:
            return
        if cpus < 1:
            raise ConfigError(f"--cpus-per-trial must be >= 1, got {cpus}")
        here = os.cpu_count() or 1
        if self.address is None and cpus > here:
            raise ConfigError(
                f"--cpus-per-trial {cpus} is more than this machine's {here} CPU(s), all a local Ray has "
                "(give --address to run the trials on a cluster)"
            )

    @property
    def cpus(self) -> int:
        """The CPUs each trial asks for (and its torch threads): ``cpus_per_trial``, else 1."""
        return 1 if self.cpus_per_trial is None else self.cpus_per_trial

    def remote_storage(self) -> bool:
        """Whether Tune's storage is a pyarrow URI (``s3://``, ``gs://``, ...), not a folder."""
        return self.storage is not None and "://" in self.storage

    def storage_folder(self, runs_dir: str | Path) -> Path:
        """Tune's local folder: ``storage``, default ``<runs>/tune`` (with a URI storage: ``<runs>/tune``,
        where the driver keeps a traceback of a grid Tune stopped)."""
        if self.storage is not None and not self.remote_storage():
            return Path(self.storage)
        return Path(runs_dir) / "tune"

    def storage_uri(self, runs_dir: str | Path) -> str:
        """Tune's ``storage_path``: the URI as given, else the local folder, absolute."""
        return str(self.storage) if self.remote_storage() else str(self.storage_folder(runs_dir).resolve())


def parse_trial_resources(items: Sequence[str] | None) -> dict[str, float]:
    """``--trial-resources NAME=N`` (repeatable) -> ``{NAME: N}`` (N's range: :class:`ClusterOptions`).

    Raises:
        ConfigError: not ``NAME=N`` with N a number in ASCII digits.
    """
    found: dict[str, float] = {}
    for item in items or []:
        name, sep, amount_text = item.partition("=")
        name = name.strip()
        try:
            amount = float(read_number(amount_text, float))
        except ValueError:
            amount = None
        if not sep or not name or amount is None:
            raise ConfigError(
                f"--trial-resources expects NAME=N with N a number > 0 (e.g. worker_node=1), got {item!r}"
            )
        found[name] = amount
    return found


def decide_trial_gpus(cluster: ClusterOptions, gpus_seen: float) -> float:
    """The GPUs each trial gets: ``gpus_per_trial`` as given, else 1 where the machine the trials run
    on (this one, or the Ray cluster) has ``gpus_seen`` >= 1 GPU and Ray is not the smoke one, else 0.

    A grid decides it once (:func:`harness.grid.launch.check_cluster`) and hands it to the cost model
    and the driver (:attr:`GridRequest.trial_gpus`)."""
    if cluster.gpus_per_trial is not None:
        return float(cluster.gpus_per_trial)
    return 1.0 if gpus_seen >= 1 and not cluster.smoke else 0.0


def _check_storage_uri(storage: str) -> None:
    """A URI whose filesystem pyarrow knows (s3://, gs://, ...)."""

    try:
        storage_filesystem(storage)
    except Exception as exc:  # pyarrow's own errors: an unknown scheme, a missing bucket driver
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"--storage {storage}: pyarrow cannot open it ({first})") from None


@dataclass(frozen=True)
class GridOptions:
    """One ``harness grid`` (or ``harness check``) request.

    Attributes:
        specs: table specs: paths, names in ``tables/``, or ``all`` (the plots' runs too).
        profile: the profile; None = ``cpu`` (``smoke`` with ``cluster.smoke``).
        runs_dir: the run store's folder.
        data_dir: the data root (None: ``$HARNESS_DATA``, ``./data``, ``../shared/data``).
        seeds: seeds per run, from the profile's seed.
        overrides: run-setting overrides (``--override``, ``--max-steps``, ...).
        claims_only: only the runs some claim compares.
        dry_run: plan and estimate, run nothing.
        retry_failed: run again the runs whose record says failed.
        save_model: keep each run's best encoder under ``<runs>/checkpoints/``.
        cluster: where the trials run.
        track: live trackers beside Tune's own files (``mlflow``, ``wandb``).
        tracking_uri: MLflow's tracking URI (default: ``<runs>/mlflow.db``).
        compile: compile each run's training forward (None: where it helps, on a GPU).
        checkpoint_every_s: the least seconds between two resume checkpoints of a run
            (``$HARNESS_CHECKPOINT_EVERY_S``, read once here, strictly; the trials get this value).
    """

    specs: tuple[str, ...]
    profile: str | None = None
    runs_dir: str = "runs"
    data_dir: str | None = None
    seeds: int = 1
    overrides: Mapping[str, Any] = field(default_factory=dict)
    claims_only: bool = False
    dry_run: bool = False
    retry_failed: bool = True
    save_model: bool = False
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    track: tuple[str, ...] = ()
    tracking_uri: str | None = None
    compile: bool | None = None
    checkpoint_every_s: float = field(default_factory=every_from_env)

    @property
    def resolved_profile(self) -> str:
        return self.profile or ("smoke" if self.cluster.smoke else "cpu")


@dataclass(frozen=True)
class GridRequest:
    """How the driver runs one grid's trials (:func:`harness.grid.tune.driver.run_trials`).

    Attributes:
        cluster: where the trials run.
        train_fn: the trial body (default: :func:`harness.run.training.train_run` through
            :func:`harness.grid.tune.trial.default_train_fn`); tests pass a fast fake.
        log: where progress lines go.
        save_model: keep each run's best encoder under the store.
        name: the grid's name (its specs), for Tune's folder.
        estimates: the cost model's seconds per run, by run id (the progress lines' ETA).
        steps_shares: the share of each estimate that the run's steps take (the rest: final tasks).
        tracking: ``--track`` trackers (MLflow, Weights & Biases) beside Tune's own files.
        compile: compile each run's training forward (None: where it helps, on a GPU).
        trial_gpus: the GPUs each trial gets, as the grid decided them (:func:`decide_trial_gpus`); None:
            the driver decides them by the same rule from the Ray cluster it joins.
        address_checked: the grid checked ``cluster.address`` already (reachable, its head
            answering): the driver trusts it; False: the driver checks it.
        checkpoint_every_s: the least seconds between two resume checkpoints of a run; None: the
            driver reads ``$HARNESS_CHECKPOINT_EVERY_S``.
    """

    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    train_fn: Callable[..., Mapping[str, Any]] | None = None
    log: Callable[[str], None] | None = None
    save_model: bool = False
    name: str = "grid"
    estimates: Mapping[str, float] | None = None
    steps_shares: Mapping[str, float] | None = None
    tracking: Tracking | None = None
    compile: bool | None = None
    trial_gpus: float | None = None
    address_checked: bool = False
    checkpoint_every_s: float | None = None


def check_options(options: GridOptions) -> None:
    """The values a grid or a pre-flight check takes that nothing else checks (the cluster options
    and ``$HARNESS_CHECKPOINT_EVERY_S`` checked themselves when the options were built): overrides,
    the seed count (planning trusts it), and the trials' CPUs against the runs' threads."""
    check_seed_count(options.seeds)
    # the settings' own bounds (steps, threads, ...) of every override, before anything is planned
    root = Path(options.data_dir) if options.data_dir else None
    settings = resolve_settings(options.resolved_profile, options.overrides, root, require_corpus=False)
    check_threads(options, settings.threads)
    check_trackers(list(options.track))


def check_threads(options: GridOptions, threads: int | None) -> None:
    """A ``--cpus-per-trial`` given is each trial's torch threads, unless the runs fix their own
    (``threads``, part of the run id; the CPU profiles set 1): then the two must agree, or each trial
    would hold CPUs it does not train on (or train on more threads than it holds).

    Raises:
        ConfigError: they differ, naming both and the fix.
    """
    cpus = options.cluster.cpus_per_trial
    if cpus is None or threads is None or cpus == threads:
        return
    raise ConfigError(
        f"--cpus-per-trial {cpus} but the runs train on {threads} thread(s) (their threads setting under "
        f"profile {options.resolved_profile}; it is part of the run id): give --override threads={cpus} "
        f"as well, or --cpus-per-trial {threads}"
    )
