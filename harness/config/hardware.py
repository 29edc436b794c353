"""What this machine's processor can do, read once: model name, instruction-set flags, native bf16.

Used to resolve ``precision = "auto"`` (profiles ``cpu`` and ``demo``) and for each record's
provenance. Reading flags, not timing a matmul, keeps the resolution deterministic on a loaded machine:
the precision is part of a run's id, so it must not depend on how busy the machine was.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Iterator
from pathlib import Path

import torch

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
    """The first processor's identity numbers from ``/proc/cpuinfo``: on x86 ``family 25 model 17
    stepping 1``, on ARM ``implementer 0x41 part 0xd0c variant 0x3 revision 1``; empty where they are
    not listed.

    Virtual machines here report the model name as plain "AMD EPYC" whatever the generation, yet two
    generations differ in what a benchmark measures (one with full-width AVX-512 units ran bf16
    matmul about twice as fast as one that splits them; docs/speed.md, "Processors"): records and
    benchmarks print
    this beside the name so that a timing can be traced to the processor that gave it, and the cost
    model calibrates from the records of this processor where it has some.
    """
    first: dict[str, str] = {}
    for line in _cpuinfo().splitlines():
        if not line.strip():
            if first:
                break  # the first processor's block ends at its blank line
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())  # exact keys: "model name" and "Model" differ
    layouts = (
        (("cpu family", "family"), ("model", "model"), ("stepping", "stepping")),
        (
            ("CPU implementer", "implementer"),
            ("CPU part", "part"),
            ("CPU variant", "variant"),
            ("CPU revision", "revision"),
        ),
    )
    for names in layouts:
        if names[0][0] in first:
            return " ".join(f"{short} {first[key]}" for key, short in names if key in first)
    return ""


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
    says so in its log (see :func:`harness.run.hooks.cpu_bf16_slowdown`).
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


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` (None: left alone), restored afterwards."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if count is not None:
            torch.set_num_threads(before)
