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
def cpu_id() -> str:
    """The CPU's family, model and stepping numbers (``/proc/cpuinfo``), e.g. ``family 25 model 17
    stepping 1``; empty where they are not listed.

    Virtual machines here report the model name as plain "AMD EPYC" whatever the generation, yet two
    generations differ in what a benchmark measures (a CPU with full-width AVX-512 units ran bf16
    matmul at 867 GFLOPS on 2 threads, one that splits them at ~410): records and benchmarks print
    this beside the name so that a timing can be traced to the processor that gave it.
    """
    fields: dict[str, str] = {}
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("cpu family", "model", "stepping") and key not in fields:
            fields[key] = value.strip()
        elif not key and fields:
            break  # the first processor's block ends at its blank line
    names = (("cpu family", "family"), ("model", "model"), ("stepping", "stepping"))
    return " ".join(f"{short} {fields[key]}" for key, short in names if key in fields)


def cpu_description() -> str:
    """Model name and, where listed, family/model/stepping: ``AMD EPYC (family 25 model 17 stepping 1)``."""
    ident = cpu_id()
    return f"{cpu_model()} ({ident})" if ident else cpu_model()


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


__all__ = [
    "NATIVE_BF16_FLAGS",
    "auto_precision",
    "cpu_description",
    "cpu_flags",
    "cpu_id",
    "cpu_model",
    "cpu_native_bf16",
]
