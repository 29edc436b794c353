"""Hidden sizes of the encoders: the known table, a local config, the packaged model, never the
network when the hub is offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.models import hidden_size_of
from harness.errors import ModelLoadError


def test_packaged_hidden_size_without_weights():
    assert hidden_size_of(None) == 384


def test_hidden_size_lookup_never_asks_an_offline_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import harness.config.models as enc

    enc.hidden_size_of.cache_clear()
    asked: list[str] = []

    def no_network(*args: object, **kwargs: object) -> None:
        asked.append("connect")
        raise OSError("no network in this test")

    from huggingface_hub import constants

    monkeypatch.setattr("socket.create_connection", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # restored afterwards
    assert enc.hidden_size_of("sentence-transformers/bert-base-nli-mean-tokens") == 768  # known table
    local = tmp_path / "enc"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"hidden_size": 96}))
    assert enc.hidden_size_of(str(local)) == 96  # a local config, read without transformers
    with pytest.raises(ModelLoadError, match="hub is offline or unreachable"):
        enc.hidden_size_of("someone/not-cached-anywhere")
    assert asked == []  # HF_HUB_OFFLINE: not even a connection attempt
    enc.hidden_size_of.cache_clear()
