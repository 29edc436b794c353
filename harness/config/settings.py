"""Run configurations, profiles and run ids: the ONE path from (profile, method, params, overrides) to a run.

:func:`resolve_settings` turns a profile and run-level overrides into :class:`RunSettings` (every
field coerced and checked once, the corpus found and hashed once); :func:`resolve_run` adds a method
and its typed parameters, validated once against the encoder's hidden size
(:attr:`RunSettings.hidden_size`: one lookup per settings, through
:func:`harness.config.models.hidden_size_of`, that never waits on an unreachable hub). A table spec's
record is built when the spec loads (:class:`harness.specs.model.RunSpec`) and reaches the trial as it
is: Ray ships the :class:`RunConfig` object, nothing rebuilds or re-checks it. ``harness train``,
``harness grid``, ``harness tables`` and ``harness plots`` all go through these two functions;
:func:`resolve_config` is both in one call.

A :class:`RunConfig` is the fully resolved description of one run. Method parameters travel inside
it as their typed record (:class:`methods.params.MethodParams`); they become a dict only in
:meth:`RunConfig.to_dict`, at the store and Ray boundaries, and come back typed in
:meth:`RunConfig.from_dict`.

The run id is a hash of every result-affecting field, so the same configuration always maps to the
same record and a grid can skip runs that already finished. The corpus enters the id through
``corpus_id`` (file name + hash of its content), never through its path, so records stay valid when
the data moves to another machine. ``profile`` is a label and the device is not a field: neither
enters the id. ``threads`` (torch's CPU threads) does: on a CPU the thread count changes the
floating-point reduction order and so the numbers, so a profile fixes it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.coerce import coerce_value
from harness.config.choices import (
    FinalTasks,
    Pooler,
    PostWhiten,
    Precision,
    TransferMode,
)
from harness.config.hardware import auto_precision
from harness.config.models import hidden_size_of
from harness.config.paths import resolve_corpus, resolve_data_root
from harness.config.profiles import PROFILES
from harness.errors import ConfigError, DataError, HarnessError, did_you_mean


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Everything about a run but its method: what a profile and run-level overrides decide.

    Attributes:
        model: encoder name (``minilm``, ``random:tiny``, a hub name or a local path).
        corpus: the corpus file path as resolved on this machine (not part of the id).
        corpus_id: ``<file name>:<12 hex of the sha256 of its content>`` (part of the id).
        profile: the profile the run was resolved from (a label, not part of the id).
        batch_size: sentences per step (B).
        max_length: training truncation length in tokens (evaluation never truncates).
        max_steps: optimiser steps; ``None`` = one full epoch over the corpus (``len // B`` steps,
            the last partial batch dropped); ``0`` = no training, only evaluate the encoder; at
            most 10000000 (:data:`STEPS_MAX`).
        eval_every: STS-B dev evaluation (and model selection) every this many steps.
        lr: peak learning rate of AdamW (linear decay to 0).
        weight_decay: AdamW weight decay (the papers: 0).
        grad_clip: gradient-norm clipping threshold; 0 switches clipping off.
        warmup_steps: linear warm-up steps before the decay (the papers: 0); at most the run's steps.
        seed: seeds Python, NumPy and torch, and the corpus shuffle (0 .. 2**32 - 1).
        threads: torch CPU threads of the run (part of the id: it changes CPU numbers); ``None`` =
            torch's default (GPU profiles, where it does not matter).
        train_pooler: the raw feature the method's head sits on during training.
        eval_pooler: the pooler of every evaluation (dev evaluation and final tasks).
        final_tasks: what the best checkpoint is evaluated on at the end.
        transfer_mode: SentEval parameter set of the transfer tasks.
        post_whiten: post-processing of the evaluation embeddings, fitted on corpus sentences:
            BERT-whitening (``zca``, ``pca``) or BERT-flow (``flow``, ``flow_glow``: a normalising
            flow fitted by maximum likelihood, seeded by ``seed``; :mod:`harness.postprocess.flow`).
        post_whiten_sentences: how many corpus sentences (the file's first) fit the post-processing:
            at most the corpus's, and for ``zca``/``pca`` more than the encoder's width (fewer make
            the covariance singular).
        precision: the arithmetic of training and of the STS-B dev evaluations (model selection):
            ``fp32``, ``tf32`` (fp32 with TF32 matrix products on a GPU), ``bf16`` or ``fp16``
            (autocast; fp16 with loss scaling), as :mod:`harness.encoder.precision` says. A profile
            or override may say ``auto``: bf16 where the run's device has native bf16
            (:func:`harness.config.hardware.auto_precision`), resolved here.
        eval_precision: the same choices for the final tasks: ``fp32`` (default: SentEval's numbers)
            or another (``bf16`` is faster where the hardware has native bf16;
            ``benchmarks/bench_sts_eval.py`` prints the speed and how far the STS scores move,
            docs/correctness.md the measured deviation).
        length_buckets: encode each training call's rows in this many length-sorted buckets, each
            padded only to its own longest row (1 = one padded block; see
            :class:`harness.encoder.training_encode.TrainingEncode`). Same loss function, less padding work.
    """

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
    threads: int | None = None
    train_pooler: Pooler = "cls_before_pooler"
    eval_pooler: Pooler = "cls_before_pooler"
    final_tasks: FinalTasks = "sts"
    transfer_mode: TransferMode = "fasttest"
    post_whiten: PostWhiten = "none"
    post_whiten_sentences: int = 10000
    precision: Precision = "fp32"
    eval_precision: Precision = "fp32"
    length_buckets: int = 1

    def __post_init__(self) -> None:
        hints = _SETTING_TYPES
        for f in dataclasses.fields(RunSettings):
            value = getattr(self, f.name)
            object.__setattr__(self, f.name, _coerce_field(f.name, value, hints[f.name]))
        _validate(self)

    def settings_dict(self) -> dict[str, Any]:
        """The run-level fields only, JSON-able."""
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(RunSettings)}

    @functools.cached_property
    def hidden_size(self) -> int:
        """The encoder's hidden size, looked up once per settings object (not a field: it is not in
        :meth:`settings_dict`, the run id or equality; :func:`harness.config.models.hidden_size_of` reads
        it without loading weights).

        Raises:
            ModelLoadError: the encoder's config cannot be found.
        """
        return hidden_size_of(self.model)


_SETTING_TYPES: dict[str, Any] = typing.get_type_hints(RunSettings)


SETTING_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSettings))


OVERRIDABLE: tuple[str, ...] = tuple(name for name in SETTING_FIELDS if name not in ("corpus_id", "profile"))
"""Run-level override keys (every setting but the corpus hash and the label)."""


AUTO_SETTINGS: tuple[str, ...] = ("precision", "eval_precision")
"""Settings a profile or an override may give as ``auto`` (bf16 where the hardware has it natively)."""


MISSING_CORPUS = "missing"
"""The hash part of ``corpus_id`` while only planning without the corpus file (ids provisional)."""


def override_label(key: str) -> str:
    """How a message names a run-setting override (grid, check, reporters, a spec's row): ``override lr``."""
    return f"override {key}"


def flag_label(key: str) -> str:
    """How a message names a run setting given as its own flag (``harness train``): ``--max-steps``."""
    return "--" + key.replace("_", "-")


def resolve_settings(
    profile: str = "cpu",
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
    *,
    require_corpus: bool = True,
    device: str | None = None,
    label: Callable[[str], str] = override_label,
) -> RunSettings:
    """A profile plus run-level overrides -> validated :class:`RunSettings` (no method yet).

    Args:
        profile: a key of :data:`PROFILES`.
        overrides: run-level overrides; keys are :data:`OVERRIDABLE` names (strings are coerced).
        data_root: where relative corpus paths (``corpus/...``) are looked up; default: the usual
            data-root search (``$HARNESS_DATA``, ``./data``, ``../shared/data``).
        require_corpus: False only to PLAN (``--dry-run``, ``check``): a missing corpus then gets
            ``corpus_id = "<name>:missing"``, so the run ids are provisional (the corpus content
            enters the id); nothing can train from such settings.
        device: the run's torch device, which ``auto`` precisions are resolved for
            (:func:`~harness.config.hardware.auto_precision`); None = the device a run takes by default.
        label: how a coercion error names an override's key (where the value came from):
            :func:`override_label` or, for a command's own flags, :func:`flag_label`.

    Raises:
        ConfigError: unknown profile or override key (with a close-match hint), or a bad value.
        DataError: the corpus file cannot be found (when ``require_corpus``).
    """
    values = _profile_values(profile, overrides, device, label)
    corpus_path, ident = _corpus(str(values.pop("corpus")), data_root, require_corpus)
    return RunSettings(corpus=corpus_path, corpus_id=ident, profile=profile, **values)


def _profile_values(
    profile: str, overrides: Mapping[str, Any] | None, device: str | None, label: Callable[[str], str]
) -> dict[str, Any]:
    """The profile's values with ``overrides`` on top (keys checked, values coerced and named by
    ``label``) and ``auto`` precisions resolved for ``device``."""
    if profile not in PROFILES:
        hint = did_you_mean(profile, PROFILES)
        raise ConfigError(f"unknown profile {profile!r}{hint}; choose one of {', '.join(PROFILES)}")
    values: dict[str, Any] = dict(PROFILES[profile])
    for key, value in (overrides or {}).items():
        if key not in OVERRIDABLE:
            valid = ", ".join(sorted(OVERRIDABLE))
            raise ConfigError(
                f"unknown run setting {key!r}{did_you_mean(key, OVERRIDABLE)}; valid settings: {valid}"
            )
        values[key] = value if _is_auto(key, value) else _coerce_field(label(key), value, _SETTING_TYPES[key])
    for key in AUTO_SETTINGS:
        if _is_auto(key, values.get(key)):
            values[key] = auto_precision(device)
    return values


def _is_auto(key: str, value: Any) -> bool:
    return key in AUTO_SETTINGS and str(value).strip().lower() == "auto"


def _corpus(corpus_arg: str, data_root: Path | None, require_corpus: bool) -> tuple[str, str]:
    """``(path, corpus_id)`` of the corpus setting: found under the data root, or (planning only)
    where it would be, with a provisional id."""

    root = data_root
    if root is None and not Path(corpus_arg).expanduser().is_absolute():
        try:
            root = resolve_data_root(None)
        except HarnessError:
            root = None
    try:
        corpus_path = resolve_corpus(Path(corpus_arg).expanduser(), root)
    except DataError:
        if require_corpus:
            raise
        planned = Path(corpus_arg) if root is None or Path(corpus_arg).is_absolute() else root / corpus_arg
        return str(planned), f"{planned.name}:{MISSING_CORPUS}"
    return str(corpus_path), corpus_id(corpus_path)


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
def digest(data: Mapping[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): jsonable(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _coerce_field(name: str, value: Any, hint: Any) -> Any:
    """Coerce a field value (possibly a command-line string) to the field's declared type."""

    if typing.get_origin(hint) is Literal:
        return coerce_value(name, value, hint)
    args = typing.get_args(hint)
    optional = type(None) in args
    target = next((a for a in args if a is not type(None)), hint) if args else hint
    if value is None or (
        optional and isinstance(value, str) and value.strip().lower() in ("none", "epoch", "")
    ):
        if optional:
            return None
        raise ConfigError(f"{name} must not be empty")

    return coerce_value(name, value, target)


STEPS_MAX = 10_000_000
"""The most optimiser steps (and warm-up steps, steps between dev evaluations) a run may ask for: 640
epochs of the papers' 1M-sentence corpus at batch 64; more is a typo (``1e15``), not a run."""
COUNT_MAX = 2**31 - 1
"""The most sentences, tokens or buckets any count setting may hold (torch indexes with 32 bits)."""
SEED_MAX = 2**32 - 1
"""NumPy's seeds are 32-bit."""
THREADS_MAX = 1024
"""More torch threads than this is a typo (a trial's threads are its CPUs: --cpus-per-trial)."""


def _validate(settings: RunSettings) -> None:
    """Range checks of the run-level fields (choices and finiteness were checked by coercion): the one
    place each setting's bounds are stated, whether it came from a flag, a spec or a profile."""
    _within("batch_size", settings.batch_size, 2, COUNT_MAX, " (in-batch negatives)")
    _within("max_length", settings.max_length, 2, COUNT_MAX)
    if settings.max_steps is not None:
        _within("max_steps", settings.max_steps, 0, STEPS_MAX, " (or none = one epoch)")
    _within("eval_every", settings.eval_every, 1, STEPS_MAX)
    if not settings.lr > 0:
        raise ConfigError(f"lr must be finite and > 0, got {settings.lr}")
    if settings.weight_decay < 0:
        raise ConfigError(f"weight_decay must be >= 0, got {settings.weight_decay}")
    if settings.grad_clip < 0:
        raise ConfigError(f"grad_clip must be >= 0 (0 = off), got {settings.grad_clip}")
    _within("warmup_steps", settings.warmup_steps, 0, STEPS_MAX)
    if settings.max_steps is not None and settings.warmup_steps > settings.max_steps:
        raise ConfigError(_warmup_beyond(settings.warmup_steps, f"max_steps {settings.max_steps}"))
    _within("seed", settings.seed, 0, SEED_MAX, " (NumPy's range)")
    if settings.threads is not None:
        _within("threads", settings.threads, 1, THREADS_MAX, " (or none = torch's default)")
    _within("length_buckets", settings.length_buckets, 1, COUNT_MAX)
    check_post_whiten_sentences("post_whiten_sentences", settings.post_whiten_sentences)


def _within(name: str, value: int, low: int, high: int, note: str = "") -> None:
    """``<name> must be from <low> to <high><note>, got <value>`` unless ``low <= value <= high``."""
    if not low <= value <= high:
        raise ConfigError(f"{name} must be from {low} to {high}{note}, got {value}")


POST_WHITEN_SENTENCES_MIN = 2
"""The fewest sentences a post-processing is fitted on (a mean and a spread need two)."""


def check_post_whiten_sentences(name: str, value: int) -> None:
    """The bounds of the post-processing's sentence count, whether a run's ``post_whiten_sentences``
    or ``harness eval --whiten-sentences`` (``name``) gives it."""
    _within(name, value, POST_WHITEN_SENTENCES_MIN, COUNT_MAX)


def steps_per_epoch(num_sentences: int, batch_size: int) -> int:
    """Full batches in one pass over the corpus (the last partial batch is dropped): a one-epoch
    run's steps (``max_steps`` none)."""
    return num_sentences // batch_size


def _warmup_beyond(warmup: int, steps: str) -> str:
    return (
        f"warmup_steps {warmup} is more than the run's {steps}: the learning rate would never reach "
        "its peak; lower warmup_steps"
    )


def corpus_problems(settings: RunSettings, sentences: int, width: int | None = None) -> list[ConfigError]:
    """What ``settings`` ask of a corpus of ``sentences`` sentences (and an encoder ``width`` wide,
    where known) that it cannot give, found where the corpus is read, before a run trains: a one-epoch
    run (``max_steps`` none) shorter than its warm-up; more post-processing sentences than the
    corpus holds; for BERT-whitening (``zca``, ``pca``) no more sentences than the width, which leaves
    the covariance singular. One error each, naming the setting."""
    problems = []
    epoch = steps_per_epoch(sentences, settings.batch_size)
    if settings.max_steps is None and settings.warmup_steps > epoch:
        steps = f"{epoch} steps (one epoch of {sentences} sentences)"
        problems.append(ConfigError(_warmup_beyond(settings.warmup_steps, steps)))
    if settings.post_whiten == "none":
        return problems
    fit = settings.post_whiten_sentences
    if fit > sentences:
        problems.append(
            ConfigError(
                f"post_whiten_sentences {fit} is more than the {sentences} sentences of corpus "
                f"{settings.corpus}: lower post_whiten_sentences to at most {sentences}"
            )
        )
    elif width is not None and settings.post_whiten in ("zca", "pca") and fit <= width:
        problems.append(
            ConfigError(
                f"post_whiten_sentences {fit} is not more than the encoder's width {width}: "
                f"{settings.post_whiten} whitening needs more sentences than channels (else its covariance "
                f"is singular); raise post_whiten_sentences above {width}"
            )
        )
    return problems
