"""Loading encoders: the random ones are seeded; bad names and paths are one clear error."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.config.models import hidden_size_of
from harness.encoder.loading import load_encoder
from harness.encoder.model import check_pooler
from harness.errors import ConfigError, ModelLoadError


def test_random_tiny_is_seeded():
    a = load_encoder("random:tiny", seed=3)
    b = load_encoder("random:tiny", seed=3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_bad_pooler_and_models():
    with pytest.raises(ConfigError, match=r"^--pooler: 'mean' is not one of 'cls_before_pooler', 'cls', "):
        check_pooler("mean", "--pooler")
    with pytest.raises(ConfigError, match=r"^pooler: 'clss' is not one of .*\(did you mean 'cls'\?\)$"):
        check_pooler("clss")  # the run settings' rule and message
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_encoder("./no/such/model")
    with pytest.raises(ConfigError, match="random:huge"):
        load_encoder("random:huge")
    assert hidden_size_of("random:tiny") == 64


def test_a_loaded_encoder_is_checked_as_its_folder_is() -> None:
    from harness.encoder.loading import check_loaded

    encoder = load_encoder("random:tiny")
    check_loaded(encoder, 512)
    with pytest.raises(ConfigError, match="max_length 513 is more than the 512 positions"):
        check_loaded(encoder, 513)
    encoder.tokenizer.model_max_length = 1024  # a hub tokenizer stating more than the model holds
    with pytest.raises(
        ModelLoadError, match=r"up to 1024 tokens \(model_max_length\), more than the model's 512"
    ):
        check_loaded(encoder)


def test_a_cls_pooler_needs_the_models_pooler_layer_before_the_run() -> None:
    from harness.encoder.loading import check_loaded

    encoder = load_encoder("random:tiny")
    check_loaded(encoder, 32, {"train_pooler": "cls", "eval_pooler": "cls"})  # BERT has one
    model: Any = encoder.model
    model.pooler = None  # as a BERT built without it (or DistilBERT) has none
    check_loaded(encoder, 32, {"train_pooler": "avg", "eval_pooler": "cls_before_pooler"})
    with pytest.raises(ConfigError, match=r"^eval_pooler 'cls' reads the model's pooler layer, and encoder "):
        check_loaded(encoder, 32, {"train_pooler": "avg", "eval_pooler": "cls"})
