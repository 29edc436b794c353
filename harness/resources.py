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


RESERVED_RESOURCES = frozenset({"cpu", "gpu", "memory", "object_store_memory"})


def parse_trial_resources(items: list[str] | None) -> dict[str, float]:
    """``--trial-resources NAME=N`` (repeatable): custom Ray resources every trial asks for.

    Raises:
        ConfigError: not ``NAME=N``, N not a finite number > 0, or a name the other options set.
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
        if name.lower() in RESERVED_RESOURCES:
            raise ConfigError(
                f"--trial-resources {name}: set CPUs and GPUs with --cpus-per-trial / --gpus-per-trial "
                "(memory is asked for by the grid itself)"
            )
        found[name] = amount
    return found


def check_max_failures(max_failures: int) -> None:
    """``--max-failures``: Tune's retries of a failed trial, 0..100."""
    if not 0 <= max_failures <= 100:
        raise ConfigError(f"--max-failures must be between 0 and 100, got {max_failures}")


def check_storage(storage: str | None) -> None:
    """``--storage``: a folder, or a URI whose filesystem pyarrow knows (s3://, gs://, ...)."""
    if storage is None or "://" not in storage:
        return
    from harness.relay import storage_filesystem

    try:
        storage_filesystem(storage)
    except Exception as exc:  # pyarrow's own errors: an unknown scheme, a missing bucket driver
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"--storage {storage}: pyarrow cannot open it ({first})") from None


__all__ = ["check_max_failures", "check_resource_request", "check_storage", "parse_trial_resources"]
