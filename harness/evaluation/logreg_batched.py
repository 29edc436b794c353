"""SentEval's logistic-regression fits, many at once, on any device (the final evaluation on a GPU).

:func:`fit_batched` trains a set of independent fits in lockstep, as one batch of matrix products
per minibatch step: each fit has its own rows (indices into one feature matrix), its own class
count, L2 value and early stopping, and exactly the data order of :func:`~harness.evaluation.logreg.
fit_fast` (a fresh ``RandomState(1111)`` per fit: the 5% validation split, then one permutation per
pass; fits of one training-set size share that stream, so it is drawn once for them). The
arithmetic is the same (cross-entropy averaged over the minibatch, weight decay added to the
gradient, torch.optim's Adam or RMSprop update, float32), done by batched kernels, so its rounding
differs from the CPU path's in the last bits: the accuracies agree with
:func:`~harness.evaluation.logreg.fit_fast` to within a sample now and then (tested on the CPU).

Fits are ordered by training-set size, largest first, so the fits a step updates are a prefix of
the batch (a fit whose pass has ended is simply left out); fits that stopped are dropped from the
batch at the next validation check. Nothing is read back to the host between checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from harness.evaluation.logreg import (
    _ADAM_BETA1,
    _ADAM_BETA2,
    _ADAM_EPS,
    _ADAM_LR,
    _RMSPROP_ALPHA,
    _RMSPROP_EPS,
    _RMSPROP_LR,
    SEED,
    VALIDATION_SPLIT,
    ClassifierConfig,
    FitResult,
    initial_parameters,
)


@dataclass(frozen=True)
class BatchedFit:
    """One fit of :func:`fit_batched`: rows of the shared feature matrix and its settings.

    Attributes:
        train: Training rows, in order.
        valid: Validation rows, or None for SentEval's 5% split of the training rows.
        score: Rows to score the best model on, or None.
        nclasses: Its class count C (labels in ``[0, C)``).
        l2: Weight decay.
    """

    train: np.ndarray
    valid: np.ndarray | None
    score: np.ndarray | None
    nclasses: int
    l2: float


@dataclass
class _Plan:
    """The fits' rows after the validation split, and the random streams of their passes."""

    train: list[np.ndarray]
    valid: list[np.ndarray]
    stream: list[int]  # index into streams: the fits drawing the same permutations
    streams: list[np.random.RandomState]
    stream_size: list[int]


def _plan(fits: Sequence[BatchedFit]) -> _Plan:
    keys: dict[tuple[int, bool], int] = {}
    plan = _Plan([], [], [], [], [])
    split_perms: dict[int, np.ndarray] = {}
    for fit in fits:
        n, split = len(fit.train), fit.valid is None
        key = (n, split)
        if key not in keys:
            keys[key] = len(plan.streams)
            rng = np.random.RandomState(SEED)
            if split:
                split_perms[keys[key]] = rng.permutation(n)
            plan.streams.append(rng)
            plan.stream_size.append(n - int(VALIDATION_SPLIT * n) if split else n)
        index = keys[key]
        plan.stream.append(index)
        if fit.valid is None:
            perm, cut = split_perms[index], int(VALIDATION_SPLIT * n)
            plan.train.append(fit.train[perm[cut:]])
            plan.valid.append(fit.train[perm[:cut]])
        else:
            plan.train.append(fit.train)
            plan.valid.append(fit.valid)
    return plan


def _padded(rows: Sequence[np.ndarray], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Row lists as one ``[F, max n]`` index tensor (padded with row 0) and the mask of real entries."""
    width = max(1, max(len(r) for r in rows))
    out = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
        mask[i, : len(r)] = True
    return torch.from_numpy(out).to(device), torch.from_numpy(mask).to(device)


class _Batch:
    """The live fits' parameters and optimiser state, ``[F, C * d + C]`` each, largest fits first."""

    def __init__(
        self,
        x: torch.Tensor,
        fits: Sequence[BatchedFit],
        order: np.ndarray,
        plan: _Plan,
        config: ClassifierConfig,
    ) -> None:
        device, d = x.device, x.shape[1]
        self.c = max(f.nclasses for f in fits)
        self.d = d
        self.ids = order  # original fit index of each live row
        self.n = np.array([len(plan.train[i]) for i in order], dtype=np.int64)
        self.stream = np.array([plan.stream[i] for i in order], dtype=np.int64)
        params = []
        for i in order:
            w, b = initial_parameters(d, fits[i].nclasses)
            full_w = torch.zeros(self.c, d)
            full_b = torch.zeros(self.c)
            full_w[: fits[i].nclasses], full_b[: fits[i].nclasses] = w, b
            params.append(torch.cat([full_w.reshape(-1), full_b]))
        self.flat = torch.stack(params).to(device)
        self.state_a = torch.zeros_like(self.flat)
        self.state_b = torch.zeros_like(self.flat)
        self.steps = torch.zeros(len(order), dtype=torch.float64, device=device)
        self.l2 = torch.tensor([fits[i].l2 for i in order], dtype=torch.float32, device=device)[:, None]
        classes = torch.tensor([fits[i].nclasses for i in order], device=device)
        # 0 for a fit's classes, -inf for the padding up to the batch's C
        self.class_mask = torch.where(
            torch.arange(self.c, device=device)[None, :] < classes[:, None], 0.0, -math.inf
        )
        self.train_rows, _ = _padded([plan.train[i] for i in order], device)
        self.valid_rows, self.valid_mask = _padded([plan.valid[i] for i in order], device)
        self.valid_n = torch.tensor([len(plan.valid[i]) for i in order], dtype=torch.float64, device=device)
        self.optim = config.optim

    def keep(self, live: np.ndarray) -> None:
        """Keep the fits at positions ``live`` (still in size order)."""
        index = torch.from_numpy(live).to(self.flat.device)
        for name in ("flat", "state_a", "state_b", "steps", "l2", "class_mask", "valid_rows", "valid_mask"):
            setattr(self, name, getattr(self, name).index_select(0, index))
        self.valid_n = self.valid_n.index_select(0, index)
        self.ids, self.n, self.stream = self.ids[live], self.n[live], self.stream[live]
        width = max(1, int(self.n.max(initial=0)))
        self.train_rows = self.train_rows.index_select(0, index)[:, :width]

    def weights(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.flat[:k, : self.c * self.d].view(k, self.c, self.d), self.flat[:k, self.c * self.d :]

    def logits(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """``[k, rows, C]`` logits of the first k fits on ``x`` ``[k, rows, d]``, padded classes at -inf."""
        w, b = self.weights(k)
        return torch.baddbmm(b[:, None, :], x, w.transpose(1, 2)) + self.class_mask[:k, None, :]

    def step(self, xb: torch.Tensor, yb: torch.Tensor, scale: torch.Tensor | float) -> None:
        """One minibatch step of the first ``len(xb)`` fits; ``scale`` = 1 / rows per row (0 on padding)."""
        k = xb.shape[0]
        probs = torch.softmax(self.logits(xb, k), dim=2)
        probs.scatter_add_(2, yb[:, :, None], torch.full_like(yb, -1, dtype=probs.dtype)[:, :, None])
        grad_logits = probs * (scale[:, :, None] if isinstance(scale, torch.Tensor) else scale)
        grad_w = torch.bmm(grad_logits.transpose(1, 2), xb).reshape(k, -1)
        grad = torch.cat([grad_w, grad_logits.sum(dim=1)], dim=1).add_(self.flat[:k] * self.l2[:k])
        flat, a = self.flat[:k], self.state_a[:k]
        steps = self.steps[:k]
        steps += 1
        if self.optim == "rmsprop":
            a.mul_(_RMSPROP_ALPHA).addcmul_(grad, grad, value=1 - _RMSPROP_ALPHA)
            flat.addcdiv_(grad, a.sqrt().add_(_RMSPROP_EPS), value=-_RMSPROP_LR)
            return
        b = self.state_b[:k]
        a.lerp_(grad, 1 - _ADAM_BETA1)
        b.mul_(_ADAM_BETA2).addcmul_(grad, grad, value=1 - _ADAM_BETA2)
        step_size = (_ADAM_LR / (1 - torch.pow(_ADAM_BETA1, steps))).to(torch.float32)[:, None]
        correction2 = torch.sqrt(1 - torch.pow(_ADAM_BETA2, steps)).to(torch.float32)[:, None]
        flat.sub_(step_size * (a / (b.sqrt() / correction2).add_(_ADAM_EPS)))

    def accuracy(
        self, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Correct predictions (argmax) of every live fit on its rows, ``[F]`` (no read-back).

        Every row of ``x`` against a chunk of fits at a time (a few classes each): one matrix
        product, no ``[F, rows, d]`` gather; chunks keep the logits under 2**26 numbers.
        """
        f = self.flat.shape[0]
        w, b = self.weights(f)
        chunk = max(1, 2**26 // (x.shape[0] * self.c))
        correct = []
        for lo in range(0, f, chunk):
            hi = min(lo + chunk, f)
            part = (x @ w[lo:hi].reshape(-1, self.d).T).view(-1, hi - lo, self.c)
            logits = part + b[None, lo:hi] + self.class_mask[None, lo:hi]
            pred = logits.argmax(dim=2).T.gather(1, rows[lo:hi])
            correct.append(((pred == y[rows[lo:hi]]) & mask[lo:hi]).sum(dim=1))
        return torch.cat(correct)


def fit_batched(
    x: torch.Tensor,
    y: torch.Tensor,
    fits: Sequence[BatchedFit],
    config: ClassifierConfig,
    steps: list[int] | None = None,
) -> list[FitResult]:
    """Train ``fits`` on the rows of ``x`` ``[N, d]`` (float32) and ``y`` ``[N]``, where they lie.

    Each fit follows :func:`~harness.evaluation.logreg.fit_fast`'s protocol: the 5% split when it
    has no validation rows, ``epoch_size`` passes over a fresh permutation in minibatches of
    ``batch_size`` (the last one short), a validation check after them, a strictly better model
    kept, stop once the never-reset non-improvement count has reached ``tenacity`` or past
    ``max_epoch`` passes; the best model scores the ``score`` rows.

    Args:
        steps: Given, the count of minibatch steps taken (one after another) is appended to it.

    Returns:
        One :class:`~harness.evaluation.logreg.FitResult` per fit, in order.
    """
    if not fits:
        return []
    minibatches = 0
    device = x.device
    plan = _plan(fits)
    order = np.array(sorted(range(len(fits)), key=lambda i: -len(plan.train[i])), dtype=np.int64)
    batch = _Batch(x, fits, order, plan, config)
    best_flat = torch.empty_like(batch.flat)  # by fit index, as best, count and epochs
    best_flat[torch.from_numpy(order).to(device)] = batch.flat
    best = torch.full((len(fits),), -1.0, dtype=torch.float64, device=device)
    count = torch.zeros(len(fits), dtype=torch.int64, device=device)
    epochs = np.zeros(len(fits), dtype=np.int64)
    nepoch = 0
    while len(batch.ids) and nepoch <= config.max_epoch:
        minibatches += _passes(x, y, batch, plan, config)
        nepoch += config.epoch_size
        ids = torch.from_numpy(batch.ids).to(device)
        acc = batch.accuracy(x, y, batch.valid_rows, batch.valid_mask) / batch.valid_n
        better = acc > best[ids]
        best[ids] = torch.where(better, acc, best[ids])
        best_flat[ids] = torch.where(better[:, None], batch.flat, best_flat[ids])
        stop = ~better & (count[ids] >= config.tenacity)
        count[ids] = torch.where(better, count[ids], count[ids] + 1)
        stopped = stop.cpu().numpy()  # the one read-back of a check: which fits are done
        epochs[batch.ids] = nepoch
        if stopped.any():
            batch.keep(np.flatnonzero(~stopped))
    if steps is not None:
        steps.append(minibatches)
    return _results(x, y, fits, plan, config, best_flat, best, epochs)


def _passes(x: torch.Tensor, y: torch.Tensor, batch: _Batch, plan: _Plan, config: ClassifierConfig) -> int:
    """``epoch_size`` passes of every live fit (no read-back); the minibatch steps taken."""
    device, bsz = x.device, config.batch_size
    width = batch.train_rows.shape[1]
    count = 0
    for _ in range(config.epoch_size):
        perms = np.zeros((len(plan.streams), width), dtype=np.int64)
        for s in np.unique(batch.stream):  # one permutation per stream with a live fit, in stream order
            size = plan.stream_size[s]
            perms[s, :size] = plan.streams[s].permutation(size)
        perm = torch.from_numpy(perms).to(device).index_select(0, torch.from_numpy(batch.stream).to(device))
        rows = batch.train_rows.gather(1, perm)
        for start in range(0, width, bsz):
            k = int((batch.n > start).sum())  # the fits this step updates: a prefix (largest first)
            stop = min(start + bsz, width)
            taken = np.minimum(batch.n[:k] - start, bsz)
            idx = rows[:k, start:stop]
            if (taken == stop - start).all():
                scale: torch.Tensor | float = 1.0 / (stop - start)
            else:  # some fits' last minibatch is short: mean over its own rows, padding weighs 0
                table = np.zeros((k, stop - start), dtype=np.float32)
                for i, t in enumerate(taken):
                    table[i, :t] = np.float32(1.0) / np.float32(t)
                scale = torch.from_numpy(table).to(device)
            batch.step(x[idx], y[idx], scale)
            count += 1
    return count


def rows_of_score(fit: BatchedFit) -> np.ndarray:
    if fit.score is None:
        raise ValueError("this fit scores nothing")
    return fit.score


def _results(
    x: torch.Tensor,
    y: torch.Tensor,
    fits: Sequence[BatchedFit],
    plan: _Plan,
    config: ClassifierConfig,
    best_flat: torch.Tensor,
    best: torch.Tensor,
    epochs: np.ndarray,
) -> list[FitResult]:
    scored = [i for i, fit in enumerate(fits) if fit.score is not None]
    scores: dict[int, float] = {}
    if scored:
        final = _Batch(x, fits, np.array(scored, dtype=np.int64), plan, config)
        final.flat = best_flat[torch.tensor(scored, device=x.device)]
        score_rows = [fits[i].score for i in scored]
        rows, mask = _padded([r for r in score_rows if r is not None], x.device)
        correct = final.accuracy(x, y, rows, mask).cpu().numpy()
        for p, i in enumerate(scored):
            scores[i] = 1.0 * int(correct[p]) / len(rows_of_score(fits[i]))
    best_host = best.cpu().numpy()
    return [FitResult(float(best_host[i]), scores.get(i), int(epochs[i])) for i in range(len(fits))]
