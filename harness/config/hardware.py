"""What this machine's processor can do, read once: model name, instruction-set flags, native bf16.

Used to resolve ``precision = "auto"`` (profiles ``cpu``, ``demo`` and ``night``) on the run's
device, to refuse an arithmetic the device cannot compute before a run, and for each record's
provenance. Reading flags, not timing a matmul, keeps the resolution deterministic on a loaded machine:
the precision is part of a run's id, so it must not depend on how busy the machine was.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Iterator, Mapping
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


def default_device() -> str:
    """The device a run takes when none is given: ``cuda`` where torch sees a CUDA GPU, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def native_bf16(device: str | None = None) -> bool:
    """Whether ``device`` (default: :func:`default_device`) computes bf16 natively.

    A CUDA GPU: what autocast itself asks (``torch.cuda.is_bf16_supported`` of that GPU), so a GPU
    without it is refused before a run rather than by autocast at its first step. A CPU: AVX512-BF16
    or AMX (:func:`cpu_native_bf16`). Any other device (``mps``): no.
    """
    dev = torch.device(device if device is not None else default_device())
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return False
        if dev.index is None:  # the current GPU, as autocast asks
            return bool(torch.cuda.is_bf16_supported())
        with torch.cuda.device(dev.index):
            return bool(torch.cuda.is_bf16_supported())
    return dev.type == "cpu" and cpu_native_bf16()


def auto_precision(device: str | None = None) -> str:
    """``bf16`` where the run's device has native bf16 (:func:`native_bf16`), else ``fp32``.

    ``device`` is the run's (``harness train --device``); None = the device a run picks by default
    (the first CUDA GPU if there is one, else this CPU). A grid resolves this once, on the machine
    that plans it; a Ray worker of another kind that gets a bf16 run without native bf16 says so in
    its log (see :func:`harness.run.hooks.cpu_bf16_slowdown`).
    """
    return "bf16" if native_bf16(device) else "fp32"


def compile_problem(device: str) -> str | None:
    """Why ``torch.compile`` cannot build a training step on ``device`` here, or None: on a CUDA GPU it
    needs Triton, on the CPU a C++ compiler (inductor's code generators); elsewhere it is not
    judged here."""
    kind = torch.device(device).type
    try:  # torch's own private helpers: a torch without them is not judged here (the run will say)
        from torch._inductor.cpp_builder import get_cpp_compiler
        from torch.utils._triton import has_triton
    except ImportError:
        return None
    if kind == "cuda":
        return None if has_triton() else "torch.compile on a CUDA GPU needs Triton, not installed here"
    if kind == "cpu":
        try:
            get_cpp_compiler()
        except Exception:  # inductor raises its own error types when no compiler is found
            return "torch.compile on the CPU needs a C++ compiler (g++, clang++ or $CXX), and none was found"
    return None


def arithmetic_problems(device: str, precisions: Mapping[str, str], compile: bool | None) -> list[str]:
    """What ``device`` cannot compute of a run: each precision (``{name: value}``, e.g. ``{"precision":
    "bf16"}``) that is bf16 on a CUDA GPU without bf16, and the compiled step (``compile``: on, off,
    None = on a CUDA GPU only, as the run decides) where :func:`compile_problem` says it cannot be
    built. One line each."""
    dev = torch.device(device)
    problems = [
        f"{name} bf16 on {device}: this CUDA GPU has no bf16 (torch.cuda.is_bf16_supported() is False, "
        f"so autocast refuses it); set {name} to fp16 or fp32"
        for name, value in precisions.items()
        if value == "bf16" and dev.type == "cuda" and not native_bf16(device)
    ]
    compiled = compile if compile is not None else dev.type == "cuda"
    why = compile_problem(device) if compiled else None
    if why is not None:
        asked = "--compile on" if compile else "--compile auto (on a GPU)"
        problems.append(f"{asked}: {why}; use --compile off")
    return problems


__all__ = [
    "NATIVE_BF16_FLAGS",
    "arithmetic_problems",
    "auto_precision",
    "compile_problem",
    "cpu_description",
    "cpu_flags",
    "cpu_id",
    "cpu_model",
    "cpu_native_bf16",
    "default_device",
    "native_bf16",
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
