"""The transfer classifiers' device engine: every fit of a stage at once, within 0.1 of the CPU path."""

from __future__ import annotations

import pytest

from harness.evaluation.transfer import classify_tasks
from harness.evaluation.transfer_protocol import TaskFeatures, TransferTiming
from tests.evaluation.test_transfer_protocol import synthetic_features
from tests.helpers import blobs

pytestmark = pytest.mark.usefixtures("single_thread")
"""Fits on tiny tensors are latency-bound: OpenMP hand-offs only slow them (as in the evaluator)."""


@pytest.mark.parametrize("mode", ["fasttest", "test"])
def test_batched_on_the_device_equals_the_cpu_path(mode: str) -> None:
    """The device path (every fit of a stage at once, here on the CPU) scores each task within 0.1 of
    the CPU path, through the same folds, seeds and model selection; a wider feature (MRPC's
    [|u - v|, u * v]) goes in a group of its own."""
    feats = synthetic_features()
    p_tr, p_ytr = blobs(180, 16, 2, seed=9, noise=4.0)
    p_te, p_yte = blobs(80, 16, 2, seed=9, noise=4.0)
    feats["MRPC"] = TaskFeatures("MRPC", 2, {"train": (p_tr, p_ytr), "test": (p_te, p_yte)})
    if mode == "test":  # 10-fold nested k-fold is 400 fits: the CPU path alone takes minutes here
        del feats["MR"]
    cpu = classify_tasks(feats, mode=mode, workers=1)
    timing = TransferTiming()
    on_device = classify_tasks(feats, mode=mode, device="cpu", engine="batched", timing=timing)
    assert list(on_device) == list(cpu)
    for task, accuracy in cpu.items():
        assert on_device[task] == pytest.approx(accuracy, abs=0.1), task
    assert set(timing.finished_at) == set(feats)
    assert len(timing.steps) == 4 and min(timing.steps) > 0  # two widths, each selection then refits
