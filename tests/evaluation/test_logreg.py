"""The transfer classifier (SentEval's logistic regression): its initialisation, the fast path step for
step against torch, early stopping as SentEval does it, and the classifier settings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from harness.errors import ConfigError
from harness.evaluation import logreg
from harness.evaluation.logreg import (
    PARAMETER_SETS,
    ClassifierConfig,
    fit_fast,
    fit_reference,
    initial_parameters,
)
from tests.helpers import blobs

pytestmark = pytest.mark.usefixtures("single_thread")
"""Fits on tiny tensors are latency-bound: OpenMP hand-offs only slow them (as in the evaluator)."""


def test_initial_parameters_are_nn_linear_after_seed_1111() -> None:
    state = torch.random.get_rng_state()
    w, b = initial_parameters(12, 3)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(1111)
    layer = nn.Linear(12, 3)
    assert torch.equal(w, layer.weight.detach()) and torch.equal(b, layer.bias.detach())


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
@pytest.mark.parametrize("l2", [0.0, 1e-3])
def test_fast_steps_are_bitwise_torch_autograd_and_optim(optim: str, l2: float) -> None:
    x_np, y_np = blobs(203, 24, 3, seed=1)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    torch.manual_seed(1111)
    model = nn.Linear(24, 3)
    opt: torch.optim.Optimizer
    opt = torch.optim.Adam(model.parameters()) if optim == "adam" else torch.optim.RMSprop(model.parameters())
    opt.param_groups[0]["weight_decay"] = l2
    fast = logreg._FlatLinear(24, 3, l2, optim)  # type: ignore[arg-type]
    batch = 64
    tables = {size: logreg._nll_grad_table(y, 3, size) for size in (batch, 203 % batch)}
    perm = torch.from_numpy(np.random.RandomState(0).permutation(203))
    for _ in range(3):
        for i in range(0, 203, batch):
            idx = perm[i : i + batch]
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            fast.backward(x[idx], tables[len(idx)][idx])
            fast.step()
            assert torch.equal(fast.weight, model.weight.detach())
            assert torch.equal(fast.bias, model.bias.detach())


@pytest.mark.parametrize("mode", ["fasttest", "test"])
@pytest.mark.parametrize("with_valid", [False, True])
def test_fast_fit_equals_senteval_reference_fit(mode: str, with_valid: bool) -> None:
    x, y = blobs(160, 16, 3, seed=2)
    xs, ys = blobs(90, 16, 3, seed=2)  # same centres (same seed), fresh noise
    valid = (xs[:45], ys[:45]) if with_valid else None
    cfg = dataclasses.replace(PARAMETER_SETS[mode], max_epoch=24)  # keep the test short
    a = fit_reference(x, y, 3, 1e-4, cfg, valid, (xs, ys))
    b = fit_fast(x, y, 3, 1e-4, cfg, valid, (xs, ys))
    assert a == b
    assert a.score is not None and a.score > 0.5


def _scripted_accuracies(monkeypatch: pytest.MonkeyPatch, values: list[float]) -> list[float]:
    script = list(values)
    seen: list[float] = []

    def fake(*args: object) -> float:
        seen.append(script.pop(0) if script else 0.0)
        return seen[-1]

    monkeypatch.setattr(logreg, "_fast_accuracy", fake)
    return seen


def test_early_stopping_counter_is_never_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    # tenacity 3, epoch size 2: improvement at checks 1 and 3; non-improving checks 2, 4, 5, 6 count
    # 0 -> 1, then 1 -> 2 -> 3, and check 6 finds the counter at 3 and stops. With a counter reset
    # at check 3 the loop would run a 7th check.
    seen = _scripted_accuracies(monkeypatch, [0.5, 0.4, 0.6, 0.4, 0.4, 0.4, 0.9, 0.9])
    x, y = blobs(60, 4, 2, seed=3)
    result = fit_fast(x, y, 2, 1e-5, PARAMETER_SETS["fasttest"])
    assert len(seen) == 6
    assert result.best_valid == 0.6 and result.epochs == 12


def test_equal_accuracy_is_not_an_improvement(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scripted_accuracies(monkeypatch, [0.5] * 10)
    x, y = blobs(60, 4, 2, seed=3)
    cfg = ClassifierConfig(optim="adam", batch_size=64, tenacity=5, epoch_size=4, kfold=10)
    result = fit_fast(x, y, 2, 1e-5, cfg)
    assert len(seen) == cfg.tenacity + 2 and result.epochs == (cfg.tenacity + 2) * 4


def test_separable_problem_stops_after_tenacity_plus_two_checks() -> None:
    # Validation accuracy is 1.0 at the first check and cannot improve afterwards.
    rng = np.random.RandomState(4)
    y = rng.randint(0, 2, 200)
    x = (np.where(y[:, None] == 1, 5.0, -5.0) + 0.1 * rng.randn(200, 3)).astype(np.float32)
    for mode in PARAMETER_SETS:
        cfg = PARAMETER_SETS[mode]
        for fit in (fit_fast, fit_reference):
            result = fit(x, y, 2, 1e-5, cfg, None, (x, y))
            assert result.best_valid == 1.0 and result.score == 1.0
            assert result.epochs == (cfg.tenacity + 2) * cfg.epoch_size


def test_max_epoch_bounds_the_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scripted_accuracies(monkeypatch, [i / 100 for i in range(100)])  # always improving
    x, y = blobs(60, 4, 2, seed=3)
    cfg = ClassifierConfig(optim="rmsprop", batch_size=16, tenacity=3, epoch_size=4, kfold=5, max_epoch=10)
    result = fit_fast(x, y, 2, 1e-5, cfg)
    assert result.epochs == 12 and len(seen) == 3  # checks at 4, 8 and 12 passes (12 > 10 stops)


def test_classifier_config_validates() -> None:
    with pytest.raises(ConfigError, match="optim"):
        ClassifierConfig(optim="sgd", batch_size=1, tenacity=1, epoch_size=1, kfold=2)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="kfold"):
        ClassifierConfig(optim="adam", batch_size=1, tenacity=1, epoch_size=1, kfold=1)
