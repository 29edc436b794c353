"""The contract between the training loop and a method.

502 lines: the contract's parameters, encoder call, device checks and the Method class; the device
checks (``Check``, ``deferred_checks``, ``device_check``) should move to a module of their own.

The loop knows nothing method-specific. Each step it tokenises B sentences (truncated to the
profile's max length) and calls ``method.compute_loss(encode, batch, step)``. The method decides how
many encoder calls it makes and on which rows (m dropout views in ONE call on a repeated batch, a
dropout-free pass, K samples, ...), applies its own trainable head, and returns a scalar loss plus
any scalar metrics worth logging (per-term losses, correlation rank, ...).

A method is an ``nn.Module`` with a small lifecycle the loop drives, so a method with state (a
momentum encoder, a negative queue) needs no change to the loop:

1. ``Method(params, hidden_size)``: build heads and buffers (``params`` was validated when the run
   was resolved, against the encoder's width).
2. ``bind(encoder, load)``: called once for every method, before the optimiser is built. The base
   keeps a reference to the encoder (``self.encoder``, not a sub-module); a method that needs more
   overrides it, calls ``super().bind(encoder, load)`` first, and builds encoder-dependent state (a
   momentum copy via :meth:`Method.register_frozen`, heads sized from the encoder). A second model
   is not loaded by the method: ``load(name)`` asks the harness for it (same device, same tokenizer
   checked). A method reads the encoder and updates it through the optimiser; it registers no hooks
   on it and swaps none of its modules, so evaluation (the encoder alone) is a function of the
   encoder's weights, which is what lets runs share their step-0 probe
   (:mod:`harness.run.probe_cache`).
3. each step: ``compute_loss(encode, batch, step)``; the optimiser steps over
   ``encoder.parameters()`` and :meth:`Method.trainable_parameters`; then ``after_step(step)``
   (momentum updates, queue bookkeeping) returns metrics to log. Metrics are detached tensors (or
   floats): the loop reads them at evaluation points, so a step never waits on the device. A
   condition that must fail the run (a non-finite input) is a :func:`device_check`, read there too;
   parameters are checked once, in :meth:`MethodParams.validate`, never in the step.
4. model selection snapshots :meth:`Method.snapshot_state` (the trainable part only: frozen copies
   registered with :meth:`Method.register_frozen` and buffers are not copied into best-state
   snapshots) and restores it with :meth:`Method.restore_state`.

What a method costs (encoder rows with and without gradient per sentence, whole encoder copies,
parameters of its own) is not declared: the harness measures it by binding the method to a small
encoder of the run's width and running one loss (:func:`harness.run.footprint.footprint`).

Hyper-parameters are a frozen dataclass subclassing :class:`MethodParams`. Its fields are the grid
keys that exist for the method: a misspelt ``--set`` key or grid key fails in
:meth:`MethodParams.from_overrides` before anything trains, and :meth:`MethodParams.validate` checks
values (against the encoder's hidden size too, once, when the run is resolved) and raises
:class:`~harness.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

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
    (and those that need the encoder's hidden size).
    """

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, coerce_value(f.name, getattr(self, f.name), hints[f.name]))

    def validate(self, hidden_size: int | None = None) -> None:
        """Raise :class:`ConfigError` naming the field when a value is out of range.

        ``hidden_size=None`` checks what is wrong under every encoder (a table spec, when loaded);
        a width adds the checks that depend on it (:func:`harness.config.run_config.resolve_run`).
        """

    def describe(self, hidden_size: int) -> dict[str, str]:
        """What the parameters resolve to on an encoder of this width (kept in the run record)."""
        return {}

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


TEMPERATURE_RANGE = (1e-3, 1e3)
"""What a softmax temperature may be: 1/tau scales cosines in [-1, 1], so a smaller tau overflows the
logits (1e-320 gives inf, then a NaN loss) and a larger one flattens them to nothing; the papers use
0.05 and SimCSE++'s DCL 0.05 to 50."""


def check_temperature(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value`` lies in :data:`TEMPERATURE_RANGE`."""
    low, high = TEMPERATURE_RANGE
    if not low <= value <= high:
        raise ConfigError(f"{name} must be from {low:g} to {high:g} (a softmax temperature), got {value}")


def check_non_negative(value: float, name: str) -> None:
    """Raise ConfigError naming ``name`` unless ``value >= 0`` (finite: see :func:`check_positive`)."""
    if not value >= 0:
        raise ConfigError(f"{name} must be finite and >= 0, got {value}")


@dataclass(frozen=True)
class ContrastiveParams(MethodParams):
    """The fields every method here shares (declared once).

    Attributes:
        temperature: tau of the InfoNCE softmax (paper: 0.05; 0.001 to 1000).
        mlp: apply the training-only MLP head (Linear + Tanh) to the pooled feature.
    """

    temperature: float = 0.05
    mlp: bool = True

    def validate(self, hidden_size: int | None = None) -> None:
        check_temperature(self.temperature, "temperature")


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
    """Token-level features of one encoder call (``encode.tokens(batch)``).

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

    ``encode(batch)`` returns the pooled training feature ``[n, d]`` (before any head), with
    gradient. ``encode.tokens(batch)`` is the same call returning token-level features instead: a
    :class:`TokenFeatures` (the last layer's hidden states ``[n, L, d]`` of every position, padding
    zeroed, and the attention mask); the training pooler is not applied (IS-BERT's CNN reads every
    token). Both take the same options:

    ``dropout=False`` turns every dropout module off for this call only (the model otherwise stays in
    training mode); a float ``dropout=r`` (``0 <= r < 1``) sets every dropout module's rate to ``r``
    for this call only (SCD's two views at two rates); ``0.0`` is ``False`` exactly. ``True``
    (default) keeps the encoder's own rates.

    ``encoder=`` runs the call on another module instead of the run's encoder: a copy of the bound
    encoder (e.g. a momentum key encoder registered with :meth:`Method.register_frozen`), pooled
    with the run's training pooler and cut into the run's length buckets exactly as the run's own
    calls are. Wrap the call in ``torch.no_grad()`` when it needs no gradient.

    ``embeddings=`` (an :class:`EmbeddingEdit`) perturbs this call inside the embedding layer (token
    or feature cutoff, adversarial noise): the loop runs the embedding module, the method's edit,
    then the transformer layers and the pooler (BERT encoders only; same pooler and length buckets).
    A token shuffle needs no edit: the batch may carry ``position_ids`` ``[n, L]``, which the
    model's embedding module reads. No hook is registered and no module swapped either way.
    """

    hidden_size: int

    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> torch.Tensor: ...

    def tokens(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> TokenFeatures: ...


ModelLoader = Callable[[str], nn.Module]
"""``load(name)``: the harness loads another encoder (a model name or folder) onto the run's device,
checked to share the run's tokenizer, for a method's :meth:`Method.bind` (DCLR's complementary
model)."""


Metric = torch.Tensor | float
"""A scalar to log: a detached 0-d tensor (read by the loop at evaluation points only) or a float."""


class Check(NamedTuple):
    """A condition that fails the run, found on the device (:func:`device_check`).

    Attributes:
        message: the error's text, with fields ``{0}``, ``{1}``, ... that ``numbers`` fill.
        numbers: a 1-d integer tensor; the first counts what went wrong (0: nothing did).
        note: kept in the record beside the error (``{values}``: ``values`` as a list; ``{0}``, ...).
        values: numbers worth keeping with the note (a covariance's eigenvalues).
    """

    message: str
    numbers: torch.Tensor
    note: str = ""
    values: torch.Tensor | None = None

    def text(self, numbers: list[int]) -> tuple[str, str]:
        """The message and the note, filled with ``numbers`` (read) and the values (read now)."""
        values = self.values.tolist() if self.values is not None else None
        return self.message.format(*numbers), self.note.format(*numbers, values=values)


_DEFERRED: ContextVar[list[Check] | None] = ContextVar("deferred_checks", default=None)


@contextlib.contextmanager
def deferred_checks() -> Iterator[list[Check]]:
    """Collect the :func:`device_check` calls of the code inside instead of reading them: the loop's
    step runs in one, and the loop reads the checks with the losses at its next evaluation point."""
    checks: list[Check] = []
    token = _DEFERRED.set(checks)
    try:
        yield checks
    finally:
        _DEFERRED.reset(token)


def device_check(found: Callable[[], Check], check_now: Callable[[], None]) -> None:
    """Fail the run where ``found().numbers[0] > 0`` without waiting for the device.

    Inside :func:`deferred_checks` (the training step) the check stays on the device and the loop
    raises :class:`~harness.errors.TrainingError` (``"step <s>: "`` and the message) at its next
    evaluation point; elsewhere (a loss computed on its own) ``check_now()`` reads what it needs and
    raises at once.
    """
    sink = _DEFERRED.get()
    if sink is None:
        check_now()
    else:
        check = found()
        values = None if check.values is None else check.values.detach()
        sink.append(check._replace(numbers=check.numbers.detach().reshape(-1).to(torch.long), values=values))


@dataclass
class LossOutput:
    """A scalar loss and scalar metrics to log (detached tensors or floats)."""

    loss: torch.Tensor
    metrics: Mapping[str, Metric] = field(default_factory=dict)


def encoder_parts(encoder: nn.Module) -> dict[str, nn.Module]:
    """``encoder.parts()`` of the harness's encoder (``embeddings``, ``layers``, ``pooler_dense``
    where the architecture has them), or none for another module."""
    parts = getattr(encoder, "parts", None)
    return dict(parts()) if callable(parts) else {}


def encoder_setting(encoder: nn.Module, name: str, default: float) -> float:
    """A number of the bound encoder's configuration (``encoder.config_value``), or ``default``."""
    value = getattr(encoder, "config_value", None)
    return float(value(name, default)) if callable(value) else default


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


class Method(nn.Module, Generic[P]):
    """Base class of every registered method, generic over its parameter record.

    Subclasses name their record in the base (``class SimCSE(ContrastiveMethod[SimCSEParams])``,
    which also sets :attr:`params_cls`), set the class attributes and implement
    :meth:`compute_loss`; stateful methods also override :meth:`bind` / :meth:`after_step` (see
    the module docstring).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    citation: ClassVar[str]
    params_cls: ClassVar[type[MethodParams]]
    """The parameter record's class: taken from the generic argument (``Method[XParams]``)."""
    smoke_params: ClassVar[tuple[Mapping[str, Any], ...]] = ({},)
    """Parameter sets (grid key -> value) of the short runs every registered method gets in the
    tests (``tests/system/test_cpu_runs.py``, the registry tests): the defaults, plus settings that reach
    the method's other code paths. Each must be valid on the tests' tiny and the packaged encoder."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            for arg in typing.get_args(base):
                if isinstance(arg, type) and issubclass(arg, MethodParams):
                    cls.params_cls = arg

    def __init__(self, params: P, hidden_size: int) -> None:
        super().__init__()
        if not isinstance(params, self.params_cls):
            raise ConfigError(
                f"{self.name}: expected {self.params_cls.__name__}, got {type(params).__name__}"
            )
        self.params: P = params
        self.hidden_size = hidden_size
        self._frozen: list[str] = []

    # -- lifecycle --------------------------------------------------------------------------------
    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        """Called by the loop once, for every method, before the optimiser is built.

        Keeps a reference to the encoder that is NOT registered as a sub-module (so the encoder is
        not part of the method's parameters or state). A method that overrides it calls
        ``super().bind(encoder, load)`` first, then sets up its encoder-dependent state (a momentum
        copy via :meth:`register_frozen`, heads sized from the encoder); ``load(name)`` gives it
        another encoder (:data:`ModelLoader`).
        """
        object.__setattr__(self, "_bound_encoder", encoder)

    @property
    def encoder(self) -> nn.Module:
        """The encoder given to :meth:`bind`."""
        bound = self.__dict__.get("_bound_encoder")
        if bound is None:
            raise RuntimeError(f"{self.name}: not bound to an encoder yet (Method.bind)")
        return bound

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        raise NotImplementedError

    def after_step(self, step: int) -> Mapping[str, Metric]:
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

    def sentence_input(self) -> Callable[[str], str] | None:
        """The text the loop embeds in place of each evaluation sentence, for a method whose sentence
        embedding needs another input than the sentence alone (PromptBERT's template around it):
        ``text(sentence) -> str``. None (default): the sentence itself.

        It goes with :meth:`sentence_head` (the head reads the token states of that text; a run of a
        method that returns an input but no head stops before training) and applies wherever the head
        does: the dev probes, the final tasks and the post-whitening fitted on them. Called after
        :meth:`bind` (the text may depend on the encoder's tokenizer, e.g. its mask token).
        """
        return None
