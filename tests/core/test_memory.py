"""The per-run peak memory in records (harness.run.process_memory) and the estimate a grid trial asks
Ray for (harness.grid.memory)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.config.run_config import RunConfig, resolve_config
from harness.grid import memory
from harness.run import process_memory

LINUX_PROC = Path("/proc/self/status").exists()
GB = 2**30


def _config(method: str, params: dict[str, object], **overrides: object) -> RunConfig:
    return resolve_config(method, params, "night", {"precision": "bf16", **overrides})


def test_the_estimate_covers_what_was_measured_and_grows_with_the_encoder_rows() -> None:
    simcse = _config("simcse", {})
    probe = _config("noise_probe", {"variant": "pos_minus_noise", "k_samples": 10})
    # measured (docs/speed.md, "Where the code's constants come from"): whole runs with the final STS
    # evaluation peaked at 2.36 GB for SimCSE, 2.48 GB with 3 encoder rows, 5.3 GB for the K = 10
    # probe; training alone at 5.52 GB for the K = 10 probe in fp32. The estimate must not be below
    # any of them.
    assert memory.estimate_bytes(simcse) >= 2.36 * GB
    assert memory.estimate_bytes(_config("whitenedcse", {"num_positives": 3})) >= 2.48 * GB
    assert memory.estimate_bytes(probe) >= 5.52 * GB
    assert memory.estimate_bytes(_config("noise_probe", {"variant": "pos_plus_noise"})) == (
        memory.estimate_bytes(simcse)
    )  # two rows, like SimCSE
    half = _config("simcse", {}, batch_size=32)
    assert memory.estimate_bytes(half) < memory.estimate_bytes(simcse)
    # two K = 10 probes fit in a 24 GB node's Ray budget (~17.5 GB), three do not
    assert 2 * memory.estimate_bytes(probe) < 17.5 * GB < 3 * memory.estimate_bytes(probe)
    # on a GPU the activations are not host memory
    assert memory.estimate_bytes(probe, "cuda") < memory.estimate_bytes(simcse)


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
