"""SimCSE++: the reduction to SimCSE, the dropout-off pass with gradient, DCL alone, its parameters."""

from __future__ import annotations

import pytest
import torch

from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_rates
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from tests.helpers import (
    assert_same,
    checked_params,
    loss_and_grads,
    make_method,
)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"m": 0.0}, "m must be finite and > 0"),
        ({"tau_dcl": 0.0}, "tau_dcl"),
        ({"lambda_dcl": -0.1}, "lambda_dcl"),
        ({"infonce": False, "lambda_dcl": 0.0}, "lambda_dcl"),
        ({"m_placement": "both"}, "m_placement"),
        ({"dcl_reduction": "max"}, "dcl_reduction"),
    ],
)
def test_simcsepp_bad_values_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        checked_params("simcsepp", **overrides)


def test_simcsepp_with_m1_no_dcl_dropout_negatives_is_simcse(encoder, sents_batch, simcse_ref):
    method = make_method("simcsepp", encoder.hidden_size, m=1.0, lambda_dcl=0.0, off_dropout=False)
    assert_same(loss_and_grads(method, encoder, sents_batch), simcse_ref)


class RecordingEncode(TrainingEncode):
    """TrainingEncode that records the dropout rates seen INSIDE each encoder forward."""

    def __init__(self, encoder) -> None:
        super().__init__(encoder)
        encoder.packed_training = False  # the model's own forward, which the hook sees
        self.rates: list[list[float]] = []
        self.outputs: list[torch.Tensor] = []
        encoder.model.register_forward_pre_hook(lambda mod, args: self.rates.append(dropout_rates(mod)))

    def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
        out = super().__call__(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)
        self.outputs.append(out)
        return out


def test_simcsepp_off_dropout_pass_runs_without_dropout_and_with_gradient(sents_batch):
    encoder = load_encoder("random:tiny", seed=1)
    encoder.train()
    before = dropout_rates(encoder)
    assert any(r > 0 for r in before)
    encode = RecordingEncode(encoder)
    method = make_method("simcsepp", encoder.hidden_size)
    out = method.compute_loss(encode, sents_batch, step=0)
    assert len(encode.rates) == 2
    assert encode.rates[0] == dropout_rates(encoder.model) and any(r > 0 for r in encode.rates[0])
    assert all(r == 0.0 for r in encode.rates[1])
    assert dropout_rates(encoder) == before  # switched back on for the next step
    assert encoder.training
    (g0,) = torch.autograd.grad(out.loss, encode.outputs[1], retain_graph=True)
    assert g0.abs().sum() > 0  # the dropout-off negatives carry gradient
    assert set(out.metrics) == {"loss_infonce", "loss_dcl"}


def test_simcsepp_dcl_only_makes_no_dropout_off_pass(sents_batch):
    encoder = load_encoder("random:tiny", seed=1)
    encoder.train()
    encode = RecordingEncode(encoder)
    method = make_method("simcsepp", encoder.hidden_size, infonce=False)
    out = method.compute_loss(encode, sents_batch, step=0)
    assert len(encode.rates) == 1
    assert set(out.metrics) == {"loss_dcl"}
    assert out.loss.item() == pytest.approx(0.1 * float(out.metrics["loss_dcl"]), rel=1e-5)
