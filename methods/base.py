"""The contract between the training loop and a method: the :class:`Method` class and its helpers.

The parameters are :mod:`methods.params`, the device checks :mod:`methods.checks`, the encoder call a
method receives :mod:`harness.encoder.calls`.

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
   encoder's weights, which is what lets runs share their step-0 dev
   evaluation (:mod:`harness.run.dev_cache`).
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

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic

import torch
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.params import MethodParams, P

ModelLoader = Callable[[str], nn.Module]
"""``load(name)``: the harness loads another encoder (a model name or folder) onto the run's device,
checked to share the run's tokenizer, for a method's :meth:`Method.bind` (DCLR's complementary
model)."""


Metric = torch.Tensor | float
"""A scalar to log: a detached 0-d tensor (read by the loop at evaluation points only) or a float."""


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
    """Base class of every registered method, generic over its typed parameters.

    Subclasses name their record in the base (``class SimCSE(ContrastiveMethod[SimCSEParams])``,
    which also sets :attr:`params_cls`), set the class attributes and implement
    :meth:`compute_loss`; stateful methods also override :meth:`bind` / :meth:`after_step` (see
    the module docstring).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    citation: ClassVar[str]
    params_cls: ClassVar[type[MethodParams]]
    """The class of its typed parameters: taken from the generic argument (``Method[XParams]``)."""
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
        pooler everywhere a run embeds sentences: the dev evaluations, the final STS and transfer tasks and
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
        does: the dev evaluations, the final tasks and the post-whitening fitted on them. Called after
        :meth:`bind` (the text may depend on the encoder's tokenizer, e.g. its mask token).
        """
        return None
