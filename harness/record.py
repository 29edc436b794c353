"""The run record: its typed shape, its schema version, and the provenance every record carries.

A record is JSON on disk (``runs/records/<run_id>.json``, written by :class:`harness.store.RunStore`)
and a :class:`RunRecord` in the program. Tables, plots and claims read only records.

Schema history:

* 1: the first layout.
* 2: adds ``provenance`` (library versions, device, CPU/GPU, CUDA, threads, dirty tree) and
  ``method_notes`` (what the method's parameters resolve to on the run's encoder, e.g. the
  whitening groups); ``config`` gains ``threads``. Later, still 2: the optional ``peak_rss_mb``
  (the run's peak resident memory, host side; see :mod:`harness.memory`).
"""

from __future__ import annotations

import math
import platform
import socket
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from harness.provenance import code_dirty, code_version, now_iso

if TYPE_CHECKING:
    from harness.config import RunConfig

SCHEMA_VERSION = 2
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


class RunRecord(TypedDict):
    """One run's record (see the module docstring for the schema history)."""

    schema_version: int
    run_id: str
    group_id: str
    status: Status
    error: str | None
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
    final_seconds: NotRequired[dict[str, float]]  # the final pass per task group: {"sts": s, "transfer": s}
    peak_rss_mb: NotRequired[float]
    started_at: str
    finished_at: str | None
    host: str
    checkpoint: NotRequired[str]
    resumed_from_step: NotRequired[int]  # continued from a resume checkpoint (harness.checkpoint)
    # the step-0 probe came from the store's cache (harness.probe_cache)
    step0_probe_cached: NotRequired[bool]
    attempt: NotRequired[int]  # only in records/<run_id>.attempts/<n>.json (harness.store)


def new_record(config: RunConfig) -> RunRecord:
    """A fresh ``running`` record for ``config`` (every schema key present)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": config.run_id(),
        "group_id": config.group_id(),
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


STS_YEAR_COLUMNS: tuple[str, ...] = ("STS12", "STS13", "STS14", "STS15", "STS16")


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def record_metric(
    record: Mapping[str, Any], scores: str, column: str, aggregate: str = "all"
) -> float | None:
    """One number of a record: ``best_stsb_dev`` (``scores="stsb_dev"``) or ``final[scores][column]``.

    ``aggregate`` picks STS12-16's SentEval aggregate (all/mean/wmean).

    ``final.sts`` holds "all"; the others come from ``final.sts_aggregates[year][aggregate]``, and
    the ``avg`` column is then recomputed the table's way (mean of the numbers rounded to 2 decimals).
    """
    if scores == "stsb_dev":
        return _finite(record.get("best_stsb_dev"))
    final = record.get("final") or {}
    if scores == "sts" and aggregate != "all":
        if column in STS_YEAR_COLUMNS:
            return _finite(((final.get("sts_aggregates") or {}).get(column) or {}).get(aggregate))
        if column == "avg":
            tasks = [t for t in (final.get("sts") or {}) if t != "avg"]
            values = [record_metric(record, scores, t, aggregate) for t in tasks]
            if not values or any(v is None for v in values):
                return None
            return statistics.fmean(round(v, 2) for v in values if v is not None)
    return _finite((final.get(scores) or {}).get(column))


def provenance(device: str, threads: int) -> Provenance:
    """The provenance of a run on ``device`` with ``threads`` torch CPU threads."""
    import numpy
    import torch
    import transformers

    from harness.hardware import cpu_id, cpu_model, cpu_native_bf16

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
    "new_record",
    "provenance",
    "record_metric",
]
