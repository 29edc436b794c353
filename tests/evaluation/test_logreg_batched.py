"""The batched classifier fits (the final transfer evaluation on a GPU), run here on the CPU: each fit
follows fit_fast's protocol and lands on its numbers to within float rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.evaluation.logreg import PARAMETER_SETS, ClassifierConfig, fit_fast
from harness.evaluation.logreg_batched import BatchedFit, fit_batched
from tests.helpers import blobs

pytestmark = pytest.mark.usefixtures("single_thread")


def _fits(n: int) -> tuple[np.ndarray, np.ndarray, list[BatchedFit]]:
    """Fits of several sizes (short last minibatches of different lengths), with and without
    validation rows, with and without scoring rows, of 2 and 3 classes, over one feature matrix."""
    x2, y2 = blobs(n, 10, 2, seed=3, noise=2.5)
    x3, y3 = blobs(n, 10, 3, seed=4, noise=2.5)
    x, y = np.concatenate([x2, x3]).astype(np.float32), np.concatenate([y2, y3])
    rows2, rows3 = np.arange(n), n + np.arange(n)
    fits = [
        BatchedFit(rows2[: n - 40], rows2[n - 40 :], None, 2, 1e-5),
        BatchedFit(rows2[: n - 41], rows2[n - 41 :], None, 2, 1e-2),
        BatchedFit(rows2[: n - 30], None, rows2[n - 30 :], 2, 1e-3),
        BatchedFit(rows2[: n - 30], None, rows2[n - 30 :], 2, 1e-4),  # the same stream as the one before
        BatchedFit(rows3[: n - 70], rows3[n - 70 : n - 35], rows3[n - 35 :], 3, 1e-4),
        BatchedFit(rows3[17:], None, rows3[:17], 3, 1e-5),
    ]
    return x, y, fits


@pytest.mark.parametrize("mode", ["fasttest", "test"])
def test_each_fit_matches_fit_fast(mode: str) -> None:
    config = PARAMETER_SETS[mode]
    x, y, fits = _fits(300)
    got = fit_batched(torch.from_numpy(x), torch.from_numpy(y), fits, config)
    for fit, result in zip(fits, got, strict=True):
        valid = (x[fit.valid], y[fit.valid]) if fit.valid is not None else None
        score = (x[fit.score], y[fit.score]) if fit.score is not None else None
        want = fit_fast(x[fit.train], y[fit.train], fit.nclasses, fit.l2, config, valid, score)
        assert result.epochs == want.epochs
        assert result.best_valid == pytest.approx(want.best_valid, abs=1e-12)
        if want.score is None:
            assert result.score is None
        else:
            assert result.score == pytest.approx(want.score, abs=1e-12)


def test_stops_at_max_epoch_and_runs_on_one_fit() -> None:
    config = ClassifierConfig(optim="adam", batch_size=16, tenacity=1000, epoch_size=2, kfold=2, max_epoch=5)
    x, y, fits = _fits(120)
    steps: list[int] = []
    (got,) = fit_batched(torch.from_numpy(x), torch.from_numpy(y), fits[:1], config, steps)
    fit = fits[0]
    assert fit.valid is not None
    # every pass is ceil(rows / batch) minibatch steps, one after another: the count a GPU pays for
    assert steps == [-(-len(fit.train) // config.batch_size) * got.epochs]
    want = fit_fast(x[fit.train], y[fit.train], 2, fit.l2, config, (x[fit.valid], y[fit.valid]))
    assert got.epochs == want.epochs == 6
    assert got.best_valid == pytest.approx(want.best_valid, abs=1e-12)
    assert fit_batched(torch.from_numpy(x), torch.from_numpy(y), [], config) == []
