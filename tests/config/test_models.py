"""Hidden sizes of the encoders: the known table, a local config, the packaged model, never the
network when the hub is offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.models import hidden_size_of
from harness.errors import ModelLoadError
from tests.helpers import copy_packaged_tokenizer, edit_json


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


def short_folder(folder: Path, stated: int | None = None) -> Path:
    """A model folder of 16 positions without weights (the check reads none) and the packaged
    tokenizer, whose stated length is 512 unless ``stated``."""
    folder.mkdir()
    config = {"model_type": "bert", "hidden_size": 32, "vocab_size": 30522, "max_position_embeddings": 16}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    copy_packaged_tokenizer(folder)
    if stated is not None:
        edit_json(folder / "tokenizer_config.json", model_max_length=stated)
    return folder


def test_the_positions_hold_what_training_and_evaluation_tokenize_to(tmp_path: Path) -> None:
    from harness.config.models import model_problems
    from harness.errors import ConfigError

    folder = short_folder(tmp_path / "short")
    (short,) = model_problems(str(folder))  # evaluation embeds sentences whole: the tokenizer's 512
    assert isinstance(short, ModelLoadError) and str(short).startswith(
        f"model {folder}: its tokenizer takes inputs of up to 512 tokens (model_max_length), more than "
        "the model's 16 positions (max_position_embeddings)"
    )
    fits = short_folder(tmp_path / "fits", stated=16)
    assert model_problems(str(fits), 16) == []
    (too_long,) = model_problems(str(fits), 17)  # training's max_length
    assert isinstance(too_long, ConfigError) and "max_length 17 is more than the 16 positions" in str(
        too_long
    )


def test_a_name_that_is_no_model_folder_is_one_problem(tmp_path: Path) -> None:
    from harness.config.models import model_problems

    (missing,) = model_problems(str(tmp_path / "no" / "model"))
    assert str(missing) == f"model path does not exist: {tmp_path / 'no' / 'model'}"
    (tmp_path / "weights.bin").write_bytes(b"")
    (a_file,) = model_problems(str(tmp_path / "weights.bin"))
    assert (
        str(a_file)
        == f"model {tmp_path / 'weights.bin'}: {tmp_path / 'weights.bin'} is a file, not a model folder"
    )
    assert model_problems("minilm", 512) == [] and model_problems("random:tiny", 512) == []
