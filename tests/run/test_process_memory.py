"""A run's peak resident memory is measured from a reset, and freed memory goes back to the system."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

LINUX_PROC = Path("/proc/self/status").exists()


def in_a_fresh_process(code: str, *args: str) -> list[int]:
    """The integers ``code`` prints, run by this Python in a new process from the repository root."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [int(x) for x in done.stdout.split()]


PEAK_AFTER_A_RESET = """
import numpy as np
from harness.run import process_memory

big = np.ones(40_000_000)  # 320 MB, touched
peak = process_memory.peak_rss_bytes()
del big
reset = process_memory.reset_peak()
print(peak, int(reset), process_memory.peak_rss_bytes())
"""


@pytest.mark.skipif(not LINUX_PROC, reason="needs /proc (Linux)")
def test_the_peak_is_measured_per_run_after_a_reset() -> None:
    # in a fresh process: in the suite's, earlier tests' threads move the resident size between
    # the reads (a full run here once read 3.26 GB, then 3.15 GB after the reset)
    peak, reset, after = in_a_fresh_process(PEAK_AFTER_A_RESET)
    assert peak > 300 * 2**20 and reset == 1
    assert after < peak - 250 * 2**20, (peak / 2**20, after / 2**20)


FREED_IN_A_THREAD = """
import sys, threading, torch
from harness.run import process_memory

kept = []

def work():
    tensors = [torch.ones(16_000) for _ in range(6_000)]  # 64 KB each, ~380 MB
    kept.extend(tensors[::100])  # a few live blocks across the arena: it cannot shrink from its top
    del tensors

thread = threading.Thread(target=work)
thread.start()
thread.join()
before = process_memory.rss_bytes()
if sys.argv[1] == "release":
    process_memory.release_freed()
print(before, process_memory.rss_bytes())
"""


def freed_in_a_thread(release: bool) -> tuple[int, int]:
    before, after = in_a_fresh_process(FREED_IN_A_THREAD, "release" if release else "keep")
    return before, after


@pytest.mark.skipif(not LINUX_PROC, reason="needs /proc (Linux)")
def test_memory_freed_in_another_thread_goes_back_to_the_system() -> None:
    # what a reused Ray worker does: the trial runs in a new thread, whose allocator arena keeps
    # the freed memory until it is trimmed (here: a few blocks stay live, as a trial's caches do). In
    # a fresh process: in the suite's, earlier tests' threads and arenas move the resident size.
    before, after = freed_in_a_thread(release=False)
    assert after > before - 50 * 2**20, (before / 2**20, after / 2**20)  # the allocator keeps it
    before, after = freed_in_a_thread(release=True)
    assert after < before - 200 * 2**20, (before / 2**20, after / 2**20)
