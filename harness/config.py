"""Run configurations, profiles and run ids.

A :class:`RunConfig` is the fully resolved description of one training run: method and its complete
parameter record (defaults included), encoder, corpus, budget, optimiser settings, poolers, seed and
what to evaluate at the end. :func:`resolve_config` builds one from a method name, method parameter
overrides, a profile and run-level overrides, and checks everything that can be checked before a
model is loaded (unknown names, misspelt keys, a group count that does not divide the hidden size).

The run id is a hash of every result-affecting field, so the same configuration always maps to the
same record and a grid can skip runs that already finished. The corpus enters the id through
``corpus_id`` (file name + hash of its content), never through its path, so records stay valid when
the data moves to another machine. ``profile`` is a label and the device is not a field: neither
enters the id.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError

FINAL_TASKS: tuple[str, ...] = ("sts", "transfer", "all", "none")
TRANSFER_MODES: tuple[str, ...] = ("fasttest", "test")
POST_WHITEN: tuple[str, ...] = ("none", "zca", "pca")
PRECISIONS: tuple[str, ...] = ("fp32", "bf16")

NOT_IN_ID: frozenset[str] = frozenset({"profile", "corpus"})
"""Fields that do not affect results: a label and a machine-specific path (``corpus_id`` is in)."""

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
}
"""Hidden sizes of the papers' hub encoders, so that a paper-profile grid is expanded and validated
without reading their configs from the hub (offline machines, and no per-config network round trip)."""


@dataclass(frozen=True)
class RunConfig:
    """The fully resolved configuration of one run.

    Attributes:
        method: registered method name.
        params: the method's complete parameter record (defaults included), JSON-able, sorted keys.
        model: encoder name (``minilm``, ``random:tiny``, a hub name or a local path).
        corpus: the corpus file path as resolved on this machine (not part of the id).
        corpus_id: ``<file name>:<12 hex of the sha256 of its content>`` (part of the id).
        profile: the profile the run was resolved from (a label, not part of the id).
        batch_size: sentences per step (B).
        max_length: training truncation length in tokens (evaluation never truncates).
        max_steps: optimiser steps; ``None`` = one full epoch over the corpus (``len // B`` steps,
            the last partial batch dropped); ``0`` = no training, only evaluate the encoder.
        eval_every: STS-B dev evaluation (and model selection) every this many steps.
        lr: peak learning rate of AdamW (linear decay to 0).
        weight_decay: AdamW weight decay (the papers: 0).
        grad_clip: gradient-norm clipping threshold; 0 switches clipping off.
        warmup_steps: linear warm-up steps before the decay (the papers: 0).
        seed: seeds Python, NumPy and torch, and the corpus shuffle.
        train_pooler: the raw feature the method's head sits on during training.
        eval_pooler: the pooler of every evaluation (dev probe and final tasks).
        final_tasks: what the best checkpoint is evaluated on at the end.
        transfer_mode: SentEval parameter set of the transfer tasks.
        post_whiten: BERT-whitening of the evaluation embeddings (estimated on corpus sentences).
        post_whiten_sentences: how many corpus sentences (the file's first) estimate the whitening.
        precision: ``fp32`` or ``bf16`` (autocast of the training forward pass).
    """

    method: str
    params: dict[str, Any]
    model: str
    corpus: str
    corpus_id: str
    profile: str
    batch_size: int
    max_length: int
    max_steps: int | None
    eval_every: int
    lr: float
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    warmup_steps: int = 0
    seed: int = 42
    train_pooler: str = "cls_before_pooler"
    eval_pooler: str = "cls_before_pooler"
    final_tasks: str = "sts"
    transfer_mode: str = "fasttest"
    post_whiten: str = "none"
    post_whiten_sentences: int = 10000
    precision: str = "fp32"

    def __post_init__(self) -> None:
        params = {str(k): self.params[k] for k in sorted(self.params)}
        object.__setattr__(self, "params", params)
        for f in dataclasses.fields(self):
            if f.name == "params":
                continue
            value = getattr(self, f.name)
            object.__setattr__(self, f.name, _coerce_field(f.name, value, _FIELD_TYPES[f.name]))
        _validate(self)

    def __hash__(self) -> int:
        return hash(self.run_id())

    # -- ids ------------------------------------------------------------------------------------
    def id_fields(self, *, with_seed: bool = True) -> dict[str, Any]:
        """The result-affecting fields that the run id hashes."""
        out = {k: v for k, v in self.to_dict().items() if k not in NOT_IN_ID}
        if not with_seed:
            out.pop("seed")
        return out

    def run_id(self) -> str:
        """``<method>-<12 hex>``: a hash of every result-affecting field, seed included."""
        return f"{self.method}-{_digest(self.id_fields())}"

    def group_id(self) -> str:
        """Like :meth:`run_id` without the seed, so that tables can aggregate seeds."""
        return f"{self.method}-{_digest(self.id_fields(with_seed=False))}"

    # -- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild a config from :meth:`to_dict`; unknown keys raise :class:`ConfigError`."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown run-config field(s) {', '.join(map(repr, unknown))}")
        values: dict[str, Any] = {k: (dict(v) if k == "params" else v) for k, v in data.items()}
        return cls(**values)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


_FIELD_TYPES: dict[str, Any] = typing.get_type_hints(RunConfig)
CONFIG_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunConfig))
OVERRIDABLE: tuple[str, ...] = tuple(
    name for name in CONFIG_FIELDS if name not in ("method", "params", "corpus_id", "profile")
)
"""Run-level override keys (everything but the method, its params, the corpus hash and the label)."""

# -- profiles -------------------------------------------------------------------------------------
PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {
        "model": "minilm",
        "corpus": "corpus/nli-sentences.txt",
        "batch_size": 64,
        "max_length": 32,
        "max_steps": 30,
        "eval_every": 15,
        "lr": 3e-5,
        "final_tasks": "sts",
        "transfer_mode": "fasttest",
    },
    "paper": {
        "model": "bert-base-uncased",
        "corpus": "corpus/wiki1m_for_simcse.txt",
        "batch_size": 64,
        "max_length": 32,
        "max_steps": None,
        "eval_every": 125,
        "lr": 3e-5,
        "final_tasks": "all",
        "transfer_mode": "test",
    },
    "smoke": {
        "model": "random:tiny",
        "corpus": "corpus/nli-sentences.txt",
        "batch_size": 8,
        "max_length": 32,
        "max_steps": 4,
        "eval_every": 2,
        "lr": 3e-5,
        "final_tasks": "sts",
        "transfer_mode": "fasttest",
    },
}
"""What a run costs.

``cpu``: the packaged MiniLM on the NLI corpus, 30 steps of batch 64 with an STS-B dev probe at steps
0, 15 and 30, then the seven STS tasks. Measured under ``make run`` (two single-threaded Ray trials on
two cores): a SimCSE step about 9 s, a dev probe about 38 s, so the four-run demo grid fits in 30
minutes; raise ``max_steps`` where cores are plentiful. ``paper``: the papers' setting (bert-base, 1M
Wikipedia sentences, one epoch). ``smoke``: a tiny random BERT and four steps, for tests and CI only,
never a result."""


def resolve_config(
    method: str,
    params: Mapping[str, Any] | None = None,
    profile: str = "cpu",
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
) -> RunConfig:
    """Resolve a method, its parameter overrides, a profile and run-level overrides into a config.

    Args:
        method: registered method name.
        params: method parameter overrides (strings are coerced to the field types).
        profile: a key of :data:`PROFILES`.
        overrides: run-level overrides; keys are :class:`RunConfig` field names.
        data_root: where relative corpus paths (``corpus/...``) are looked up; default: the usual
            data-root search (``$HARNESS_DATA``, ``./data``, ``../shared/data``).

    Returns:
        A validated :class:`RunConfig`.

    Raises:
        ConfigError: unknown profile, method, parameter or override key (with a close-match hint), or
            a value out of range (a group count that does not divide the hidden size included).
        DataError: the corpus file cannot be found.
    """
    from harness.paths import resolve_corpus, resolve_data_root
    from methods import build_params

    if profile not in PROFILES:
        raise ConfigError(
            f"unknown profile {profile!r}{_hint(profile, PROFILES)}; choose one of {', '.join(PROFILES)}"
        )
    values: dict[str, Any] = dict(PROFILES[profile])
    for key, value in (overrides or {}).items():
        if key not in OVERRIDABLE:
            valid = ", ".join(sorted(OVERRIDABLE))
            raise ConfigError(
                f"unknown run setting {key!r}{_hint(key, OVERRIDABLE)}; valid settings: {valid}"
            )
        values[key] = value
    model = str(values["model"])
    record = build_params(method, dict(params or {}))
    record.validate(_hidden_size(model))

    corpus_arg = str(values.pop("corpus"))
    root = data_root
    if root is None and not Path(corpus_arg).expanduser().is_absolute():
        try:
            root = resolve_data_root(None)
        except HarnessError:
            root = None
    corpus_path = resolve_corpus(Path(corpus_arg).expanduser(), root)
    return RunConfig(
        method=method,
        params=record.to_dict(),
        corpus=str(corpus_path),
        corpus_id=corpus_id(corpus_path),
        profile=profile,
        **values,
    )


def corpus_id(path: Path) -> str:
    """``<file name>:<first 12 hex of the sha256 of the content>`` (cached per path, size and mtime)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _CORPUS_IDS:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        _CORPUS_IDS[key] = f"{path.name}:{digest.hexdigest()[:12]}"
    return _CORPUS_IDS[key]


_CORPUS_IDS: dict[tuple[str, int, int], str] = {}


# -- helpers --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _hidden_size(model: str) -> int:
    """The encoder's hidden size: the papers' hub encoders from a table (no network), else its config."""
    from harness.encoder import model_hidden_size

    if model in KNOWN_HIDDEN_SIZES and not Path(model).expanduser().exists():
        return KNOWN_HIDDEN_SIZES[model]
    return model_hidden_size(model)


def _hint(name: str, choices: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _digest(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _coerce_field(name: str, value: Any, hint: Any) -> Any:
    """Coerce a field value (possibly a command-line string) to the field's declared type."""
    args = typing.get_args(hint)
    optional = type(None) in args
    target = next((a for a in args if a is not type(None)), hint) if args else hint
    if value is None or (
        optional and isinstance(value, str) and value.strip().lower() in ("none", "epoch", "")
    ):
        if optional:
            return None
        raise ConfigError(f"{name} must not be empty")
    from harness.coerce import coerce_value

    return coerce_value(name, value, target)


def _choice(name: str, value: str, choices: typing.Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}{_hint(value, choices)}")


def _validate(config: RunConfig) -> None:
    from harness.encoder import POOLERS

    if not config.method:
        raise ConfigError("method must not be empty")
    if config.batch_size < 2:
        raise ConfigError(f"batch_size must be >= 2 (in-batch negatives), got {config.batch_size}")
    if config.max_length < 2:
        raise ConfigError(f"max_length must be >= 2, got {config.max_length}")
    if config.max_steps is not None and config.max_steps < 0:
        raise ConfigError(f"max_steps must be >= 0 (or none = one epoch), got {config.max_steps}")
    if config.eval_every < 1:
        raise ConfigError(f"eval_every must be >= 1, got {config.eval_every}")
    if not config.lr > 0:
        raise ConfigError(f"lr must be > 0, got {config.lr}")
    if config.weight_decay < 0:
        raise ConfigError(f"weight_decay must be >= 0, got {config.weight_decay}")
    if config.grad_clip < 0:
        raise ConfigError(f"grad_clip must be >= 0 (0 = off), got {config.grad_clip}")
    if config.warmup_steps < 0:
        raise ConfigError(f"warmup_steps must be >= 0, got {config.warmup_steps}")
    if config.post_whiten_sentences < 2:
        raise ConfigError(f"post_whiten_sentences must be >= 2, got {config.post_whiten_sentences}")
    _choice("train_pooler", config.train_pooler, POOLERS)
    _choice("eval_pooler", config.eval_pooler, POOLERS)
    _choice("final_tasks", config.final_tasks, FINAL_TASKS)
    _choice("transfer_mode", config.transfer_mode, TRANSFER_MODES)
    _choice("post_whiten", config.post_whiten, POST_WHITEN)
    _choice("precision", config.precision, PRECISIONS)


__all__ = [
    "CONFIG_FIELDS",
    "FINAL_TASKS",
    "OVERRIDABLE",
    "POST_WHITEN",
    "PROFILES",
    "TRANSFER_MODES",
    "RunConfig",
    "corpus_id",
    "resolve_config",
]
