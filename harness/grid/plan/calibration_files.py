"""Calibration files: unit costs measured on a device by ``benchmarks/gpu_check.py``, read by the
grid's cost model (:class:`harness.grid.plan.cost.CostModel`) before its built-in table.

A file lives in ``<runs>/calibration/`` and says, for one device, encoder class and precision, what a
training step (per two encoder rows, as SimCSE's), an STS-B dev evaluation (``probe_s``: the key
keeps its first name) and the final STS pass took, and how trials sharing the device slowed down.
Version 2 adds, all optional: ``method_steps`` (each measured method's step and its encoder rows,
beside SimCSE's in the same conditions) and ``transfer_s`` (the final transfer tasks, keyed
``"<mode>/<eval precision>"``); a version 1 file reads as one without them, a newer version is
skipped with one line. The grid's own finished records of the same setting still calibrate first:
they are the runs themselves.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CALIBRATION_DIR = "calibration"
KIND = "harness-calibration"
VERSION = 2
"""The format written; files of this version or older are read."""


def calibration_name(calibration: Mapping[str, Any]) -> str:
    """``<device>-<device name>-<encoder>-<precision>.json``, the name in safe characters."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", str(calibration.get("device_name", ""))).strip("-").lower()
    return f"{calibration['device']}-{name}-{calibration['encoder']}-{calibration['precision']}.json"


def _positive(value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


def _valid(data: Any) -> bool:
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return False
    tables = [data.get(k) or {} for k in ("sts_s", "transfer_s", "trials_slowdown")]
    steps = data.get("method_steps") or {}
    if not all(isinstance(t, dict) for t in [*tables, steps]):
        return False
    numbers = [data.get("step_s"), data.get("probe_s"), *(v for t in tables for v in t.values())]
    for step in steps.values():
        numbers += [step.get("step_s"), step.get("rows")] if isinstance(step, dict) else [None]
    return all(_positive(v) for v in numbers) and all(
        isinstance(data.get(k), str) for k in ("device", "encoder", "precision")
    )


def load_calibrations(runs_dir: str | Path) -> list[dict[str, Any]]:
    """Every readable calibration file of a runs folder, each with its path under ``"file"`` (an
    unreadable one, or one of a newer version: one warning, skipped)."""
    folder = Path(runs_dir) / CALIBRATION_DIR
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            warnings.warn(
                f"calibration file {path}: unreadable ({exc}); skipped", RuntimeWarning, stacklevel=2
            )
            continue
        ours = isinstance(data, dict) and data.get("kind") == KIND
        version = data.get("version", 1) if ours else None
        if ours and not (isinstance(version, int) and 1 <= version <= VERSION):
            warnings.warn(
                f"calibration file {path}: format version {version!r}, this harness reads 1 to {VERSION}; "
                "skipped (run `make gpu-check` again)",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        if not _valid(data):
            warnings.warn(
                f"calibration file {path}: not a harness calibration; skipped", RuntimeWarning, stacklevel=2
            )
            continue
        found.append({**data, "file": str(path)})
    return found
