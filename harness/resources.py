"""Per-trial resource requests, checked before Ray starts (used by ``harness grid``, ``check`` and
:func:`harness.tune.run_trials`)."""

from __future__ import annotations

import math

from harness.errors import ConfigError


def check_resource_request(cpus_per_trial: int, gpus_per_trial: float | None) -> None:
    """Reject impossible per-trial resources before Ray starts (one line, exit 2)."""
    if cpus_per_trial < 1:
        raise ConfigError(f"--cpus-per-trial must be >= 1, got {cpus_per_trial}")
    if gpus_per_trial is not None and (not math.isfinite(gpus_per_trial) or gpus_per_trial < 0):
        raise ConfigError(f"--gpus-per-trial must be finite and >= 0, got {gpus_per_trial}")
    if gpus_per_trial is not None and gpus_per_trial > 1 and gpus_per_trial != int(gpus_per_trial):
        raise ConfigError(
            f"--gpus-per-trial must be a fraction <= 1 or a whole number of GPUs, got {gpus_per_trial}"
        )


__all__ = ["check_resource_request"]
