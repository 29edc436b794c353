"""Loading encoders: the random ones are seeded; bad names and paths are one clear error."""

from __future__ import annotations

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
    with pytest.raises(ConfigError, match="unknown pooler 'mean'"):
        check_pooler("mean")
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_encoder("./no/such/model")
    with pytest.raises(ConfigError, match="random:huge"):
        load_encoder("random:huge")
    assert hidden_size_of("random:tiny") == 64
