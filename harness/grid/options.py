"""What a grid is asked to do, typed: which specs and seeds, where its trials run, how the driver runs them.

The command line builds these once (:mod:`harness.commands.grid_cmd`, ``check_cmd``); the grid's
functions take them instead of flags. Each record checks its own values when it is built, so a bad
number is one error line before anything is planned, whichever command took it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError
from harness.grid.capacity import DEFAULT_LOST_NODE_WAIT_S, MAX_LOST_NODE_WAIT_S
from harness.grid.relay import storage_filesystem

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
        gpus_per_trial: GPUs per trial, fractions allowed; None = 1 where Ray sees a GPU, else 0.
        cpus_per_trial: CPUs per trial, also the trial's torch thread count.
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
    cpus_per_trial: int = 1
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
        if self.cpus_per_trial < 1:
            raise ConfigError(f"--cpus-per-trial must be >= 1, got {self.cpus_per_trial}")
        gpus = self.gpus_per_trial
        if gpus is not None and (not math.isfinite(gpus) or gpus < 0):
            raise ConfigError(f"--gpus-per-trial must be finite and >= 0, got {gpus}")
        if gpus is not None and gpus > 1 and gpus != int(gpus):
            raise ConfigError(
                f"--gpus-per-trial must be a fraction <= 1 or a whole number of GPUs, got {gpus}"
            )
        for name, amount in self.trial_resources.items():
            if name.lower() in RESERVED_RESOURCES:
                raise ConfigError(
                    f"--trial-resources {name}: set CPUs and GPUs with --cpus-per-trial / --gpus-per-trial "
                    "(memory is asked for by the grid itself)"
                )
            if not math.isfinite(amount) or amount <= 0:
                raise ConfigError(f"--trial-resources {name}={amount}: N must be a number > 0")
        if not 0 <= self.max_failures <= MAX_FAILURES:
            raise ConfigError(f"--max-failures must be between 0 and {MAX_FAILURES}, got {self.max_failures}")
        if self.storage is not None and "://" in self.storage:
            _check_storage_uri(self.storage)

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
    """``--trial-resources NAME=N`` (repeatable) -> ``{NAME: N}``.

    Raises:
        ConfigError: not ``NAME=N`` with N a finite number > 0.
    """
    found: dict[str, float] = {}
    for item in items or []:
        name, sep, amount_text = item.partition("=")
        name = name.strip()
        try:
            amount = float(amount_text)
        except ValueError:
            amount = math.nan
        if not sep or not name or not math.isfinite(amount) or amount <= 0:
            raise ConfigError(
                f"--trial-resources expects NAME=N with N > 0 (e.g. worker_node=1), got {item!r}"
            )
        found[name] = amount
    return found


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
