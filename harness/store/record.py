"""The run record: its typed shape, its schema version, and the provenance every record carries.

A record is JSON on disk (``runs/records/<run_id>.json``, written by
:class:`harness.store.run_store.RunStore`) and a :class:`RunRecord` in the program. Tables, plots
and claims read only records.

Schema history:

* 1: the first layout.
* 2: adds ``provenance`` (library versions, device, CPU/GPU, CUDA, threads, dirty tree) and
  ``method_notes`` (what the method's parameters resolve to on the run's encoder, e.g. the
  whitening groups); ``config`` gains ``threads``.
* 3: adds the optional ``peak_rss_mb`` (the run's peak resident memory, host side),
  ``final.sts_tasks`` and ``final.transfer_tasks`` (the tasks each ``avg`` covers) and
  ``error_details`` (what a failed run's one-line ``error`` leaves out). Records that say 2 were
  written before the number moved and may hold these fields too; a record without the task lists
  covers the seven standard tasks of each group (:func:`record_tasks`).
* 4: adds the optional ``final_threads`` (the threads of a final evaluation that a grid handed more
  threads than the run's own, :mod:`harness.grid.slots`).

Every version is read; only the fields a reader needs are checked (:func:`check_record`).
"""

from __future__ import annotations

import math
import platform
import socket
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from harness.config.hardware import cpu_id, cpu_model, cpu_native_bf16
from harness.evaluation.tasks import (
    LEGACY_STS_TASKS,
    LEGACY_TRANSFER_TASKS,
    task_names,
    year_task_names,
)
from harness.store.provenance import code_dirty, code_version, now_iso

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig

SCHEMA_VERSION = 4
Status = Literal["running", "finished", "failed", "interrupted"]
STATUSES: tuple[str, ...] = ("running", "finished", "failed", "interrupted")
"""``interrupted``: stopped by Ctrl-C or SIGTERM (grid or train); the next grid runs it again."""


class Provenance(TypedDict):
    """Where and with what a run ran: enough to tell why two records of one run id differ."""

    python: str
    torch: str
    transformers: str
    numpy: str
    platform: str
    device: str
    device_name: str
    cpu_model: str
    cpu_id: NotRequired[str]
    cpu_native_bf16: NotRequired[bool]
    gpu_name: str | None
    cuda: str | None
    threads: int
    code_version: str
    code_dirty: bool | None
    host: str
    compiled: NotRequired[bool]
    """Whether the training forward ran compiled (:class:`harness.run.step.TrainStep`)."""
    arithmetic: NotRequired[dict[str, str]]
    """What the run's precisions computed on its device, ``training`` and ``evaluation``, in words
    (:func:`harness.encoder.precision.describe`)."""
    data: NotRequired[dict[str, object]]
    """The data's checksums (:func:`harness.config.datasets.data_checksums`)."""


class RunRecord(TypedDict):
    """One run's record (see the module docstring for the schema history)."""

    schema_version: int
    run_id: str
    group_id: str  # the config id (the run id without the seed): the schema's name for it
    status: Status
    error: str | None
    error_details: NotRequired[str]  # what the one-line error leaves out (e.g. the eigenvalues)
    config: dict[str, Any]
    code_version: str
    provenance: Provenance | None
    method_notes: dict[str, str]
    trajectory: list[dict[str, Any]]
    best_step: int | None
    best_stsb_dev: float | None
    final: dict[str, Any]
    wall_time_s: float
    train_time_s: float
    eval_time_s: float
    final_time_s: NotRequired[float]
    # the first step of each process that trained the run, compilation and warm-up (in train_time_s)
    first_step_s: NotRequired[float]
    final_seconds: NotRequired[dict[str, float]]  # the final pass per task group: {"sts": s, "transfer": s}
    peak_rss_mb: NotRequired[float]
    final_threads: NotRequired[int]
    started_at: str
    finished_at: str | None
    host: str
    checkpoint: NotRequired[str]
    resumed_from_step: NotRequired[int]  # continued from a resume checkpoint (harness.run.checkpoint)
    # the step-0 dev evaluation came from the store's cache (harness.run.dev_cache; the key keeps its
    # first name)
    step0_probe_cached: NotRequired[bool]
    attempt: NotRequired[int]  # only in records/<run_id>.attempts/<n>.json (harness.store)


def new_record(config: RunConfig) -> RunRecord:
    """A fresh ``running`` record for ``config`` (every schema key present)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": config.run_id(),
        "group_id": config.config_id(),
        "status": "running",
        "error": None,
        "config": config.to_dict(),
        "code_version": code_version(),
        "provenance": None,
        "method_notes": {},
        "trajectory": [],
        "best_step": None,
        "best_stsb_dev": None,
        "final": {},
        "wall_time_s": 0.0,
        "train_time_s": 0.0,
        "eval_time_s": 0.0,
        "started_at": now_iso(),
        "finished_at": None,
        "host": socket.gethostname(),
    }


TASK_GROUPS: tuple[str, ...] = ("sts", "transfer")
"""The score groups whose ``avg`` covers a set of tasks (``final.<group>`` and ``final.<group>_tasks``)."""


def record_tasks(record: Mapping[str, Any], group: str) -> tuple[str, ...]:
    """The tasks ``final.<group>`` (``"sts"`` or ``"transfer"``) and its ``avg`` cover.

    ``final.<group>_tasks`` when the record says; a record written before that field existed covers
    the seven standard tasks of the group.
    """
    final = record.get("final") or {}
    stated = final.get(f"{group}_tasks") if isinstance(final, Mapping) else None
    if isinstance(stated, list | tuple):
        return tuple(str(t) for t in stated)
    return LEGACY_STS_TASKS if group == "sts" else LEGACY_TRANSFER_TASKS


def covers_registered_tasks(record: Mapping[str, Any], group: str) -> bool:
    """Whether the record's ``group`` scores cover exactly the tasks registered now (a table cell and
    a grid only use such records: an ``avg`` over other tasks is another number)."""
    return set(record_tasks(record, group)) == set(task_names(group))


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def record_metric(
    record: Mapping[str, Any], scores: str, column: str, aggregate: str = "all"
) -> float | None:
    """One number of a record: ``best_stsb_dev`` (``scores="stsb_dev"``) or ``final[scores][column]``.

    ``None`` when the record's ``scores`` cover other tasks than the registered ones
    (:func:`covers_registered_tasks`), so numbers over different task sets never share a cell.

    ``aggregate`` picks STS12-16's SentEval aggregate (all/mean/wmean).

    ``final.sts`` holds "all"; the others come from ``final.sts_aggregates[year][aggregate]``, and
    the ``avg`` column is then recomputed the table's way (mean of the numbers rounded to 2 decimals).
    """
    if scores == "stsb_dev":
        return _finite(record.get("best_stsb_dev"))
    if scores in TASK_GROUPS and not covers_registered_tasks(record, scores):
        return None
    final = record.get("final") or {}
    if scores == "sts" and aggregate != "all":
        if column in year_task_names():
            return _finite(((final.get("sts_aggregates") or {}).get(column) or {}).get(aggregate))
        if column == "avg":
            tasks = [t for t in (final.get("sts") or {}) if t != "avg"]
            values = [record_metric(record, scores, t, aggregate) for t in tasks]
            if not values or any(v is None for v in values):
                return None
            return statistics.fmean(round(v, 2) for v in values if v is not None)
    return _finite((final.get(scores) or {}).get(column))


# -- validation on load ----------------------------------------------------------------------------
_NUMBER = "number"
_FIELD_TYPES: dict[str, tuple[str, ...]] = {
    "schema_version": ("int",),
    "group_id": ("str",),
    "error": ("str", "null"),
    "error_details": ("str",),
    "code_version": ("str",),
    "provenance": ("object", "null"),
    "method_notes": ("object",),
    "trajectory": ("list",),
    "best_step": ("int", "null"),
    "best_stsb_dev": (_NUMBER, "null"),
    "final": ("object",),
    "wall_time_s": (_NUMBER, "null"),
    "train_time_s": (_NUMBER, "null"),
    "eval_time_s": (_NUMBER, "null"),
    "final_time_s": (_NUMBER, "null"),
    "first_step_s": (_NUMBER, "null"),
    "final_seconds": ("object",),
    "peak_rss_mb": (_NUMBER, "null"),
    "final_threads": ("int",),
    "started_at": ("str",),
    "finished_at": ("str", "null"),
    "host": ("str",),
    "checkpoint": ("str",),
    "resumed_from_step": ("int",),
    "step0_probe_cached": ("bool",),
    "attempt": ("int",),
}
"""The JSON type of each field of :class:`RunRecord` (besides ``run_id``, ``status`` and ``config``,
without which a record is not read at all). ``number`` fields may be null: the store writes a
NaN or an infinity as null."""

_BLANK: dict[str, Any] = {"final": {}, "trajectory": [], "method_notes": {}, "provenance": None}
"""What a field of the wrong type becomes: these stay present (empty), any other is removed."""


def _is(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, list)
    return isinstance(value, dict)  # "object"


def _type_name(value: Any) -> str:
    names = {bool: "bool", int: "int", float: "number", str: "str", list: "list", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _numbers(scores: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """``scores`` without its entries that are not a number or null (each named in ``problems``)."""
    kept = {}
    for key, value in scores.items():
        if value is None or _is(value, _NUMBER):
            kept[key] = value
        else:
            problems.append(f"{where}.{key} (a {_type_name(value)}, not a number)")
    return kept


def _check_final(final: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """``final`` with its score groups, task lists and aggregates checked."""
    out = dict(final)
    for key, value in final.items():
        where = f"final.{key}"
        if key in ("sts", "transfer", "sts_aggregates") and not isinstance(value, dict):
            problems.append(f"{where} (a {_type_name(value)}, not an object)")
            del out[key]
        elif key in ("sts", "transfer"):
            out[key] = _numbers(value, where, problems)
        elif key == "sts_aggregates":
            out[key] = {}
            for year, numbers in value.items():
                if isinstance(numbers, dict):
                    out[key][year] = _numbers(numbers, f"{where}.{year}", problems)
                else:
                    problems.append(f"{where}.{year} (a {_type_name(numbers)}, not an object)")
        elif key.endswith("_tasks") and not (
            isinstance(value, list) and all(isinstance(t, str) for t in value)
        ):
            problems.append(f"{where} (not a list of task names)")
            del out[key]
    return out


def _check_trajectory(points: list[Any], problems: list[str]) -> list[dict[str, Any]]:
    """The points that are objects with an integer step; their other values numbers or null."""
    kept = []
    for i, point in enumerate(points):
        if not isinstance(point, dict) or not _is(point.get("step"), "int"):
            problems.append(f"trajectory[{i}] (not a point with an integer step)")
            continue
        kept.append(_numbers(point, f"trajectory[{i}]", problems))
    return kept


def check_record(data: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """Validate a record read from disk against :class:`RunRecord` (reporting reads it typed).

    A field of the wrong type is dropped (``final``, ``trajectory``, ``method_notes`` and
    ``provenance`` become empty); a score, aggregate or trajectory value that is not a number is
    dropped alone. A record whose ``status`` is not one of :data:`STATUSES`, that has no ``config``
    object, or that holds a NaN or an infinity anywhere (the store writes them as null, so one was
    put there by hand, and a table or a grid must not take it for a score) cannot be used: None.

    Returns:
        The record to use (``data`` itself when nothing is wrong) or None, and what was wrong: one
        ``field (why)`` per problem, e.g. ``final.sts (a str, not an object)``.
    """
    problems: list[str] = []
    status = data.get("status", "running")
    if status not in STATUSES:
        return None, [f"status ({status!r} is not one of {', '.join(STATUSES)})"]
    if "config" not in data:
        return None, ["config (missing: the record says nothing of the run it scores)"]
    if not isinstance(data["config"], dict):
        return None, [f"config (a {_type_name(data['config'])}, not an object)"]
    bad = _non_finite(data, "")
    if bad is not None:
        where, value = bad
        return None, [f"{where} ({value}, not a finite number)"]
    out = dict(data)
    for key, kinds in _FIELD_TYPES.items():
        if key not in data:
            continue
        value = data[key]
        if not any(_is(value, kind) for kind in kinds):
            problems.append(f"{key} (a {_type_name(value)}, not {' or '.join(kinds)})")
            if key in _BLANK:
                out[key] = _BLANK[key]
            else:
                del out[key]
        elif key == "final":
            out[key] = _check_final(value, problems)
        elif key == "trajectory":
            out[key] = _check_trajectory(value, problems)
        elif key == "final_seconds":
            out[key] = _numbers(value, key, problems)
    return (out if problems else data), problems


def _non_finite(value: Any, where: str) -> tuple[str, float] | None:
    """The first NaN or infinity in ``value`` (JSON as Python's reader takes it) and where it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        inner = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else str(key)
        found = _non_finite(item, inner)
        if found is not None:
            return found
    return None


def provenance(device: str, threads: int) -> Provenance:
    """The provenance of a run on ``device`` with ``threads`` torch CPU threads."""
    import numpy
    import torch
    import transformers

    dev = torch.device(device)
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "device": str(dev),
        "device_name": gpu or cpu_model(),
        "cpu_model": cpu_model(),
        "cpu_id": cpu_id(),
        "cpu_native_bf16": cpu_native_bf16(),
        "gpu_name": gpu,
        "cuda": torch.version.cuda,
        "threads": int(threads),
        "code_version": code_version(),
        "code_dirty": code_dirty(),
        "host": socket.gethostname(),
    }


__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "Provenance",
    "RunRecord",
    "check_record",
    "covers_registered_tasks",
    "new_record",
    "provenance",
    "record_metric",
    "record_tasks",
]
