"""DCLR's complementary feature as released (RUCAIBox/DCLR), each reading against a loop reference.

The released ``cl_vat_forward`` (simcse/models.py) pools the trained and the fixed encoder alike
with ``encoder.pooler`` (``cl_forward_denoised``: BERT's pooler, dense + tanh on [CLS]) and applies
its MLP only to the trained one (``is_fix``); the weights are ``where(cos_fix / temp > 20 phi, 0, 1)``
with the positive's set back to 1 (``mask_weights``), and with no noise negatives the loss is the
binary cross-entropy over ``softmax(cos_sim * weights)``. The reference below recomputes that from
the complementary model's own Hugging Face forward (its ``pooler_output``) in float64 without dropout,
and compares the loss with the method's for both readings of ``complementary_feature``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods.dclr import DCLR, DCLRParams

SENTENCES = [
    "a man is playing a guitar .",
    "a man plays the guitar .",
    "two dogs run through the snow",
    "the stock market fell sharply today",
    "a woman slices a tomato",
    "children play soccer in a park",
]


@pytest.fixture
def float64() -> Iterator[None]:
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def no_dropout(module: nn.Module) -> None:
    for sub in module.modules():
        if isinstance(sub, nn.Dropout):
            sub.p = 0.0


def released_loss(
    z1: torch.Tensor, z2: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor, phi: float, temp: float
) -> torch.Tensor:
    """``cl_vat_forward`` with ``noise_times = 0`` (no noise columns), written as loops."""
    b = z1.shape[0]
    cos_sim = torch.stack(
        [torch.stack([F.cosine_similarity(z1[i], z2[j], dim=0) / temp for j in range(b)]) for i in range(b)]
    )
    cos_fix = torch.stack(
        [torch.stack([F.cosine_similarity(c1[i], c2[j], dim=0) / temp for j in range(b)]) for i in range(b)]
    )
    weights = torch.where(cos_fix > phi * 20, 0.0, 1.0)  # the code's phi * 20, i.e. phi / temp at 0.05
    for i in range(b):
        weights[i, i] = 1.0  # mask_weights: eye - diag(diag(weights)) added back
    soft = torch.softmax(cos_sim * weights, -1)
    total = torch.zeros(())
    for i in range(b):
        for j in range(b):
            y = 1.0 if i == j else 0.0
            total = total - (y * torch.log(soft[i, j]) + (1 - y) * torch.log(1 - soft[i, j]))
    return total / (b * b)


def test_the_released_feature_is_the_default() -> None:
    assert DCLRParams().complementary_feature == "pooler"


@pytest.mark.parametrize("feature", ["pooler", "train_pooler"])
def test_the_loss_matches_the_released_loop(float64, feature: str) -> None:
    encoder = load_encoder("random:tiny", seed=11)
    no_dropout(encoder)
    encoder.train()
    batch = encoder.tokenize(SENTENCES, max_length=16)
    model: Any = encoder.model
    with torch.no_grad():
        out = model(**batch, return_dict=True)
    # the complementary model is a frozen copy of this encoder at the start ("initial")
    c = out.pooler_output if feature == "pooler" else out.last_hidden_state[:, 0]
    sims = F.normalize(c, dim=-1) @ F.normalize(c, dim=-1).T
    off = sims[~torch.eye(len(SENTENCES), dtype=torch.bool)]
    phi = float(off.median())  # about half of the in-batch negatives are dropped
    params = DCLRParams.from_overrides({"phi": phi, "noise_times": 0.0, "complementary_feature": feature})
    method = DCLR(params, encoder.hidden_size)
    method.bind(encoder)
    no_dropout(method)
    got = method.compute_loss(TrainingEncode(encoder), batch, step=1)
    assert 0.2 < float(got.metrics["dropped_negatives"]) < 0.8
    z = method.head(out.last_hidden_state[:, 0])  # the run's training feature (cls_before_pooler) + MLP
    expected = released_loss(z, z, c, c, phi, params.temperature)
    assert float(got.loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-10)


def test_the_two_readings_drop_different_negatives(float64) -> None:
    encoder = load_encoder("random:tiny", seed=11)
    no_dropout(encoder)
    batch = encoder.tokenize(SENTENCES, max_length=16)
    model: Any = encoder.model
    with torch.no_grad():
        out = model(**batch, return_dict=True)
    pooled = F.normalize(out.pooler_output, dim=-1)
    cls = F.normalize(out.last_hidden_state[:, 0], dim=-1)
    mask = ~torch.eye(len(SENTENCES), dtype=torch.bool)
    phi = float((pooled @ pooled.T)[mask].median())
    assert not torch.equal((pooled @ pooled.T)[mask] > phi, (cls @ cls.T)[mask] > phi)


def test_a_complementary_model_without_a_pooler_is_refused_with_the_released_feature() -> None:
    encoder = load_encoder("random:tiny", seed=12)
    model: Any = encoder.model
    model.pooler = None
    with pytest.raises(ConfigError, match="complementary_feature=train_pooler"):
        DCLR(DCLRParams(), encoder.hidden_size).bind(encoder)
    DCLR(DCLRParams(complementary_feature="train_pooler"), encoder.hidden_size).bind(encoder)
