"""The driver's Tune callbacks: progress lines and records, the stopper, the trackers."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray
from ray import tune

from harness.atomic import WriteError, atomic_folder
from harness.grid.capacity import WAIT_LINE_S, CapacityWatch, Node
from harness.grid.progress.report import GridProgress, print_line
from harness.grid.progress.tracking import PRIVATE_KEYS, Tracking, public
from harness.grid.relay import (
    decode_record,
    drop_checkpoint,
    earlier_checkpoint,
    forget_checkpoint,
    remember_checkpoint,
)
from harness.grid.slots import SlotBoard
from harness.removal import Shape, remove_owned
from harness.store.bookkeeping import short_error
from harness.store.run_store import SAVED_ENCODER

SAVED_IN_STORAGE = Shape(
    "saved encoder in Tune's storage", r"checkpoint_\d{6}", folder=True, needs=("config.json",)
)
"""A finished run's saved encoder as Tune stores it (``save_pretrained``'s folder): Tune's copy goes
once the driver has its own."""


def trial_name(trial: Any) -> str:
    """Short trial names (Tune's default puts the whole config into the folder name)."""
    return f"{_entry(trial).get('run_id', 'trial')}_{trial.trial_id}"


def _entry(trial: Any) -> dict[str, Any]:
    """The ``{"run": RunConfig, "run_id": id}`` entry a trial was given."""
    return dict((trial.config or {}).get("run_entry") or {})


class TuneProgress(GridProgress, tune.Callback):
    """Tune's callbacks feeding :class:`~harness.grid.progress.report.GridProgress` (its lines and
    failed records), and the driver's side of the trials' reports: every record a report carries is
    written to the store here (the driver alone writes it), resume checkpoints are noted, saved
    encoders fetched.

    Tune pickles its callbacks with the experiment state. The log sink is a driver-side object (the
    ``print`` builtin may even have been replaced since it was captured), so it is left out of the
    pickled state and falls back to :func:`~harness.grid.progress.report.print_line` if the callback is ever
    restored.
    """

    storage: str = ""  # Tune's storage path or URI (where the checkpoints this grid notes live)
    unwritable: dict[str, str]  # run id -> why its record could not be written (its trial is stopped)
    capacity: CapacityWatch | None = None  # the nodes, and the runs no alive node can take
    capacity_stop: str | None = None  # why the grid stops: runs waited in vain for a node
    next_look: float = 0.0  # when the nodes are looked at next (a call to the head: not every step)
    board: SlotBoard | None = None  # told how many runs wait to start (threads for the last runs)
    started: frozenset[str] = frozenset()  # the runs whose trial has started (a retry counts once)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["log"] = print_line
        return state

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        run_id = _entry(trial).get("run_id")
        self.trial_started(run_id)
        self.started = self.started | {str(run_id)}
        if self.board is not None:
            self.board.set_pending(self.total - len(self.started))

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.receive(trial, result)
        self.trial_result(_entry(trial).get("run_id"), result)

    def receive(self, trial: Any, result: Mapping[str, Any]) -> None:
        """Write the record a report carried (a retried report writes the same attempt again)."""

        record = decode_record(result.get("record"))
        if record is None:
            return
        run_id = record["run_id"]
        record.pop("checkpoint", None)  # the trial's own folder: no path of this machine
        if result.get("model") and record.get("status") == "finished":
            record["checkpoint"] = self.store.checkpoint_ref(run_id)  # fetched by on_checkpoint
        try:
            self.store.save(record)
        except WriteError as exc:
            self.unwritable.setdefault(run_id, f"WriteError: {exc}")
            return
        if record.get("status") == "finished":
            with contextlib.suppress(OSError):
                forget_checkpoint(self.store.root, run_id, self.storage, keep_under=_experiment_path(trial))

    def on_checkpoint(
        self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        result = trial.last_result or {}
        run_id = str(_entry(trial).get("run_id"))
        step = result.get("resume_step")
        try:
            if isinstance(step, int):
                earlier = earlier_checkpoint(self.store.root, run_id)
                remember_checkpoint(self.store.root, run_id, checkpoint.path, self.storage, step)
                # an earlier grid's checkpoint this run resumed from is superseded now: not left behind
                with contextlib.suppress(OSError):
                    drop_checkpoint(earlier, run_id, self.storage, keep_under=_experiment_path(trial))
            elif result.get("model"):
                self._fetch_model(run_id, checkpoint)
        except WriteError as exc:
            self.unwritable.setdefault(run_id, f"WriteError: {exc}")

    def _fetch_model(self, run_id: str, checkpoint: Any) -> None:
        """The saved encoder, from Tune's storage into ``<runs>/checkpoints/<run_id>`` (``harness
        export`` reads it there); with a local storage Tune's copy is then removed (one copy kept)."""

        target = self.store.checkpoint_dir(run_id)
        with atomic_folder(target, replace=SAVED_ENCODER) as building:
            checkpoint.to_directory(str(building))
        if "://" not in self.storage:
            remove_owned(checkpoint.path, [self.storage], SAVED_IN_STORAGE)
        self.line(f"saved encoder of {run_id}: {target}")

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.look_at_capacity(trials)
        self.tick()

    def look_at_capacity(self, trials: list[Any]) -> None:
        """Every :data:`LOOK_EVERY_S`: the alive nodes against the waiting trials' requests
        (:class:`~harness.grid.capacity.CapacityWatch`); once runs waited the stated time for a node
        and none is running, ask the stopper to end the grid."""
        if self.capacity is None or self.clock() < self.next_look:
            return
        self.next_look = self.clock() + LOOK_EVERY_S
        waiting = {
            str(_entry(t).get("run_id")): dict(t.placement_group_factory.required_resources)
            for t in trials
            if t.status == "PENDING"
        }
        try:
            nodes = alive_nodes()
        except Exception:  # the head does not answer: HeadWatch sees to that
            return
        for line in self.capacity.observe(nodes, waiting):
            self.line(line)
        running = any(t.status == "RUNNING" for t in trials)
        if self.capacity.expired() and not running and set(waiting) == set(self.capacity.stuck):
            self.capacity_stop = self.capacity.stop_reason()

    def tick(self) -> None:
        """The heartbeat; while runs wait for a node, the waiting line (even with nothing running)."""
        if self.capacity is not None and self.capacity.since is not None:
            if self.clock() - self.last_line >= WAIT_LINE_S:
                self.line(self.capacity.waiting_line())
            return
        super().tick()

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


LOOK_EVERY_S = 2.0
"""Seconds between two looks at the cluster's nodes (each asks the head)."""


def alive_nodes() -> list[Node]:
    """The cluster's alive nodes and their total resources, as :mod:`harness.grid.capacity` takes them."""
    return [
        Node(
            str(n.get("NodeID")),
            str(n.get("NodeManagerAddress", "?")),
            {str(k): float(v) for k, v in (n.get("Resources") or {}).items()},
        )
        for n in ray.nodes()
        if n.get("Alive")
    ]


class GridStopper(tune.Stopper):
    """Stops a trial whose record the driver could not write (a full disk: its work would be lost),
    and the whole grid once its waiting runs waited in vain for a node (``progress.capacity_stop``)."""

    def __init__(self, progress: TuneProgress) -> None:
        self.progress = progress

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return str(result.get("run_id")) in self.progress.unwritable

    def stop_all(self) -> bool:
        return self.progress.capacity_stop is not None


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


def logger_callbacks() -> list[Any]:
    """Tune's own CSV, JSON and TensorBoard loggers, given every report without the record (Tune
    adds its defaults only where none of these classes is among the callbacks)."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

    class PublicCSV(CSVLoggerCallback):
        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            super().log_trial_result(iteration, trial, public(result))

    class PublicJson(JsonLoggerCallback):
        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            super().log_trial_result(iteration, trial, public(result))

    class PublicTBX(TBXLoggerCallback):
        steps: dict[Any, int]

        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            self.steps = getattr(self, "steps", {})
            super().log_trial_result(iteration, trial, stepped(public(result), self.steps, trial))

    return [PublicCSV(), PublicJson(), PublicTBX()]


def stepped(result: dict[str, Any], steps: dict[Any, int], trial: Any) -> dict[str, Any]:
    """A report as a tracker plots it: its x axis the run's training step (the report's ``step``,
    else the trial's last; Tune's loggers take ``timesteps_total``, else ``training_iteration``, the
    count of reports), and ``done`` set on a finished run's last report."""
    from ray.tune.result import TIMESTEPS_TOTAL, TRAINING_ITERATION

    step = result.get("step")
    if isinstance(step, int) and not isinstance(step, bool):
        steps[trial] = step
    at = steps.get(trial, 0)
    out = {**result, TIMESTEPS_TOTAL: at, TRAINING_ITERATION: at}
    if result.get("status") == "finished":
        out["done"] = True
    return out


def tracker_callbacks(tracking: Tracking | None, grid_name: str) -> list[Any]:
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
                project="cse-harness",
                group=grid_name,
                dir=str(tracking.wandb_dir()),
                mode=mode,
                excludes=list(PRIVATE_KEYS),
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
        config holds the RunConfig object itself, which MLflow would log as one long string), and
        the reports without the record."""

        def log_trial_start(self, trial: Any) -> None:
            if trial not in self._trial_runs:
                tags = {**(self.tags or {}), "trial_name": str(trial)}
                run = self.mlflow_util.start_run(tags=tags, run_name=str(_entry(trial).get("run_id")))
                self._trial_runs[trial] = run.info.run_id
                self.mlflow_util.log_params(run_id=self._trial_runs[trial], params_to_log=_run_params(trial))

        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            self.steps: dict[Any, int] = getattr(self, "steps", {})
            super().log_trial_result(iteration, trial, stepped(public(result), self.steps, trial))

    return MLflowCallback
