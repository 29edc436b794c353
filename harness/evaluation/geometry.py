"""Alignment and uniformity (Wang and Isola, 2020) and the STS-B dev evaluation the training loop
calls.

* ``alignment(x, y) = mean_i ||x_i - y_i||^2`` on L2-normalised rows (positive pairs).
* ``uniformity(x) = log mean_{i<j} exp(-t ||x_i - x_j||^2)`` (t = 2) on L2-normalised rows, over
  the distinct pairs i < j, computed as a log-sum-exp so that it never under- or overflows.

:class:`StsbDevEval` is what model selection runs every N training steps (METHODS.md section 1):
Spearman of cosine on the STS-B dev split, alignment over the dev pairs with gold >= 4.0 and
uniformity over the dev sentences.

Choice made here: uniformity is taken over the UNIQUE dev sentences (after whitespace
normalisation), not over the 2 x 1500 sentence slots. Wang and Isola's ``pdist`` over a batch that
holds a sentence twice would count a pair at distance 0 that says nothing about how the encoder
spreads the data; dropping repeats makes "all distinct sentence pairs" literal. Each distinct
sentence is also embedded only once, which is what keeps the dev evaluation fast.

On an accelerator the dev evaluation stays on the device: the encoder hands over device tensors (no
read-back per batch), cosine, alignment and uniformity are computed there (:func:`cosine_scores_torch`,
:func:`alignment_torch`, :func:`uniformity_torch`, the same formulas in the same dtypes), and one copy
brings the similarities and the two numbers back for scipy's Spearman. On the CPU the encoder hands
over NumPy arrays and the NumPy functions below compute the numbers as they always have.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from scipy.special import logsumexp
from scipy.stats import spearmanr

from harness.errors import ConfigError
from harness.evaluation.sts import (
    BATCH_SIZE,
    LengthsFn,
    _checked,
    cosine_scores,
    distinct_by_length,
)
from harness.evaluation.tasks import STSB_DEV_EVAL, sts_task

DevEmbedFn = Callable[[list[str]], "np.ndarray | torch.Tensor"]
"""``embed(sentences) -> [n, d]`` float32: a NumPy array (scored with NumPy, on the host) or a tensor
(scored with torch where it lies, e.g. on the run's GPU)."""

POSITIVE_THRESHOLD = 4.0
"""STS-B gold score from which a dev pair counts as a positive pair for alignment (inclusive)."""

_EPS = 1e-12  # as torch.nn.functional.normalize


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows divided by ``max(||row||, 1e-12)``, in float64 (a zero row stays zero).

    Args:
        x: ``[n, d]``.

    Returns:
        ``[n, d]`` float64.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected an [n, d] array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, _EPS)


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ``||x_i - y_i||^alpha`` of L2-normalised positive pairs (lower = better aligned).

    Args:
        x: first members of the positive pairs ``[n, d]``.
        y: second members ``[n, d]``.
        alpha: the distance's exponent (Wang and Isola: 2).

    Returns:
        The alignment, in [0, 2^alpha].
    """
    xn, yn = l2_normalise(x), l2_normalise(y)
    if xn.shape != yn.shape:
        raise ValueError(f"alignment needs two arrays of one shape, got {xn.shape} and {yn.shape}")
    if xn.shape[0] == 0:
        raise ValueError("alignment of zero pairs is undefined")
    dist = np.linalg.norm(xn - yn, axis=1)
    return float(np.mean(dist**alpha))


def uniformity(x: np.ndarray, t: float = 2.0, block: int = 1024) -> float:
    """``log mean_{i<j} exp(-t ||x_i - x_j||^2)`` over L2-normalised rows (lower = more uniform).

    Squared distances come from the Gram matrix in float64, row block by row block (memory
    ``block x n``), and the mean of exponentials is a log-sum-exp minus ``log(n (n - 1) / 2)``.

    Args:
        x: ``[n, d]`` with n >= 2.
        t: the kernel's temperature (Wang and Isola: 2).
        block: rows per block.

    Returns:
        The uniformity, in [-4t, 0] for unit vectors.
    """
    xn = l2_normalise(x)
    n = xn.shape[0]
    if n < 2:
        raise ValueError(f"uniformity needs at least 2 rows, got {n}")
    sq = np.einsum("ij,ij->i", xn, xn)
    parts = []
    for start in range(0, n - 1, block):
        stop = min(start + block, n - 1)
        rows = np.arange(start, stop)
        # Pairs (i, j) with i in [start, stop) and j > i: columns start+1 .. n-1.
        cols = slice(start + 1, n)
        d2 = sq[start:stop, None] + sq[None, cols] - 2.0 * (xn[start:stop] @ xn[cols].T)
        np.maximum(d2, 0.0, out=d2)
        upper = np.arange(start + 1, n)[None, :] > rows[:, None]
        parts.append(logsumexp(-t * d2[upper]))
    n_pairs = n * (n - 1) / 2.0
    return float(logsumexp(np.array(parts)) - np.log(n_pairs))


def l2_normalise_torch(x: torch.Tensor) -> torch.Tensor:
    """:func:`l2_normalise` in torch, where ``x`` lies: rows over ``max(||row||, 1e-12)``, float64."""
    x = x.to(torch.float64)
    if x.ndim != 2:
        raise ValueError(f"expected an [n, d] tensor, got shape {tuple(x.shape)}")
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min(_EPS)


def alignment_torch(x: torch.Tensor, y: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    """:func:`alignment` in torch, where the tensors lie: a float64 scalar tensor (no read-back)."""
    xn, yn = l2_normalise_torch(x), l2_normalise_torch(y)
    if xn.shape != yn.shape:
        raise ValueError(
            f"alignment needs two tensors of one shape, got {tuple(xn.shape)} and {tuple(yn.shape)}"
        )
    if xn.shape[0] == 0:
        raise ValueError("alignment of zero pairs is undefined")
    return torch.linalg.vector_norm(xn - yn, dim=1).pow(alpha).mean()


def uniformity_torch(x: torch.Tensor, t: float = 2.0, block: int = 1024) -> torch.Tensor:
    """:func:`uniformity` in torch, where ``x`` lies: a float64 scalar tensor (no read-back).

    The same Gram-matrix blocks in float64; the pairs j <= i of a block enter the log-sum-exp as
    ``-inf`` (exp = 0) rather than being selected, which would read their count back to the host.
    """
    xn = l2_normalise_torch(x)
    n = xn.shape[0]
    if n < 2:
        raise ValueError(f"uniformity needs at least 2 rows, got {n}")
    sq = (xn * xn).sum(dim=1)
    columns = torch.arange(n, device=xn.device)
    parts = []
    for start in range(0, n - 1, block):
        stop = min(start + block, n - 1)
        d2 = sq[start:stop, None] + sq[None, start + 1 :] - 2.0 * (xn[start:stop] @ xn[start + 1 :].T)
        d2.clamp_(min=0.0)
        upper = columns[None, start + 1 :] > columns[start:stop, None]
        exponents = torch.where(upper, -t * d2, torch.tensor(-math.inf, dtype=d2.dtype, device=d2.device))
        parts.append(torch.logsumexp(exponents.reshape(-1), dim=0))
    return torch.logsumexp(torch.stack(parts), dim=0) - math.log(n * (n - 1) / 2.0)


def cosine_scores_torch(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """:func:`~harness.evaluation.sts.cosine_scores` in torch, where the tensors lie: per row
    ``nan_to_num(dot(a, b) / (sqrt(dot(a, a)) * sqrt(dot(b, b))))`` on ``nan_to_num``'d rows, in their
    dtype (float32), so a zero vector scores 0."""
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(
            f"cosine_scores needs two [n, d] tensors of one shape, got {tuple(u.shape)} and {tuple(v.shape)}"
        )
    u, v = torch.nan_to_num(u), torch.nan_to_num(v)
    dots = (u * v).sum(dim=1)
    norms = (u * u).sum(dim=1).sqrt() * (v * v).sum(dim=1).sqrt()
    return torch.nan_to_num(dots / norms)


class StsbDevEval:
    """STS-B dev Spearman, alignment and uniformity of an encoder, for use during training.

    The dev split is read once, here; each call embeds each distinct dev sentence once, in
    length-sorted batches, and scores pairs by lookup.

    Args:
        senteval_path: the SentEval folder (``<data root>/senteval``).
        threshold: gold score from which a pair is positive for alignment (inclusive; default 4.0).
        batch_size: sentences per encoder call.
        token_lengths: token counts of a list of sentences (the encoder's tokenizer), used once
            here to sort the dev sentences into batches of similar length; ``None`` = characters.

    Raises:
        DataError: the STS-B dev file is missing or malformed.
        ValueError: no dev pair reaches the threshold.
    """

    def __init__(
        self,
        senteval_path: Path,
        threshold: float = POSITIVE_THRESHOLD,
        batch_size: int = BATCH_SIZE,
        token_lengths: LengthsFn | None = None,
    ) -> None:
        task, split = STSB_DEV_EVAL
        self.pairs = sts_task(task).read(senteval_path, (split,))[split]
        self.threshold = threshold
        self.batch_size = batch_size
        self.positive = self.pairs.gold >= threshold
        if not self.positive.any():
            raise ValueError(f"no STS-B dev pair has gold >= {threshold}")
        # Distinct sentences, already in embedding order (so each call sorts nothing).
        self.sentences = distinct_by_length((*self.pairs.sent1, *self.pairs.sent2), token_lengths)
        index = {s: i for i, s in enumerate(self.sentences)}
        self._rows1 = np.array([index[s] for s in self.pairs.sent1], dtype=np.int64)
        self._rows2 = np.array([index[s] for s in self.pairs.sent2], dtype=np.int64)

    def cache_token(self) -> str:
        """sha256 of everything this dev evaluation computes from besides the encoder: the dev
        sentences in embedding order, the pairs' rows and gold scores, the threshold and the batch size
        (the step-0 dev evaluation cache keys on it, :mod:`harness.run.dev_cache`)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.threshold, self.batch_size, list(self.sentences)]).encode())
        for array in (self._rows1, self._rows2, np.asarray(self.pairs.gold, dtype=np.float64)):
            h.update(np.ascontiguousarray(array).tobytes())
        return h.hexdigest()

    def __call__(self, embed: DevEmbedFn) -> dict[str, float]:
        """Evaluate an encoder on STS-B dev.

        Args:
            embed: the encoder, ``list[str]`` of length n -> ``[n, d]`` (eval mode is its business):
                NumPy arrays are scored on the host, tensors where they lie (:meth:`scores_torch`).

        Returns:
            ``{"stsb_dev": Spearman x 100, "align": alignment of gold >= threshold pairs,
            "uniform": uniformity of the distinct dev sentences}``.
        """
        outputs = []
        for start in range(0, len(self.sentences), self.batch_size):
            batch = list(self.sentences[start : start + self.batch_size])
            outputs.append((embed(batch), len(batch)))
        if all(isinstance(out, torch.Tensor) for out, _ in outputs):
            tensors = [_checked_tensor(out, n) for out, n in outputs]  # type: ignore[arg-type]
            return self.scores_torch(torch.cat(tensors))
        return self.scores(np.concatenate([_checked(out, n) for out, n in outputs]))  # type: ignore[arg-type]

    def scores(self, emb: np.ndarray) -> dict[str, float]:
        """The dev evaluation's numbers from the embeddings of :attr:`sentences` (in that order), with
        NumPy."""
        e1, e2 = emb[self._rows1], emb[self._rows2]
        scores = cosine_scores(e1, e2)
        return {
            "stsb_dev": 100.0 * float(spearmanr(scores, self.pairs.gold)[0]),
            "align": alignment(e1[self.positive], e2[self.positive]),
            "uniform": uniformity(emb),
        }

    def scores_torch(self, emb: torch.Tensor) -> dict[str, float]:
        """:meth:`scores` with the embeddings left where they lie (the run's device): similarities,
        alignment and uniformity computed there, then one copy to the host for scipy's Spearman."""
        rows1, rows2, pos1, pos2 = (
            torch.from_numpy(a).to(emb.device)
            for a in (self._rows1, self._rows2, self._rows1[self.positive], self._rows2[self.positive])
        )
        e1, e2 = emb.index_select(0, rows1), emb.index_select(0, rows2)
        cosines = cosine_scores_torch(e1, e2)
        align = alignment_torch(emb.index_select(0, pos1), emb.index_select(0, pos2))
        uniform = uniformity_torch(emb)
        host = torch.cat([cosines.to(torch.float64), align.reshape(1), uniform.reshape(1)]).cpu().numpy()
        scores = host[:-2].astype(np.float32 if cosines.dtype == torch.float32 else np.float64)
        return {
            "stsb_dev": 100.0 * float(spearmanr(scores, self.pairs.gold)[0]),
            "align": float(host[-2]),
            "uniform": float(host[-1]),
        }


def _checked_tensor(out: torch.Tensor, n: int) -> torch.Tensor:
    if out.ndim != 2 or out.shape[0] != n:
        raise ConfigError(
            f"the encoder returned a tensor of shape {tuple(out.shape)} for {n} sentences; expected [{n}, d]"
        )
    return out
