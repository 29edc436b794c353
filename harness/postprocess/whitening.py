"""BERT-whitening (Su et al. 2021, https://arxiv.org/abs/2103.15316): whitening fitted to a trained
encoder's embeddings and applied at evaluation, on NumPy arrays."""

from __future__ import annotations

from typing import Literal

import numpy as np

from harness.errors import ConfigError


def fit_post_whitening(
    x: np.ndarray, kind: Literal["zca", "pca"] = "zca", dim: int | None = None, *, eps: float = 1e-9
) -> tuple[np.ndarray, np.ndarray]:
    """Estimate BERT-whitening's mean and matrix on embeddings ``x: [n, d]``.

    The transform is ``(x - mu) @ W``. The covariance is the biased ``Xc^T Xc / n`` in float64 plus
    ``eps * I``; ``lambda, U = eigh(cov)`` sorted by decreasing eigenvalue. ``pca``:
    ``W = U diag(lambda^-1/2)`` (Su et al.'s kernel), truncated to the first ``dim`` columns when
    ``dim`` is given (dimension reduction). ``zca``: ``W = U diag(lambda^-1/2) U^T`` (``dim`` must
    be None: ZCA rotates back into all ``d`` channels).

    Returns:
        ``(mu [1, d], W [d, dim or d])``, both float64.
    """
    if kind not in ("zca", "pca"):
        raise ConfigError(f"kind must be 'zca' or 'pca', got {kind!r}")
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 2:
        raise ConfigError(f"post-whitening needs a [n >= 2, d] array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError("post-whitening got non-finite embeddings")
    d = arr.shape[1]
    if dim is not None and (kind == "zca" or not 1 <= dim <= d):
        raise ConfigError(f"dim={dim} is only valid with kind='pca' and 1 <= dim <= d={d}")
    mu = arr.mean(axis=0, keepdims=True)
    xc = arr - mu
    cov = xc.T @ xc / arr.shape[0] + eps * np.eye(d)
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    evals, evecs = evals[order], evecs[:, order]
    if not (np.isfinite(evals).all() and evals.min() > 0):
        raise ConfigError("post-whitening covariance is singular; raise eps or fit on more sentences")
    if kind == "pca":
        w = evecs / np.sqrt(evals)
        if dim is not None:
            w = w[:, :dim]
    else:
        w = (evecs / np.sqrt(evals)) @ evecs.T
    return mu, w


def apply_post_whitening(x: np.ndarray, mu: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``(x - mu) @ W`` computed in float64, returned as float32 ``[n, W.shape[1]]``."""
    out = (np.asarray(x, dtype=np.float64) - mu) @ w
    return out.astype(np.float32)
