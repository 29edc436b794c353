"""Calibration files: unit costs measured on a device by ``benchmarks/gpu_check.py``, read by the
grid's cost model (:class:`harness.grid.cost.CostModel`) before its built-in table.

A file lives in ``<runs>/calibration/`` and says, for one device, encoder class and precision, what a
training step (per two encoder rows, as SimCSE's), a dev probe and the final STS pass took, and how
trials sharing the device slowed down. The grid's own finished records of the same setting still
calibrate first: they are the runs themselves.
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


def calibration_name(calibration: Mapping[str, Any]) -> str:
    """``<device>-<device name>-<encoder>-<precision>.json``, the name in safe characters."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", str(calibration.get("device_name", ""))).strip("-").lower()
    return f"{calibration['device']}-{name}-{calibration['encoder']}-{calibration['precision']}.json"


def _valid(data: Any) -> bool:
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return False
    numbers = [data.get("step_s"), data.get("probe_s"), *dict(data.get("sts_s") or {}).values()]
    return all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in numbers) and all(
        isinstance(data.get(k), str) for k in ("device", "encoder", "precision")
    )


def load_calibrations(runs_dir: str | Path) -> list[dict[str, Any]]:
    """Every readable calibration file of a runs folder (an unreadable one: one warning, skipped)."""
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
        if not _valid(data):
            warnings.warn(
                f"calibration file {path}: not a harness calibration; skipped", RuntimeWarning, stacklevel=2
            )
            continue
        found.append(data)
    return found
