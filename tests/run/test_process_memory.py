"""A run's peak resident memory is measured from a reset, and freed memory goes back to the system."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.run import process_memory

LINUX_PROC = Path("/proc/self/status").exists()


@pytest.mark.skipif(not LINUX_PROC, reason="needs /proc (Linux)")
def test_the_peak_is_measured_per_run_after_a_reset() -> None:
    big = np.ones(40_000_000)  # 320 MB, touched
    peak = process_memory.peak_rss_bytes()
    del big
    assert peak is not None and peak > 300 * 2**20
    assert process_memory.reset_peak()
    after = process_memory.peak_rss_bytes()
    assert after is not None and after < peak - 250 * 2**20


@pytest.mark.skipif(not LINUX_PROC, reason="needs /proc (Linux)")
def test_memory_freed_in_another_thread_goes_back_to_the_system() -> None:
    # what a reused Ray worker does: the trial runs in a new thread, whose allocator arena keeps
    # the freed memory until it is trimmed
    def work() -> None:
        tensors = [torch.ones(16_000) for _ in range(6_000)]  # 64 KB each, ~380 MB
        del tensors

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    before = process_memory.rss_bytes()
    process_memory.release_freed()
    after = process_memory.rss_bytes()
    assert before is not None and after is not None
    assert after < before - 200 * 2**20, (before / 2**20, after / 2**20)
