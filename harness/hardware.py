"""What this machine's processor can do, read once: model name, instruction-set flags, native bf16.

Used to resolve ``precision = "auto"`` (profiles ``cpu`` and ``demo``) and for each record's
provenance. Reading flags, not timing a matmul, keeps the resolution deterministic on a loaded machine:
the precision is part of a run's id, so it must not depend on how busy the machine was.
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path

NATIVE_BF16_FLAGS: frozenset[str] = frozenset({"avx512_bf16", "amx_bf16"})
"""x86 flags of native bf16 matrix arithmetic (AVX512-BF16 dot products, AMX tiles). Without them
oneDNN emulates bf16, which on the machines seen here was ~100x slower than fp32, not faster."""


@functools.cache
def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    for line in _cpuinfo().splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The first processor's flags from ``/proc/cpuinfo`` (empty where there is none)."""
    for line in _cpuinfo().splitlines():
        if line.lower().startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_native_bf16() -> bool:
    """True when the CPU advertises native bf16 arithmetic (see :data:`NATIVE_BF16_FLAGS`)."""
    return bool(cpu_flags() & NATIVE_BF16_FLAGS)


def auto_precision() -> str:
    """``bf16`` where training would run on hardware with native bf16, else ``fp32``.

    The device is the one a run picks by default: the first CUDA GPU if there is one (bf16 when it
    supports it), else this CPU (bf16 with AVX512-BF16 or AMX). A grid resolves this once, on the
    machine that plans it; a Ray worker of another kind that gets a bf16 run without native bf16
    says so in its log (see :func:`harness.train.cpu_bf16_slowdown`).
    """
    import torch

    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_native_bf16() else "fp32"


__all__ = ["NATIVE_BF16_FLAGS", "auto_precision", "cpu_flags", "cpu_model", "cpu_native_bf16"]
