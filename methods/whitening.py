"""Whitening in training: batched (shuffled) group whitening and running PCA/ZCA.

Training-time whitening follows WhitenedCSE (Zhuo et al., ACL 2023, https://arxiv.org/abs/2305.17746,
Sec. 3.2): split the ``d`` channels into ``G`` groups, centre each group by the batch mean, take the
biased covariance ``Xc^T Xc / n``, and multiply by the ZCA matrix ``W = U diag(lambda^-1/2) U^T``.
Shuffled group whitening (SGW) draws a random channel permutation first and undoes it afterwards.

Numerics (see METHODS.md Sec. 2):

* every group of every block is decomposed in ONE ``torch.linalg.eigh`` call on a ``[k*G, c, c]``
  batch, in float64, on the tensor's own device; no Python loop over groups, no trip to the CPU;
* a ridge ``eps * I`` is added to every covariance (the released code has none and returns NaN
  whenever a group has at least as many channels as the block has rows);
* the default gradient treats ``W`` as a constant (``grad="stop"``, as the released code does: the
  gradient flows through the centring and the product ``Xc W`` only); ``grad="full"`` differentiates
  through the covariance and the eigendecomposition too (unstable when eigenvalues repeat);
* a non-finite input, or a non-finite or non-positive eigenvalue (possible only with ``eps = 0``),
  raises :class:`~harness.errors.TrainingError` naming the step, the block and the group. There is
  no silent fallback: a run that would be poisoned stops with a message instead. In the training
  step these checks stay on the device (:func:`~methods.checks.device_check`): the loop raises at its
  next evaluation point, and the step never waits for them (the covariance is made finite before
  ``eigh`` so that the step gets there). ``torch.linalg.eigh`` itself still reads its solver's
  status back: PyTorch has no variant that leaves it on the device.

Whitening after training (BERT-whitening) is :mod:`harness.postprocess.whitening`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from harness.errors import TrainingError
from methods.checks import Check, device_check
from methods.memory import HostCount

GradMode = Literal["stop", "full"]


def random_permutations(k: int, d: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``k`` independent uniform permutations of ``range(d)``: ``[k, d]`` int64.

    Drawn from the global RNG of ``device`` (so the run's seed controls them), in one call.
    """
    return torch.rand(k, d, device=device).argsort(dim=-1)


def permute_channels(x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """``out[b, i, j] = x[b, i, perm[b, j]]`` for ``x: [k, n, d]`` and ``perm: [k, d]``."""
    return torch.gather(x, -1, perm[:, None, :].expand_as(x))


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    """The inverse of each row of ``perm: [k, d]`` (``inv[perm] = arange``)."""
    return perm.argsort(dim=-1)


def _check_eigenvalues(
    evals: torch.Tensor,
    groups_per_block: int,
    step: int | None,
    what: str,
    *,
    group_offset: int = 0,
) -> None:
    """Fail the run (:func:`~methods.checks.device_check`) if any eigenvalue of ``evals: [k*G', c]`` is
    non-finite or <= 0.

    Row ``r`` is block ``r // G'``, group ``group_offset + r % G'`` (``G'`` = ``groups_per_block``).
    """
    bad = ~torch.isfinite(evals) | (evals <= 0)
    bad_rows = bad.any(dim=-1)

    def found() -> Check:
        first = bad_rows.to(torch.uint8).argmax().reshape(1)  # a tensor index, not a Python int
        block, group = first // groups_per_block, first % groups_per_block + group_offset
        row = evals.index_select(0, first)[0]
        numbers = torch.cat(
            [bad_rows.sum().reshape(1), block, group, bad.index_select(0, first).sum().reshape(1)]
        )
        message = (
            f"{what}: covariance of block {{1}}, group {{2}} is singular or non-finite ({{3}} of its "
            f"{evals.shape[1]} eigenvalues non-positive or non-finite; {{0}} such covariances); raise eps "
            "or use fewer channels per group"
        )
        return Check(message, numbers, "eigenvalues of block {1}, group {2}: {values}", row)

    def check_now() -> None:
        if bool(bad_rows.any()):
            first = int(bad_rows.nonzero()[0, 0])
            block, group = divmod(first, groups_per_block)
            group += group_offset
            at = f"step {step}: " if step is not None else ""
            row = evals[first]
            bad = int((~torch.isfinite(row) | (row <= 0)).sum())
            error = TrainingError(
                f"{at}{what}: covariance of block {block}, group {group} is singular or non-finite "
                f"({bad} of its {row.numel()} eigenvalues non-positive or non-finite, smallest "
                f"{float(row.min()):.3g}); raise eps or use fewer channels per group"
            )
            error.add_note(
                f"eigenvalues of block {block}, group {group}: {row.tolist()}"
            )  # kept in the record
            raise error

    device_check(found, check_now)


def _check_finite(x: torch.Tensor, step: int | None, what: str) -> None:
    """Fail the run (:func:`~methods.checks.device_check`) if ``x: [k, n, d]`` has a non-finite value."""
    bad = ~torch.isfinite(x)
    _, n, d = x.shape

    def found() -> Check:
        first = bad.flatten().to(torch.uint8).argmax()
        numbers = torch.stack([bad.sum(), first // (n * d), first // d % n, first % d])
        return Check(
            f"{what} got {{0}} non-finite input values (the first at block {{1}}, row {{2}}, channel {{3}})",
            numbers,
        )

    def check_now() -> None:
        if bool(bad.any()):
            where = bad.nonzero()[0]
            at = f"step {step}: " if step is not None else ""
            raise TrainingError(
                f"{at}{what} got a non-finite input (block {int(where[0])}, row {int(where[1])}, "
                f"channel {int(where[2])})"
            )

    device_check(found, check_now)


def _finite_eigh(cov: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.eigh`` of ``cov`` with its non-finite entries read as 0 (the identity on a finite
    covariance): a poisoned step goes on to the evaluation point that fails the run."""
    return torch.linalg.eigh(torch.nan_to_num(cov, nan=0.0, posinf=0.0, neginf=0.0))


def group_sizes(d: int, num_groups: int) -> list[int]:
    """Channels per group when ``d`` channels are split into ``num_groups`` contiguous groups.

    As even as possible: the first ``d % G`` groups get one channel more (e.g. 1024 channels in 384
    groups: 256 groups of 3 and 128 of 2, as the paper runs 384 groups on BERT-large). A run's count
    was checked against its width by the method's parameters
    (:meth:`~methods.whitenedcse.WhitenedCSEParams.validate`).

    Raises:
        ValueError: ``num_groups`` is not in ``1..d`` (no split exists).
    """
    if not 1 <= num_groups <= d:
        raise ValueError(f"cannot split d={d} channels into {num_groups} groups (1..d)")
    c, r = divmod(d, num_groups)
    return [c + 1] * r + [c] * (num_groups - r)


Run = tuple[int, int, int, int]
"""A contiguous run of equal-sized groups: (first group, groups, channels each, first channel)."""


@dataclass(frozen=True)
class GroupSplit:
    """``d`` channels in contiguous groups (:func:`group_sizes`) and its runs of equal-sized groups,
    each whitened in one batched ``eigh``: made once per run (:func:`group_split`), not per step."""

    sizes: tuple[int, ...]
    runs: tuple[Run, ...]

    @property
    def num_groups(self) -> int:
        return len(self.sizes)


def group_split(d: int, num_groups: int) -> GroupSplit:
    """The :class:`GroupSplit` of ``d`` channels into ``num_groups`` groups (``1 <= G <= d``)."""
    sizes = group_sizes(d, num_groups)
    return GroupSplit(tuple(sizes), tuple(_equal_size_runs(sizes)))


def describe_groups(d: int, num_groups: int) -> str:
    """``"384 groups of 2 channels"`` or ``"256 groups of 3 and 128 of 2 channels"``."""
    sizes = group_sizes(d, num_groups)
    big, small = sizes[0], sizes[-1]
    if big == small:
        return f"{num_groups} groups of {big} channel{'s' if big != 1 else ''}"
    n_big = sizes.count(big)
    return f"{n_big} groups of {big} and {num_groups - n_big} of {small} channels"


def group_whiten(
    x: torch.Tensor,
    num_groups: int,
    eps: float = 1e-5,
    *,
    perm: torch.Tensor | None = None,
    grad: GradMode = "stop",
    step: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`whiten_groups` with ``x``'s ``d`` channels split into ``num_groups`` groups here
    (``1 <= G <= d``; :func:`group_split`): for one-off calls. A training step passes the split it made
    once."""
    return whiten_groups(x, group_split(x.shape[-1], num_groups), eps, perm=perm, grad=grad, step=step)


def whiten_groups(
    x: torch.Tensor,
    split: GroupSplit,
    eps: float = 1e-5,
    *,
    perm: torch.Tensor | None = None,
    grad: GradMode = "stop",
    step: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ZCA-whiten each group of channels of each block, groups of one size in one batched ``eigh``.

    Args:
        x: ``[k, n, d]`` (``k`` independent blocks of ``n`` rows) or ``[n, d]`` (one block).
            Statistics are computed per block over its ``n`` rows.
        split: the ``G`` groups of the ``d`` channels (:func:`group_split`). When ``G`` divides ``d``
            every group has ``d / G`` channels; otherwise the split is as even as possible
            (:func:`group_sizes`).
        eps: ridge added to every group covariance (``cov + eps * I``).
        perm: optional ``[k, d]`` (or ``[d]``) channel permutations, one per block: the block's
            channels are permuted, whitened group by group, and put back in their original order
            (shuffled group whitening). ``None`` = plain group whitening over contiguous groups.
        grad: ``"stop"`` treats ``W`` as a constant; ``"full"`` differentiates through it.
        step: training step, only for error messages.

    Returns:
        ``(out, evals)``: ``out`` has the shape and dtype of ``x`` (``out = Xc W`` per group);
        ``evals`` is ``[k*G, c_max]`` float64, the eigenvalues of the ridged covariances (detached),
        row ``b * G + g`` for block ``b``, group ``g``; rows of smaller groups are padded with +inf.

    Raises:
        TrainingError: non-finite input, or a singular / non-finite covariance.
    """
    squeeze = x.dim() == 2
    xb = _blocks(x)
    k, num_groups, widest = xb.shape[0], split.num_groups, split.sizes[0]
    _check_finite(xb, step, "group whitening")
    if perm is not None:
        perm = perm.unsqueeze(0) if perm.dim() == 1 else perm
        xb = permute_channels(xb, perm)

    xd = xb.to(torch.float64)
    xc = xd - xd.mean(dim=1, keepdim=True)  # [k, n, d], gradient flows through the centring
    outs: list[torch.Tensor] = []
    evals_all = torch.full((k, num_groups, widest), math.inf, dtype=torch.float64, device=x.device)
    for first_group, count, c, first_channel in split.runs:
        out_run, evals = _whiten_run(xc, (first_group, count, c, first_channel), eps, grad, step)
        evals_all[:, first_group : first_group + count, :c] = evals.view(k, count, c)
        outs.append(out_run)

    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
    if perm is not None:
        out = permute_channels(out, inverse_permutation(perm))
    out = out.to(x.dtype)
    return (out.squeeze(0) if squeeze else out), evals_all.view(k * num_groups, widest)


def _blocks(x: torch.Tensor) -> torch.Tensor:
    """``x`` as ``[k, n, d]`` blocks. The parameters were checked once, when the run's were: a step
    checks none of them again (:func:`group_whiten` checks the values finite, on the device)."""
    xb = x.unsqueeze(0) if x.dim() == 2 else x
    if xb.dim() != 3:
        raise ValueError(f"group_whiten expects [n, d] or [k, n, d], got shape {tuple(x.shape)}")
    return xb


def _equal_size_runs(sizes: list[int]) -> list[Run]:
    """The runs of equal-sized groups of :func:`group_sizes`: one when ``G`` divides ``d``, else two
    (``c + 1`` and ``c`` channels), each whitened in one batched ``eigh``."""
    runs: list[Run] = []
    g0 = ch0 = 0
    for size in dict.fromkeys(sizes):
        count = sizes.count(size)
        runs.append((g0, count, size, ch0))
        g0, ch0 = g0 + count, ch0 + count * size
    return runs


def _whiten_run(
    xc: torch.Tensor, run: Run, eps: float, grad: GradMode, step: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """ZCA-whiten one run of equal-sized groups of the centred ``xc: [k, n, d]``.

    Returns the run's whitened channels ``[k, n, count * c]`` and the ridged covariances'
    eigenvalues ``[k * count, c]`` (detached), row ``b * count + g`` for block ``b``, group ``g``.

    Raises:
        TrainingError: a covariance is singular or non-finite (naming the step, block and group).
    """
    first_group, count, c, first_channel = run
    k, n, _ = xc.shape
    part = xc[:, :, first_channel : first_channel + count * c]
    xg = part.reshape(k, n, count, c).permute(0, 2, 1, 3).reshape(k * count, n, c)

    def whitening_matrix(groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cov = groups.transpose(1, 2) @ groups / n  # [k*count, c, c], biased
        eye = torch.eye(c, dtype=cov.dtype, device=cov.device)
        evals, evecs = _finite_eigh(cov + eps * eye)
        return evecs @ torch.diag_embed(evals.rsqrt()) @ evecs.transpose(1, 2), evals.detach()

    if grad == "stop":
        with torch.no_grad():
            w, evals = whitening_matrix(xg.detach())
    else:
        w, evals = whitening_matrix(xg)
    _check_eigenvalues(evals, count, step, "group whitening", group_offset=first_group)
    return (xg @ w).view(k, count, n, c).permute(0, 2, 1, 3).reshape(k, n, count * c), evals


class RunningWhitening(nn.Module):
    """PCA or ZCA whitening over all ``d`` channels with running mean and covariance.

    Each call computes the batch mean ``xbar`` and biased covariance ``S`` (centred by ``xbar``) of
    its rows and mixes them into the running estimates with momentum ``beta``:
    ``mu_n = beta mu_{n-1} + (1 - beta) xbar``, ``Sigma_n = beta Sigma_{n-1} + (1 - beta) S``.
    At the first call there is nothing to mix with, so the estimates are initialised to the first
    batch's own statistics (not to zero / identity, which would bias the early steps).

    ``stats`` says which estimate whitens the current batch: ``"current"`` (default) whitens with
    ``mu_n, Sigma_n`` after the current batch was mixed in; ``"previous"`` is WhitenedCSE Eq. 13 as
    printed: the batch is whitened with ``mu_{n-1}, Sigma_{n-1}`` (the statistics of the batches
    before it; the first batch uses its own) and only then mixed into the running estimates, so no
    gradient flows through the statistics. The output is
    ``(x - mu_n) W_n`` with ``W = U diag(lambda^-1/2) U^T`` (ZCA) or ``U diag(lambda^-1/2)`` (PCA,
    no rotation back; columns sorted by decreasing eigenvalue), ``lambda, U = eigh(Sigma_n + eps I)``
    in float64. With ``grad="stop"`` ``mu_n`` and ``W_n`` are constants; with ``grad="full"`` the
    gradient flows through the current batch's share of them. Buffers are float64. ``kind``, ``stats``
    and ``momentum`` (``0 <= beta < 1``) are the run's parameters, checked by
    :meth:`~methods.whitenedcse.WhitenedCSEParams.validate`.
    """

    running_mean: torch.Tensor
    running_cov: torch.Tensor
    initialised: torch.Tensor

    def __init__(
        self,
        dim: int,
        kind: Literal["zca", "pca"] = "zca",
        momentum: float = 0.9,
        eps: float = 1e-5,
        grad: GradMode = "stop",
        stats: Literal["current", "previous"] = "current",
    ) -> None:
        super().__init__()
        self.stats = stats
        self.kind = kind
        self.momentum = momentum
        self.eps = eps
        self.grad = grad
        self.register_buffer("running_mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("running_cov", torch.eye(dim, dtype=torch.float64))
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))
        self._initialised = HostCount()

    def forward(self, x: torch.Tensor, step: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Whiten ``x: [n, d]``; return ``(out [n, d] in x's dtype, eigenvalues [d] float64)``."""
        bad = ~torch.isfinite(x)

        def check_now() -> None:
            if bool(bad.any()):
                at = f"step {step}: " if step is not None else ""
                raise TrainingError(f"{at}{self.kind} whitening got a non-finite input")

        message = f"{self.kind} whitening got {{0}} non-finite input values"
        device_check(lambda: Check(message, bad.sum()), check_now)
        initialised = bool(self._initialised.get(self.initialised))
        xd = x.to(torch.float64)
        src = xd if self.grad == "full" else xd.detach()
        mean = src.mean(dim=0)
        xc = src - mean
        cov = xc.T @ xc / src.shape[0]
        if initialised:
            beta = self.momentum
            new_mean = beta * self.running_mean + (1.0 - beta) * mean
            new_cov = beta * self.running_cov + (1.0 - beta) * cov
        else:
            new_mean, new_cov = mean, cov
        if self.stats == "previous" and initialised:
            mean, cov = self.running_mean.clone(), self.running_cov.clone()
        else:
            mean, cov = new_mean, new_cov
        eye = torch.eye(cov.shape[0], dtype=cov.dtype, device=cov.device)
        evals, evecs = _finite_eigh(cov + self.eps * eye)
        _check_eigenvalues(evals.detach().unsqueeze(0), 1, step, f"{self.kind} whitening")
        if self.kind == "zca":
            w = evecs @ torch.diag_embed(evals.rsqrt()) @ evecs.T
        else:
            order = evals.argsort(descending=True)
            w = evecs[:, order] * evals[order].rsqrt()
        with torch.no_grad():
            self.running_mean.copy_(new_mean.detach())
            self.running_cov.copy_(new_cov.detach())
            self._initialised.set(self.initialised, True)
        out = (xd - mean) @ w
        return out.to(x.dtype), evals.detach()
