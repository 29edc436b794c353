"""Loading an encoder by name: the packaged MiniLM, random BERTs, a local folder or a hub name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from harness.config.models import (
    DEFAULT_MODEL,
    RANDOM_SIZES,
    check_model_inputs,
    encoder_problems,
    first_line,
    hub_offline,
    load_tokenizer,
    packaged_model_dir,
)
from harness.encoder.model import SentenceEncoder
from harness.errors import ConfigError, ModelLoadError


def load_encoder(
    name: str | None = None, device: str | torch.device = "cpu", seed: int = 0
) -> SentenceEncoder:
    """Load an encoder by name (see the module docstring); raise :class:`ModelLoadError` on failure."""
    from transformers import AutoModel, BertConfig, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    name = name or DEFAULT_MODEL
    if name != DEFAULT_MODEL:  # a missing path, a folder without a loadable tokenizer, ...
        check_model_inputs(name)
    try:
        if name == DEFAULT_MODEL:
            path = str(packaged_model_dir())
            model = AutoModel.from_pretrained(path)
            tokenizer = load_tokenizer(path)
        elif name.startswith("random:"):
            size = name.split(":", 1)[1]
            tokenizer = load_tokenizer(str(packaged_model_dir()))
            config = BertConfig(vocab_size=tokenizer.vocab_size, **RANDOM_SIZES[size])
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                model = BertModel(config)
        else:
            local = Path(name).expanduser().exists()
            path = str(Path(name).expanduser()) if local else name
            offline = not local and hub_offline()  # a cached hub model loads without asking the hub
            model = AutoModel.from_pretrained(path, local_files_only=offline)
            tokenizer = load_tokenizer(path, local_files_only=offline)
    except (ConfigError, ModelLoadError):
        raise
    except Exception as exc:  # from_pretrained raises OSError, ValueError, HTTP errors, ...
        raise ModelLoadError(f"cannot load encoder {name!r}: {first_line(exc)}") from exc
    encoder = SentenceEncoder(model, tokenizer, name)
    check_loaded(encoder)  # what loaded: a hub model had no folder to read first
    return encoder.to(device)


def check_loaded(
    encoder: SentenceEncoder, max_length: int | None = None, poolers: Mapping[str, str] | None = None
) -> None:
    """The loaded encoder checked as its folder is (:func:`~harness.config.models.encoder_problems`:
    vocabulary, positions against ``max_length`` and the tokenizer's length) and against the poolers a
    run reads it with (``{setting: pooler}``: ``cls`` needs a pooler layer,
    :meth:`~harness.encoder.model.SentenceEncoder.pooler_problem`); the first problem raised."""
    model_config: Any = getattr(encoder.model, "config", None)
    config = model_config.to_dict() if model_config is not None else {}
    problems = encoder_problems(encoder.name, config, encoder.tokenizer, max_length)
    problems += [p for name, pooler in (poolers or {}).items() if (p := encoder.pooler_problem(pooler, name))]
    if problems:
        raise problems[0]


def loader_beside(encoder: SentenceEncoder) -> Callable[[str], SentenceEncoder]:
    """``load(name)`` for a method's :meth:`~methods.base.Method.bind`: another encoder, on this
    encoder's device, refused (:class:`ConfigError`) unless it shares this encoder's vocabulary (a
    method feeds it the same token ids)."""

    def load(name: str) -> SentenceEncoder:
        other = load_encoder(name, device=encoder.device)
        vocab = getattr(encoder.tokenizer, "vocab_size", None)
        if vocab is not None and other.tokenizer.vocab_size != vocab:
            raise ConfigError(
                f"model {name!r} has a vocabulary of {other.tokenizer.vocab_size} tokens, the run's encoder "
                f"{vocab}: it must share the run's tokenizer"
            )
        return other

    return load
