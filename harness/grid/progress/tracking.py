"""Live tracking of a grid with the ecosystem's tools (no Ray here; :mod:`harness.grid.tune` builds the
callbacks).

Every grid keeps Ray Tune's own output (TensorBoard event files, ``progress.csv``, ``result.json``
per run) under ``<runs>/tune/<grid name>-<time>/``; ``harness grid --track`` adds:

* ``mlflow``: Ray Tune's ``MLflowLoggerCallback``, into ``--tracking-uri``, else
  ``$MLFLOW_TRACKING_URI``, else a local store ``<runs>/mlflow.db`` (SQLite; ``mlflow ui
  --backend-store-uri sqlite:///...`` shows it);
* ``wandb``: Ray's ``WandbLoggerCallback``, offline (files under ``<runs>/wandb``, ``wandb sync``
  uploads them) unless ``WANDB_API_KEY`` is set.

A tracker whose package is missing is refused before anything runs, naming the extra to install.

What every tracker receives: each evaluation point (step, loss, STS-B dev, alignment, uniformity,
...) and, in a run's last report, its final scores under :func:`final_keys` (``final/sts/avg``,
``final/transfer/avg`` and one key per task, ``final/sts/STS12``, ...), so runs compare on what the
tables show. The run record travels to the driver in the same reports (:mod:`harness.grid.relay`)
but is no metric: :data:`PRIVATE_KEYS` are left out of every logger and tracker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.evaluation.tasks import sts_task_names, transfer_task_names

TRACKERS: dict[str, tuple[tuple[str, ...], str]] = {
    "mlflow": (("mlflow", "sqlalchemy", "alembic"), "track"),
    "wandb": (("wandb",), "wandb"),
}
"""tracker -> (the modules it needs, the extra of this package that installs them)."""


def check_trackers(names: Sequence[str]) -> None:
    """Raise :class:`~harness.errors.ConfigError` (one line) for a tracker whose package is missing."""
    for name in names:
        modules, extra = TRACKERS[name]
        missing = [m for m in modules if not _installed(m)]
        if missing:
            raise ConfigError(
                f"--track {name} needs {', '.join(missing)}, which is not installed: "
                f"pip install -e '.[{extra}]' (the {extra} extra)"
            )


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@dataclass(frozen=True)
class Tracking:
    """Where a grid's runs are tracked besides Tune's own files.

    Attributes:
        trackers: ``mlflow`` and/or ``wandb``.
        runs_root: the runs folder (local stores live under it).
        tracking_uri: MLflow's tracking URI (None: ``$MLFLOW_TRACKING_URI``, else the local store).
    """

    trackers: tuple[str, ...] = ()
    runs_root: Path = Path("runs")
    tracking_uri: str | None = None

    def mlflow_uri(self) -> str:
        """The MLflow tracking URI this grid logs to."""
        given = self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if given:
            return given
        return f"sqlite:///{(self.runs_root / 'mlflow.db').resolve()}"

    def wandb_mode(self) -> str:
        """``online`` with an API key (or a mode the user chose), else ``offline``."""
        chosen = os.environ.get("WANDB_MODE")
        if chosen:
            return chosen
        return "online" if os.environ.get("WANDB_API_KEY") else "offline"

    def wandb_dir(self) -> Path:
        return (self.runs_root / "wandb").resolve()

    def lines(self) -> list[str]:
        """Where to look: one line per tracker."""
        out = []
        if "mlflow" in self.trackers:
            out.append(f"MLflow: {self.mlflow_uri()} (mlflow ui --backend-store-uri {self.mlflow_uri()})")
        if "wandb" in self.trackers:
            how = "wandb sync uploads it" if self.wandb_mode() == "offline" else "online"
            out.append(f"wandb: {self.wandb_mode()} run files under {self.wandb_dir()} ({how})")
        return out


PRIVATE_KEYS: tuple[str, ...] = ("record",)
"""Report keys for the driver only (the run record as JSON text): no logger or tracker gets them."""


def final_keys() -> tuple[str, ...]:
    """``final/<group>/<task>`` for every registered task and each group's ``avg``: the keys of a
    run's final scores in its trackers (present, as None, in every report: Tune's CSV keeps the
    first report's columns)."""
    groups = (("sts", sts_task_names()), ("transfer", transfer_task_names()))
    return tuple(f"final/{group}/{task}" for group, tasks in groups for task in (*tasks, "avg"))


def final_metrics(record: Mapping[str, Any]) -> dict[str, float | None]:
    """A record's final scores under :func:`final_keys` (None where the run did not score a task)."""
    final = record.get("final") or {}
    out: dict[str, float | None] = {}
    for key in final_keys():
        _final, group, task = key.split("/", 2)
        value = (final.get(group) or {}).get(task) if isinstance(final, Mapping) else None
        number = isinstance(value, int | float) and not isinstance(value, bool)
        out[key] = float(value) if number and value is not None else None
    return out


def public(result: Mapping[str, Any]) -> dict[str, Any]:
    """A report without its :data:`PRIVATE_KEYS`: what a logger or tracker is given."""
    return {k: v for k, v in result.items() if k not in PRIVATE_KEYS}


MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME")
"""What MLflow's ``set_tracking_uri`` (called by Ray's callback) leaves in the process's environment,
where the next grid of the same process would read it as the user's choice (:meth:`Tracking.mlflow_uri`)."""


@contextlib.contextmanager
def environment_kept(names: Sequence[str] = MLFLOW_ENV) -> Iterator[None]:
    """The environment variables ``names`` as they were before the block, whatever it set."""
    before = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


__all__ = [
    "MLFLOW_ENV",
    "PRIVATE_KEYS",
    "TRACKERS",
    "Tracking",
    "check_trackers",
    "environment_kept",
    "final_keys",
    "final_metrics",
    "public",
]
