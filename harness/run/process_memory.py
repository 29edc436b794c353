"""This process's memory: its peak resident set (kept in each record) and giving freed memory back."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import resource
import sys
from pathlib import Path


def _proc_status_kb(field: str) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def reset_peak() -> bool:
    """Start measuring this process's peak resident set afresh (Linux: ``/proc/self/clear_refs``).

    Returns False where that is not possible; :func:`peak_rss_bytes` then reports the process's
    peak since it started.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int | None:
    """The peak resident set of this process since it started or since :func:`reset_peak`."""
    kb = _proc_status_kb("VmHWM")
    if kb is not None:
        return kb * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024) if peak else None


def rss_bytes() -> int | None:
    """The resident set of this process now (Linux), else None: counted from the page tables
    (``/proc/self/smaps_rollup``) where the kernel has it, since ``VmRSS`` is a counter the kernel
    updates lazily (it read 300 MB high just after a thread freed that much)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/smaps_rollup").read_text(encoding="ascii").splitlines():
            if line.startswith("Rss:"):
                return int(line.split()[1]) * 1024
    kb = _proc_status_kb("VmRSS")
    return None if kb is None else kb * 1024


def release_freed() -> None:
    """Return memory that Python and the C allocator hold but no longer use to the system.

    glibc keeps freed memory in per-thread arenas; ``malloc_trim(0)`` gives back the free pages of
    all of them. Elsewhere only the garbage collector runs.
    """
    gc.collect()
    if not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("c")
    if not name:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name).malloc_trim(0)
