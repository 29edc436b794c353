"""The contract between the training loop and a method.

The loop knows nothing method-specific. Each step it tokenises B sentences (truncated to the
profile's max length) and calls ``method.compute_loss(encode, batch, step)``. The method decides how
many encoder calls it makes and on which rows (m dropout views in ONE call on a repeated batch, a
dropout-free pass, K samples, ...), applies its own trainable head, and returns a scalar loss plus
any scalar metrics worth logging (per-term losses, correlation rank, ...).

A method is an ``nn.Module`` with a small lifecycle the loop drives, so a method with state (a
momentum encoder, a negative queue) needs no change to the loop:

1. ``Method(params, hidden_size)``: build heads and buffers.
2. ``attach(encoder)`` -> ``bind(encoder)``: called once, before the optimiser is built, for
   methods that declare ``uses_encoder = True``; this is the only way a method reaches the encoder
   module (``self.encoder`` afterwards, e.g. to copy it into a momentum encoder). A method reads
   the encoder and updates it through the optimiser; it registers no hooks on it and swaps none of
   its modules, so evaluation (the encoder alone) is a function of the encoder's weights, which
   is what lets runs share their step-0 probe (:mod:`harness.probe_cache`).
3. each step: ``compute_loss(encode, batch, step)``; the optimiser steps over
   ``encoder.parameters()`` and :meth:`Method.trainable_parameters`; then ``after_step(step)``
   (momentum updates, queue bookkeeping) returns metrics to log.
4. model selection snapshots :meth:`Method.snapshot_state` (the trainable part only: frozen copies
   registered with :meth:`Method.register_frozen` and buffers are not copied into best-state
   snapshots) and restores it with :meth:`Method.restore_state`.

Hyper-parameters are a frozen dataclass subclassing :class:`MethodParams`. Its fields are the grid
keys that exist for the method: a misspelt ``--set`` key or grid key fails in
:meth:`MethodParams.from_overrides` before anything trains, and :meth:`MethodParams.validate` checks
values (against the encoder's hidden size too) and raises :class:`~harness.errors.ConfigError`
naming the field.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar, overload

import torch
from torch import nn

from harness.coerce import coerce_value
from harness.errors import ConfigError, did_you_mean

P = TypeVar("P", bound="MethodParams")


SWITCH = "switch"
"""Field-metadata key marking a parameter that chooses between a paper's and its released code's
reading (its value is a one-line description). Reporters state every switch of a run."""


def switch(default: Any, description: str) -> Any:
    """A dataclass field that chooses between two readings of a method (paper vs released code)."""
    return field(default=default, metadata={SWITCH: description})


@dataclass(frozen=True)
class MethodParams:
    """Base of every method's hyper-parameter record.

    ``__post_init__`` coerces every field to its declared type, once, whatever built the record
    (:func:`harness.coerce.coerce_value`: ``Literal`` fields hold one of their choices, numbers are
    finite, command-line text becomes numbers). :meth:`validate` adds the method's own range checks
    (and those that need the encoder's hidden size); :meth:`validate_once` runs it once per width.
    """

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, coerce_value(f.name, getattr(self, f.name), hints[f.name]))

    def validate(self, hidden_size: int | None = None) -> None:
        """Raise :class:`ConfigError` naming the field when a value is out of range.

        ``hidden_size=None`` checks what is wrong under every encoder (a table spec, when loaded);
        a width adds the checks that depend on it. Callers use :meth:`validate_once`.
        """

    def validate_once(self, hidden_size: int | None = None) -> None:
        """:meth:`validate`, unless this record already passed it for ``hidden_size``.

        The record remembers the widths it passed outside its fields (so not in :meth:`to_dict`,
        equality or the run id), and the memory travels with it when it is pickled: the grid checks
        a spec's record once for the profile's encoder, and the trial's :class:`Method` (built from
        the same record, shipped by Ray) does not check it again.
        """
        passed: set[int | None] = self.__dict__.setdefault("_validated_for", set())
        if hidden_size not in passed:
            self.validate(hidden_size)
            passed.add(hidden_size)

    def describe(self, hidden_size: int) -> dict[str, str]:
        """What the parameters resolve to on an encoder of this width (kept in the run record)."""
        return {}

    def encoder_rows(self) -> float:
        """Encoder rows WITH gradient per corpus sentence in one training step (SimCSE: 2, its two
        dropout views): each costs a forward and a backward and keeps its activations until the
        backward. The grid's cost estimate (:mod:`harness.cost`) scales a measured SimCSE step by
        ``encoder_rows() / 2`` and the memory estimate (:mod:`harness.memory`) counts their tokens."""
        return 2.0

    def no_grad_encoder_rows(self) -> float:
        """Encoder rows WITHOUT gradient per corpus sentence in one training step (0 for most
        methods; a momentum key encoder's pass under ``torch.no_grad`` counts here): a forward only,
        no activations kept. :mod:`harness.cost` and :mod:`harness.memory` count them at a share of
        a row with gradient (``NO_GRAD_ROW_SHARE`` there)."""
        return 0.0

    def encoder_copies(self) -> tuple[int, int]:
        """Whole copies of the encoder the method holds beside the run's own, as ``(trained, frozen)``
        (0, 0 for most methods; CT's trained second model: (1, 0); a momentum key encoder or a frozen
        complementary model: (0, 1), counted whole even where it shares the embedding layer). A
        trained copy carries its gradients and AdamW's two moments; :mod:`harness.memory` adds their
        bytes to the estimate, and a registry test compares the declaration with what ``bind`` holds."""
        return (0, 0)

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def switches(cls) -> dict[str, str]:
        """The paper-vs-released-code switches of this record: ``{field: description}``."""
        return {f.name: str(f.metadata[SWITCH]) for f in dataclasses.fields(cls) if SWITCH in f.metadata}

    @classmethod
    def from_overrides(cls: type[P], overrides: Mapping[str, Any] | None = None, method: str = "") -> P:
        """Defaults updated by ``overrides``; unknown keys and badly typed values raise ConfigError."""
        overrides = dict(overrides or {})
        known = {f.name for f in dataclasses.fields(cls)}
        for key in overrides:
            if key not in known:
                hint = did_you_mean(key, known)
                valid = ", ".join(sorted(known)) or "none"
                who = f"method {method!r}" if method else cls.__name__
                raise ConfigError(f"unknown parameter {key!r} for {who}{hint}; valid keys: {valid}")
        return cls(**overrides)  # __post_init__ coerces the values

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form (tuples become lists): only for the store and process boundaries."""
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def check_positive(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value > 0`` (a record's numbers are finite already:
    :meth:`MethodParams.__post_init__` coerced them)."""
    if not value > 0:
        raise ConfigError(f"{name} must be finite and > 0, got {value}")


def check_non_negative(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value >= 0`` (finite: see :func:`check_positive`)."""
    if not value >= 0:
        raise ConfigError(f"{name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class ContrastiveParams(MethodParams):
    """The fields every method here shares (declared once).

    Attributes:
        temperature: tau of the InfoNCE softmax (paper: 0.05).
        mlp: apply the training-only MLP head (Linear + Tanh) to the pooled feature.
    """

    temperature: float = 0.05
    mlp: bool = True

    def validate(self, hidden_size: int | None = None) -> None:
        check_positive(self.temperature, "temperature")


EmbeddingFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""An edit inside the embedding layer: ``(x [n, L, d], attention_mask [n, L], rows [n]) -> [n, L, d]``.

``rows`` are the indices of these rows in the batch the method passed to ``encode`` (a length bucket
sees a subset, trimmed to its own width ``L``), so a perturbation computed for the whole batch is
applied as ``x + delta[rows, :L]``."""


@dataclass(frozen=True)
class EmbeddingEdit:
    """Where a method edits one encoder call inside the embedding layer (``encode(embeddings=...)``).

    Attributes:
        words: applied to the word-embedding lookup, before the position and token-type embeddings,
            the embedding LayerNorm and its dropout are added.
        output: applied to the embedding layer's output (after its LayerNorm and dropout), which
            the first transformer layer reads.
    """

    words: EmbeddingFn | None = None
    output: EmbeddingFn | None = None


@dataclass(frozen=True)
class TokenFeatures:
    """Token-level features of one encoder call (``encode(batch, tokens=True)``).

    Attributes:
        hidden: the last layer's hidden states ``[n, L, d]``, with gradient; every padding position
            (``attention_mask == 0``) is exactly 0, whatever the call's length buckets, so a row's
            features are a function of its own tokens only.
        attention_mask: the batch's attention mask ``[n, L]`` (1 = a real token, special tokens
            included), the same tensor the method passed in.
    """

    hidden: torch.Tensor
    attention_mask: torch.Tensor


class EncodeFn(Protocol):
    """What the loop hands a method: one encoder call on a tokenised batch.

    Returns the pooled training feature ``[n, d]`` (before any head), with gradient. With
    ``dropout=False`` every dropout module is off for this call only (the model otherwise stays in
    training mode) and is back on afterwards. A float ``dropout=r`` (``0 <= r < 1``) sets every
    dropout module's rate to ``r`` for this call only (SCD's two views at two rates); ``0.0`` is
    ``False`` exactly. ``True`` (default) keeps the encoder's own rates.

    ``encoder=`` runs the call on another module instead of the run's encoder: a copy of the bound
    encoder (e.g. a momentum key encoder registered with :meth:`Method.register_frozen`), pooled
    with the run's training pooler and cut into the run's length buckets exactly as the run's own
    calls are. Wrap the call in ``torch.no_grad()`` when it needs no gradient (and declare its rows
    in :meth:`MethodParams.no_grad_encoder_rows`).

    ``embeddings=`` (an :class:`EmbeddingEdit`) perturbs this call inside the embedding layer (token
    or feature cutoff, adversarial noise): the loop runs the embedding module, the method's edit,
    then the transformer layers and the pooler (BERT encoders only; same pooler and length buckets).
    A token shuffle needs no edit: the batch may carry ``position_ids`` ``[n, L]``, which the
    model's embedding module reads. No hook is registered and no module swapped either way.

    ``tokens=True`` returns the call's token-level features instead of the pooled feature: a
    :class:`TokenFeatures` (the last layer's hidden states ``[n, L, d]`` of every position, padding
    zeroed, and the attention mask), with the same dropout, ``encoder=``, ``embeddings=``, length
    buckets and precision as the pooled call; the training pooler is not applied (IS-BERT's CNN
    reads every token). ``tokens=False`` (default) is the pooled call, unchanged.
    """

    hidden_size: int

    @overload
    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
        tokens: Literal[False] = False,
    ) -> torch.Tensor: ...

    @overload
    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
        tokens: Literal[True],
    ) -> TokenFeatures: ...

    @overload
    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
        tokens: bool = False,
    ) -> torch.Tensor | TokenFeatures: ...


@dataclass
class LossOutput:
    """A scalar loss and scalar metrics to log (floats, already detached)."""

    loss: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


def repeat_rows(batch: Mapping[str, torch.Tensor], n: int) -> dict[str, torch.Tensor]:
    """Repeat each sentence ``n`` times, sentence-major: rows ``[s0, s0, ..., s1, s1, ...]``.

    One encoder call on the result gives ``n`` dropout views per sentence; reshape the ``[B*n, d]``
    output to ``[B, n, d]`` to get them as ``views[:, k]``.
    """
    return {k: v.repeat_interleave(n, dim=0) for k, v in batch.items()}


class MLPHead(nn.Module):
    """SimCSE's training head: ``Linear(d, d)`` + Tanh, initialised normal(0, 0.02), zero bias.

    Freshly initialised (not the checkpoint's own pooler), used in training only.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        nn.init.normal_(self.dense.weight, mean=0.0, std=0.02)
        nn.init.zeros_(self.dense.bias)
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class Method(nn.Module):
    """Base class of every registered method.

    Subclasses set the class attributes and implement :meth:`compute_loss`; stateful methods also
    set ``uses_encoder`` and override :meth:`bind` / :meth:`after_step` (see the module docstring).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    citation: ClassVar[str]
    params_cls: ClassVar[type[MethodParams]]
    uses_encoder: ClassVar[bool] = False
    """Declare that :meth:`bind` must receive the encoder module before training starts."""
    smoke_params: ClassVar[tuple[Mapping[str, Any], ...]] = ({},)
    """Parameter sets (grid key -> value) of the short runs every registered method gets in the
    tests (``tests/test_cpu_runs.py``, the registry tests): the defaults, plus settings that reach
    the method's other code paths. Each must be valid on the tests' tiny and the packaged encoder."""

    def __init__(self, params: MethodParams, hidden_size: int) -> None:
        super().__init__()
        if not isinstance(params, self.params_cls):
            raise ConfigError(
                f"{self.name}: expected {self.params_cls.__name__}, got {type(params).__name__}"
            )
        params.validate_once(hidden_size)
        self.params = params
        self.hidden_size = hidden_size
        self._frozen: list[str] = []

    # -- lifecycle --------------------------------------------------------------------------------
    def attach(self, encoder: nn.Module) -> None:
        """Called by the loop once, before the optimiser is built, when ``uses_encoder`` is set.

        Keeps a reference to the encoder that is NOT registered as a sub-module (so the encoder is not
        part of the method's parameters or state) and calls :meth:`bind`.
        """
        object.__setattr__(self, "_bound_encoder", encoder)
        self.bind(encoder)

    @property
    def encoder(self) -> nn.Module:
        """The encoder given to :meth:`attach` (only for methods that declare ``uses_encoder``)."""
        bound = self.__dict__.get("_bound_encoder")
        if bound is None:
            raise RuntimeError(f"{self.name}: no encoder attached (set uses_encoder = True)")
        return bound

    def bind(self, encoder: nn.Module) -> None:
        """Set up encoder-dependent state (e.g. a momentum copy via :meth:`register_frozen`)."""

    def bind_parameters(self) -> int:
        """Trainable parameters :meth:`bind` will add beside whole encoder copies (those are
        ``params.encoder_copies()``): heads it builds only once it sees the encoder. 0 by default;
        :func:`harness.memory.head_parameters` adds them, and a registry test compares the count
        with what ``bind`` builds."""
        return 0

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        raise NotImplementedError

    def after_step(self, step: int) -> dict[str, float]:
        """Called after every optimiser step (momentum updates, queues); returns metrics to log."""
        return {}

    # -- state ------------------------------------------------------------------------------------
    def register_frozen(self, name: str, module: nn.Module) -> nn.Module:
        """Attach ``module`` as a frozen sub-module (a momentum copy): never optimised, never snapshotted.

        Its parameters get ``requires_grad = False``; it still moves with ``.to(device)`` and is part
        of ``state_dict()`` (so a resumable checkpoint keeps it), but not of :meth:`snapshot_state`.
        """
        module.requires_grad_(False)
        self.add_module(name, module)
        if name not in self._frozen:
            self._frozen.append(name)
        return module

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters the optimiser updates: everything but frozen sub-modules."""
        return [p for name, p in self.named_parameters() if p.requires_grad and not self._is_frozen(name)]

    def snapshot_state(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the trainable state (no frozen sub-modules, no buffers) for model selection."""
        buffers = {name for name, _ in self.named_buffers()}
        return {
            k: v.detach().to("cpu", copy=True)
            for k, v in self.state_dict().items()
            if k not in buffers and not self._is_frozen(k)
        }

    def restore_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load a :meth:`snapshot_state` back (frozen sub-modules and buffers keep their values)."""
        missing, unexpected = self.load_state_dict(state, strict=False)
        trainable_missing = [
            k for k in missing if k in dict(self.named_parameters()) and not self._is_frozen(k)
        ]
        if trainable_missing or unexpected:
            raise RuntimeError(
                f"snapshot does not match the method: missing {trainable_missing}, unexpected {unexpected}"
            )

    def _is_frozen(self, key: str) -> bool:
        return any(key == f or key.startswith(f + ".") for f in self._frozen)

    def export_head(self) -> nn.Linear | None:
        """The trained ``Linear(d, d)`` of a training head, if the method has one, for the ``cls`` pooler.

        Methods with a head override this; the loop never looks a head up by attribute name.
        """
        return None

    def sentence_head(self) -> nn.Module | None:
        """The method's own sentence embedding, if it has one: a sub-module of the method mapping
        token features to sentence vectors, ``head(hidden [n, L, d], attention_mask [n, L]) -> [n, e]``
        (``hidden`` as :class:`TokenFeatures` has it: the encoder's last layer, padding zeroed).

        None (default): a run is evaluated through the encoder's ``eval_pooler``. A head replaces the
        pooler everywhere a run embeds sentences: the dev probes, the final STS and transfer tasks and
        the post-whitening fitted on them (in eval mode, at the run's precisions). Being a sub-module,
        its trained weights are part of :meth:`snapshot_state`, so the best step's head is restored
        with the best encoder before the final evaluation. A saved encoder cannot hold it: ``harness
        export`` and ``harness eval`` refuse such a checkpoint (IS-BERT's CNN: ``methods/isbert.py``).
        """
        return None
