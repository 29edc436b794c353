"""An encoder forward with an edit inside the embedding layer, the last layer computed for [CLS] only,
and the length buckets a training call is cut into."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.encoder.calls import EmbeddingEdit


def bert_word_embeddings(model: nn.Module) -> nn.Embedding | None:
    """The word-embedding table of a BERT encoder, whose ``inputs_embeds`` input is exactly its
    word-embedding lookup (position and token-type embeddings are added inside either way);
    None for other architectures (RoBERTa, for one, derives position ids from ``input_ids``)."""
    if getattr(getattr(model, "config", None), "model_type", None) != "bert":
        return None
    table = getattr(getattr(model, "embeddings", None), "word_embeddings", None)
    return table if isinstance(table, nn.Embedding) else None


def length_buckets(mask: torch.Tensor, count: int) -> list[tuple[torch.Tensor, int]]:
    """A right-padded call's rows cut into ``count`` length buckets, as ``(rows, width)``: the rows
    sorted by token count (stable) in ``min(count, n)`` contiguous parts, each at its longest row's
    width; one part of every row at the call's width where that is at most one."""
    n, full = int(mask.shape[0]), int(mask.shape[1])
    if min(count, n) <= 1:
        return [(torch.arange(n, device=mask.device), full)]
    lengths = mask.sum(dim=1)
    parts = torch.tensor_split(torch.argsort(lengths, stable=True), min(count, n))
    return [(rows, int(lengths[rows].max())) for rows in parts]


def edited_forward(
    model: Any,
    name: str,
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
    edits this is the model's own call (tests/encoder/test_forward.py compares every pooler). The
    output has the fields :meth:`~harness.encoder.model.SentenceEncoder.features` reads
    (``hidden_states`` when asked). ``name`` names the encoder in the error of a non-BERT one.
    """
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    table = bert_word_embeddings(model)
    if table is None:
        raise ConfigError(f"edits inside the embedding layer need a BERT encoder; {name} is not one")
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
    """The attention mask the model's own forward builds from ``mask`` (Transformers 5 and 4), always
    built: Transformers' shortcut for a mask without padding reads ``mask.all()`` back to the host,
    which makes a GPU step wait, and an all-true mask attends the same (bitwise on the CPU)."""
    try:
        from transformers.masking_utils import create_bidirectional_mask
    except ImportError:  # Transformers 4 before the masking utilities
        return model.get_extended_attention_mask(mask, tuple(mask.shape))
    return create_bidirectional_mask(
        config=model.config, inputs_embeds=hidden, attention_mask=mask, allow_is_bidirectional_skip=False
    )


def built_mask(model: Any, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``batch`` with its attention mask built as :func:`_attention_mask` builds it, for the model's own
    forward (which passes a built mask through); unchanged before Transformers 5."""
    try:
        import transformers.masking_utils  # noqa: F401
    except ImportError:
        return batch
    mask = batch["attention_mask"]
    shape = (*mask.shape, 0)  # the mask reads the rows, the width, the dtype and the device only
    stub = torch.empty(shape, dtype=next(model.parameters()).dtype, device=mask.device)
    return {**batch, "attention_mask": _attention_mask(model, stub, mask)}


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
