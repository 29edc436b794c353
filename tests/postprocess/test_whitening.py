"""BERT-whitening fitted after training (harness/postprocess/whitening.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.errors import ConfigError
from harness.postprocess.whitening import apply_post_whitening, fit_post_whitening


def correlated(seed: int, n: int, d: int) -> np.ndarray:
    """``n`` rows of ``d`` correlated, off-centre channels drawn from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    mix = torch.randn(d, d, generator=g, dtype=torch.float64)
    return (x @ mix + 3.0).numpy()


@pytest.mark.parametrize("kind", ["zca", "pca"])
def test_post_whitening_gives_identity_covariance(kind):
    x = correlated(15, 500, 8)
    mu, w = fit_post_whitening(x, kind)
    assert mu.dtype == np.float64 and w.dtype == np.float64 and w.shape == (8, 8)
    y = apply_post_whitening(x, mu, w)
    assert y.dtype == np.float32
    cov = np.cov(y.astype(np.float64).T, bias=True)
    np.testing.assert_allclose(cov, np.eye(8), atol=1e-4)
    if kind == "zca":
        np.testing.assert_allclose(w, w.T, atol=1e-10)


def test_post_whitening_pca_reduces_dimension():
    x = correlated(16, 300, 8)
    mu, w = fit_post_whitening(x, "pca", dim=3)
    y = apply_post_whitening(x, mu, w)
    assert y.shape == (300, 3)
    np.testing.assert_allclose(np.cov(y.astype(np.float64).T, bias=True), np.eye(3), atol=1e-4)
    with pytest.raises(ConfigError, match="dim"):
        fit_post_whitening(x, "zca", dim=3)
