"""SentEval's logistic-regression classifier, bit for bit, in two implementations.

SentEval (``senteval/tools/classifier.py``) trains ``nn.Sequential(nn.Linear(d, C))`` with
cross-entropy, a PyTorch optimiser whose ``weight_decay`` is the L2 strength, minibatches drawn from
NumPy's global RNG and early stopping on a validation set. Every classifier construction reseeds
NumPy and torch with 1111, so a fit is a pure function of its data, its L2 value and the parameter
set. This module reproduces that fit twice:

* :func:`fit_reference` follows SentEval step by step (``nn.Module``, autograd, ``torch.optim``,
  ``copy.deepcopy`` of the best model). It is the yardstick for tests and benchmarks.
* :func:`fit_fast` issues the very same ATen kernels by hand (``addmm``, ``_log_softmax``, the
  NLL and log-softmax backward kernels, ``mm``/``sum`` for the weight and bias gradients, and the
  optimiser's own element-wise update sequence) on one flat parameter buffer, with the NLL gradient
  template precomputed per row. It skips autograd bookkeeping, optimiser wrappers and module calls,
  and gives bitwise the same parameters after every step (tested), hence the same accuracies.

Both return the best validation accuracy and, when asked, the accuracy of the best model on a
scoring set, as fractions (SentEval's ``clf.score``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from harness.errors import ConfigError

SEED = 1111
"""SentEval's seed: NumPy and torch are reseeded with it at every classifier construction."""

VALIDATION_SPLIT = 0.05
"""Fraction of the training rows held out for early stopping when no validation set is given."""

Optimiser = Literal["adam", "rmsprop"]


@dataclass(frozen=True)
class ClassifierConfig:
    """SentEval's classifier parameters (``params['classifier']`` plus ``kfold``).

    Attributes:
        optim: ``"adam"`` (lr 1e-3) or ``"rmsprop"`` (lr 1e-2), PyTorch defaults otherwise.
        batch_size: Minibatch size, for training and for scoring.
        tenacity: How many non-improving validation checks are tolerated (see :func:`fit_reference`).
        epoch_size: Passes over the training set between two validation checks.
        kfold: Number of folds of the cross-validations.
        max_epoch: Training stops once the pass count exceeds this.
    """

    optim: Optimiser
    batch_size: int
    tenacity: int
    epoch_size: int
    kfold: int
    max_epoch: int = 200

    def __post_init__(self) -> None:
        if self.optim not in ("adam", "rmsprop"):
            raise ConfigError(f"ClassifierConfig.optim must be 'adam' or 'rmsprop', got {self.optim!r}")
        for field in ("batch_size", "epoch_size", "kfold"):
            if getattr(self, field) < 1:
                raise ConfigError(f"ClassifierConfig.{field} must be >= 1, got {getattr(self, field)}")
        if self.kfold < 2:
            raise ConfigError(f"ClassifierConfig.kfold must be >= 2, got {self.kfold}")
        if self.tenacity < 0 or self.max_epoch < 0:
            raise ConfigError("ClassifierConfig.tenacity and max_epoch must be >= 0")


PARAMETER_SETS: dict[str, ClassifierConfig] = {
    "fasttest": ClassifierConfig(optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2, kfold=5),
    "test": ClassifierConfig(optim="adam", batch_size=64, tenacity=5, epoch_size=4, kfold=10),
}
"""SimCSE's two SentEval parameter sets."""

L2_GRID: tuple[float, ...] = tuple(10.0**t for t in range(-5, -1))
"""SentEval's L2 grid for the PyTorch classifier: 1e-5, 1e-4, 1e-3, 1e-2 (computed as ``10**t``)."""

# PyTorch's defaults, which SentEval's ``get_optimizer("adam" | "rmsprop")`` leaves untouched.
_ADAM_LR, _ADAM_BETA1, _ADAM_BETA2, _ADAM_EPS = 1e-3, 0.9, 0.999, 1e-8
_RMSPROP_LR, _RMSPROP_ALPHA, _RMSPROP_EPS = 1e-2, 0.99, 1e-8


@dataclass(frozen=True)
class FitResult:
    """Outcome of one classifier fit.

    Attributes:
        best_valid: Best validation accuracy (fraction), the early-stopping criterion.
        score: Accuracy of the best model on the scoring set, or ``None`` if none was given.
        epochs: Passes made over the training set.
    """

    best_valid: float
    score: float | None
    epochs: int


def _as_inputs(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """SentEval's ``torch.FloatTensor(X)``, ``torch.LongTensor(y)`` (without copying when possible)."""
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    yt = torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))
    return xt, yt


def _split(
    x: np.ndarray,
    y: np.ndarray,
    valid: tuple[np.ndarray, np.ndarray] | None,
    rng: np.random.RandomState | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training and validation rows: the given pair, or SentEval's 5% split from ``rng``."""
    if valid is not None:
        return x, y, valid[0], valid[1]
    perm = rng.permutation(len(x)) if rng is not None else np.random.permutation(len(x))
    cut = int(VALIDATION_SPLIT * len(x))
    return x[perm[cut:]], y[perm[cut:]], x[perm[:cut]], y[perm[:cut]]


def _check_shapes(x: np.ndarray, y: np.ndarray, nclasses: int) -> None:
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
        raise ValueError(f"features must be [n, d] and labels [n], got {x.shape} and {y.shape}")
    if len(y) and (y.min() < 0 or y.max() >= nclasses):
        raise ValueError(f"labels must lie in [0, {nclasses}), got {y.min()}..{y.max()}")


# --------------------------------------------------------------------------------------------------
# The reference: SentEval's PyTorchClassifier / MLP(nhid=0), on current PyTorch.
# --------------------------------------------------------------------------------------------------
# SentEval's PyTorchClassifier (fit, trainepoch, score) transcribed statement for statement, to be
# read beside SentEval's code: the yardstick, not the path runs take (fit_fast is; the tests hold the
# two bitwise equal).
def fit_reference(
    x: np.ndarray,
    y: np.ndarray,
    nclasses: int,
    l2: float,
    config: ClassifierConfig,
    valid: tuple[np.ndarray, np.ndarray] | None = None,
    score: tuple[np.ndarray, np.ndarray] | None = None,
) -> FitResult:
    """Train one logistic regression exactly as SentEval does (module, autograd, ``torch.optim``).

    Seeds NumPy's and torch's global RNGs with 1111 (as SentEval does), builds ``Linear(d, C)``,
    draws the 5% validation split when ``valid`` is None, then repeats: ``epoch_size`` passes, each
    over a fresh ``np.random.permutation`` in minibatches; validation accuracy; a strictly better
    model is deep-copied, otherwise the stop flag is raised once the never-reset counter has reached
    ``tenacity``, and the counter grows. The loop runs while not stopped and passes <= ``max_epoch``.

    Args:
        x: Training features ``[n, d]`` (cast to float32, as ``torch.FloatTensor`` does).
        y: Training labels ``[n]`` in ``[0, nclasses)``.
        nclasses: Number of classes C.
        l2: The optimiser's ``weight_decay``.
        config: The parameter set.
        valid: Validation ``(features, labels)``; None draws the 5% split.
        score: Optional ``(features, labels)`` to score the best model on.

    Returns:
        The best validation accuracy, the score and the number of passes.
    """
    _check_shapes(x, y, nclasses)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(x.shape[1], nclasses))
    loss_fn = nn.CrossEntropyLoss()
    optimizer: torch.optim.Optimizer
    if config.optim == "adam":
        optimizer = torch.optim.Adam(model.parameters())
    else:
        optimizer = torch.optim.RMSprop(model.parameters())
    optimizer.param_groups[0]["weight_decay"] = l2

    tx, ty, vx, vy = _split(x, y, valid, None)
    train_x, train_y = torch.FloatTensor(np.asarray(tx, dtype=np.float32)), torch.LongTensor(ty)
    dev_x, dev_y = torch.FloatTensor(np.asarray(vx, dtype=np.float32)), torch.LongTensor(vy)

    def accuracy(m: nn.Module, fx: torch.Tensor, fy: torch.Tensor) -> float:
        m.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(fx), config.batch_size):
                pred = m(fx[i : i + config.batch_size]).max(1)[1]
                correct += int(pred.long().eq(fy[i : i + config.batch_size].long()).sum().item())
        return 1.0 * correct / len(fx)

    nepoch, best, stop, count = 0, -1.0, False, 0
    best_model = model
    while not stop and nepoch <= config.max_epoch:
        model.train()
        for _ in range(config.epoch_size):
            perm = np.random.permutation(len(train_x))
            for i in range(0, len(train_x), config.batch_size):
                idx = torch.LongTensor(perm[i : i + config.batch_size])
                loss = loss_fn(model(train_x.index_select(0, idx)), train_y.index_select(0, idx))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        nepoch += config.epoch_size
        acc = accuracy(model, dev_x, dev_y)
        if acc > best:
            best, best_model = acc, copy.deepcopy(model)
        else:
            if count >= config.tenacity:
                stop = True
            count += 1
    scored = None
    if score is not None:
        sx, sy = _as_inputs(*score)
        scored = accuracy(best_model, sx, sy)
    return FitResult(best, scored, nepoch)


# --------------------------------------------------------------------------------------------------
# The fast path: the same kernels, without the framework around them.
# --------------------------------------------------------------------------------------------------
_INIT_CACHE: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}


def initial_parameters(d: int, nclasses: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.Linear(d, C)``'s weight and bias right after ``torch.manual_seed(1111)`` (cached).

    The global torch RNG is left as it was.
    """
    key = (d, nclasses)
    if key not in _INIT_CACHE:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            layer = nn.Linear(d, nclasses)
        _INIT_CACHE[key] = (layer.weight.detach().clone(), layer.bias.detach().clone())
    w, b = _INIT_CACHE[key]
    return w.clone(), b.clone()


def _nll_grad_table(y: torch.Tensor, nclasses: int, batch: int) -> torch.Tensor:
    """Rows of ``nll_loss_backward`` for mean reduction: ``-(1 / batch)`` at the target, 0 elsewhere.

    The value is computed in float32 (``-(1.0f / B)``), as the CPU kernel does.
    """
    value = -(torch.tensor(1.0, dtype=torch.float32) / torch.tensor(float(batch), dtype=torch.float32))
    table = torch.zeros(len(y), nclasses, dtype=torch.float32)
    table[torch.arange(len(y)), y] = value
    return table


class _FlatLinear:
    """A ``Linear(d, C)`` whose weight and bias live in one flat buffer, with its optimiser state."""

    def __init__(self, d: int, nclasses: int, l2: float, optim: Optimiser) -> None:
        w, b = initial_parameters(d, nclasses)
        self.d, self.c = d, nclasses
        self.flat = torch.cat([w.reshape(-1), b])
        self.weight = self.flat[: d * nclasses].view(nclasses, d)
        self.bias = self.flat[d * nclasses :]
        self.grad = torch.empty_like(self.flat)
        self.grad_weight = self.grad[: d * nclasses].view(nclasses, d)
        self.grad_bias = self.grad[d * nclasses :]
        self.l2 = l2
        self.optim = optim
        self.step_count = torch.tensor(0.0)
        self.state_a = torch.zeros_like(self.flat)  # square_avg (RMSprop) or exp_avg (Adam)
        self.state_b = torch.zeros_like(self.flat)  # exp_avg_sq (Adam)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight.t())

    def backward(self, x: torch.Tensor, nll_grad: torch.Tensor) -> None:
        """Fill ``self.grad`` with the gradient of the mean cross-entropy on batch ``x``."""
        log_probs = torch._log_softmax(self.logits(x), 1, False)
        grad_logits = torch._log_softmax_backward_data(nll_grad, log_probs, 1, torch.float32)
        torch.mm(grad_logits.t(), x, out=self.grad_weight)
        torch.sum(grad_logits, 0, out=self.grad_bias)

    def step(self) -> None:
        """torch.optim's single-tensor update (``weight_decay`` added to the gradient)."""
        self.step_count += 1
        grad = self.grad.add(self.flat, alpha=self.l2) if self.l2 != 0 else self.grad
        if self.optim == "rmsprop":
            square_avg = self.state_a
            square_avg.mul_(_RMSPROP_ALPHA).addcmul_(grad, grad, value=1 - _RMSPROP_ALPHA)
            avg = square_avg.sqrt().add_(_RMSPROP_EPS)
            self.flat.addcdiv_(grad, avg, value=-_RMSPROP_LR)
            return
        exp_avg, exp_avg_sq = self.state_a, self.state_b
        exp_avg.lerp_(grad, 1 - _ADAM_BETA1)
        exp_avg_sq.mul_(_ADAM_BETA2).addcmul_(grad, grad, value=1 - _ADAM_BETA2)
        step = self.step_count.item()
        bias_correction1 = 1 - _ADAM_BETA1**step
        bias_correction2 = 1 - _ADAM_BETA2**step
        step_size = _ADAM_LR / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(_ADAM_EPS)
        self.flat.addcdiv_(exp_avg, denom, value=-step_size)


def _fast_accuracy(
    weight: torch.Tensor, bias: torch.Tensor, x: torch.Tensor, y: torch.Tensor, batch: int
) -> float:
    """SentEval's ``score``: argmax of chunked logits (chunks of the batch size, as SentEval)."""
    correct = 0
    wt = weight.t()
    for i in range(0, len(x), batch):
        pred = torch.addmm(bias, x[i : i + batch], wt).max(1)[1]
        correct += int(pred.eq(y[i : i + batch]).sum().item())
    return 1.0 * correct / len(x)


def fit_fast(
    x: np.ndarray,
    y: np.ndarray,
    nclasses: int,
    l2: float,
    config: ClassifierConfig,
    valid: tuple[np.ndarray, np.ndarray] | None = None,
    score: tuple[np.ndarray, np.ndarray] | None = None,
) -> FitResult:
    """Same contract and same numbers as :func:`fit_reference`, several times faster.

    Uses a private ``RandomState(1111)`` instead of reseeding NumPy's global RNG (the same stream)
    and leaves torch's global RNG untouched.
    """
    _check_shapes(x, y, nclasses)
    rng = np.random.RandomState(SEED)
    model = _FlatLinear(x.shape[1], nclasses, l2, config.optim)
    tx, ty, vx, vy = _split(x, y, valid, rng)
    train_x, train_y = _as_inputs(tx, ty)
    dev_x, dev_y = _as_inputs(vx, vy)
    n, bsz = len(train_x), config.batch_size
    full_table = _nll_grad_table(train_y, nclasses, bsz)
    tail = n % bsz
    tail_table = _nll_grad_table(train_y, nclasses, tail) if tail else full_table

    nepoch, best, stop, count = 0, -1.0, False, 0
    best_params = model.flat.clone()
    while not stop and nepoch <= config.max_epoch:
        for _ in range(config.epoch_size):
            perm = torch.from_numpy(rng.permutation(n))
            for i in range(0, n, bsz):
                idx = perm[i : i + bsz]
                table = full_table if len(idx) == bsz else tail_table
                model.backward(train_x.index_select(0, idx), table.index_select(0, idx))
                model.step()
        nepoch += config.epoch_size
        acc = _fast_accuracy(model.weight, model.bias, dev_x, dev_y, bsz)
        if acc > best:
            best = acc
            best_params = model.flat.clone()
        else:
            if count >= config.tenacity:
                stop = True
            count += 1
    scored = None
    if score is not None:
        sx, sy = _as_inputs(*score)
        d = x.shape[1]
        w = best_params[: d * nclasses].view(nclasses, d)
        scored = _fast_accuracy(w, best_params[d * nclasses :], sx, sy, bsz)
    return FitResult(best, scored, nepoch)


FITTERS = {"fast": fit_fast, "reference": fit_reference}
"""The two implementations by name (``engine`` argument of the transfer evaluator)."""
