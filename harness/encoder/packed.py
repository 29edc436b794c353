"""A BERT encoder's training forward on its real tokens only, with the length-bucketed forward's dropout.

:class:`~harness.encoder.training_encode.TrainingEncode` encodes a call bucket by bucket, each
bucket padded to its longest row. Every linear layer (most of a step's work) then multiplies padding
too: about 1.28x the real tokens with 4 buckets on the NLI corpus. Here the linear layers, layer
norms and feed-forward blocks run on the call's real tokens packed into one ``[T, d]`` matrix; only
the attention itself (scores, softmax, weighted sum) runs per bucket, padded to the bucket's width
as before. The last layer computes [CLS] alone, as :func:`~harness.encoder.forward.cls_only_last_layer`.

Dropout draws exactly the masks the bucketed forward draws. On the CPU each dropout draws its mask
from the global generator with ``bernoulli_`` on a tensor of its input's shape, in call order (what
it takes from the generator depends only on that shape); the bucketed forward draws, bucket after
bucket, the embedding output's mask ``[n_b, w_b, d]`` and per layer
the attention probabilities' ``[n_b, heads, w_b, w_b]`` (``[n_b, heads, 1, w_b]`` in the [CLS]-only
last layer) and the two hidden outputs' ``[n_b, w_b, d]`` (``[n_b, 1, d]``). This forward draws
the same shapes in the same order before it computes anything (:mod:`harness.encoder.keep_masks`:
the same masks, drawn as int64 numbers for less time), then keeps each hidden mask's real-token
rows. So the same seed drops the same units of the same tokens, the generator ends in
the same state, and the result equals the bucketed forward's up to float rounding
(tests/encoder/test_packed.py compares features, gradients and the generator's state).

Only where that holds: a BERT encoder with absolute positions and the standard layer (the checks in
:func:`packed_supported`), a [CLS] pooler, right padding, on the CPU (a GPU's dropout draws
differently). Everything else takes the bucketed path.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness.encoder.forward import bert_word_embeddings, length_buckets
from harness.encoder.keep_masks import draw_keep_masks

_LAYER_PARTS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.self.dropout",
    "attention.output.dense",
    "attention.output.dropout",
    "attention.output.LayerNorm",
    "intermediate",
    "output.dense",
    "output.dropout",
    "output.LayerNorm",
)


def _part(module: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        module = getattr(module, name, None)
    return module


def _supported(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    if bert_word_embeddings(model) is None or config is None:
        return False
    if getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False
    embeddings = getattr(model, "embeddings", None)
    if any(
        _part(embeddings, p) is None for p in ("position_embeddings", "token_type_embeddings", "LayerNorm")
    ):
        return False
    if not isinstance(getattr(embeddings, "dropout", None), nn.Dropout):
        return False
    layers = _part(model, "encoder.layer")
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return False
    for layer in layers:
        if any(_part(layer, p) is None for p in _LAYER_PARTS):
            return False
        if getattr(layer, "is_decoder", False) or getattr(layer, "chunk_size_feed_forward", 0):
            return False
    return True


_SUPPORTED: weakref.WeakKeyDictionary[nn.Module, bool] = weakref.WeakKeyDictionary()


def packed_supported(model: nn.Module) -> bool:
    """Whether :func:`packed_cls_states` computes ``model``'s forward: a BERT encoder (word,
    absolute position and token-type embeddings, LayerNorm, dropout), SDPA or eager attention, every
    layer a standard encoder layer (no decoder, no feed-forward chunking)."""
    known = _SUPPORTED.get(model)
    if known is None:
        known = _SUPPORTED[model] = _supported(model)
    return known


@dataclass
class _Bucket:
    """One length bucket: its rows (indices into the call), its width and its real tokens."""

    rows: torch.Tensor
    width: int
    real: torch.Tensor  # flat indices of the real tokens in the bucket's [n_b * width] positions
    keep: torch.Tensor  # [n_b, 1, 1, width]: True where a key is a real token


def _buckets(mask: torch.Tensor, count: int) -> list[_Bucket]:
    """The rows cut as :class:`~harness.encoder.training_encode.TrainingEncode` cuts them
    (:func:`~harness.encoder.forward.length_buckets`), with each bucket's real tokens."""
    out = []
    for rows, width in length_buckets(mask, count):
        keep = mask[rows, :width].to(torch.bool)
        out.append(_Bucket(rows, width, keep.reshape(-1).nonzero().squeeze(1), keep[:, None, None, :]))
    return out


def _rate(dropout: nn.Module) -> float:
    """The rate a dropout module applies now (0 in eval mode)."""
    return float(getattr(dropout, "p", 0.0)) if dropout.training else 0.0


def _dropout(x: torch.Tensor, keep: torch.Tensor | None, rate: float) -> torch.Tensor:
    """``x`` through dropout with a drawn mask: the mask in ``x``'s dtype divided by ``1 - rate`` in
    that dtype, times ``x`` (as PyTorch's CPU dropout computes it)."""
    if keep is None:
        return x
    scale = keep.to(x.dtype)
    scale.div_(1.0 - rate)
    return x * scale


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    keep: torch.Tensor,
    drop: torch.Tensor | None,
    rate: float,
) -> torch.Tensor:
    """Scaled dot-product attention of ``q [n, h, lq, s]`` over ``k``/``v [n, h, w, s]`` with masked
    keys and a drawn dropout mask on the probabilities, in at least fp32 (as SDPA's CPU path
    computes reduced-precision inputs), returned in ``q``'s dtype."""
    work = torch.promote_types(q.dtype, torch.float32)
    with torch.autocast(device_type=q.device.type, enabled=False):
        scores = (q.to(work) @ k.to(work).transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        probs = _dropout(scores.masked_fill(~keep, float("-inf")).softmax(-1), drop, rate)
        return (probs @ v.to(work)).to(q.dtype)


_Drawn = tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]
"""A layer's masks: attention probabilities, attention output, feed-forward output."""


class _Masks:
    """Every dropout mask of one call, drawn in the bucketed forward's order."""

    def __init__(self, model: nn.Module, buckets: list[_Bucket], heads: int, width: int) -> None:
        layers = list(_part(model, "encoder.layer"))
        device = buckets[0].rows.device
        self.embedding_rate = _rate(model.embeddings.dropout)  # type: ignore[union-attr,arg-type]
        self.rates = [
            (
                float(layer.attention.self.dropout.p) if layer.attention.self.training else 0.0,
                _rate(layer.attention.output.dropout),
                _rate(layer.output.dropout),
            )
            for layer in layers
        ]
        shapes: list[tuple[tuple[int, ...], float]] = []  # every mask, in the bucketed forward's order
        for bucket in buckets:
            n, w = int(bucket.rows.shape[0]), bucket.width
            shapes.append(((n, w, width), 1.0 - self.embedding_rate))
            for i, (attention, hidden_a, hidden_b) in enumerate(self.rates):
                lq = 1 if i == len(layers) - 1 else w
                shapes += [((n, heads, lq, w), 1.0 - attention), ((n, lq, width), 1.0 - hidden_a)]
                shapes.append(((n, lq, width), 1.0 - hidden_b))
        drawn = iter(draw_keep_masks(shapes, device))
        self.embedding: list[torch.Tensor | None] = []
        self.layers: list[list[_Drawn]] = []
        for _bucket in buckets:
            self.embedding.append(next(drawn))
            self.layers.append([(next(drawn), next(drawn), next(drawn)) for _ in self.rates])


def _real_rows(masks: list[torch.Tensor | None], buckets: list[_Bucket]) -> torch.Tensor | None:
    """The real-token rows of bucket masks ``[n_b, w_b, d]``, packed as the tokens are."""
    if masks[0] is None:
        return None
    return torch.cat(
        [m.reshape(-1, m.shape[-1])[b.real] for m, b in zip(masks, buckets, strict=True)]  # type: ignore[union-attr]
    )


def _cls_rows(masks: list[torch.Tensor | None]) -> torch.Tensor | None:
    """[CLS]-only masks ``[n_b, 1, d]`` of every bucket as ``[n, d]`` in packed row order."""
    if masks[0] is None:
        return None
    return torch.cat([m[:, 0] for m in masks])  # type: ignore[index]


def packed_cls_states(model: nn.Module, batch: dict[str, torch.Tensor], length_buckets: int) -> torch.Tensor:
    """The last layer's [CLS] states ``[n, d]`` of a tokenised call, in the call's row order, as the
    length-bucketed forward with a [CLS]-only last layer computes them (see the module docstring)."""
    config: Any = getattr(model, "config")  # noqa: B009
    embeddings: Any = model.embeddings
    layers: Any = list(_part(model, "encoder.layer"))
    mask = batch["attention_mask"]
    width = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    size = width // heads
    buckets = _buckets(mask, length_buckets)
    masks = _Masks(model, buckets, heads, width)

    # the real tokens, packed bucket by bucket, row by row
    def packed(values: torch.Tensor) -> torch.Tensor:  # [n, L, ...] -> [T, ...]
        return torch.cat([values[b.rows, : b.width].reshape(-1, *values.shape[2:])[b.real] for b in buckets])

    n_full, full = int(mask.shape[0]), int(mask.shape[1])
    positions = batch.get("position_ids")
    if positions is None:
        positions = torch.arange(full, device=mask.device).expand(n_full, full)
    types = batch.get("token_type_ids")
    if types is None:
        types = torch.zeros_like(mask, dtype=torch.long)
    words = (
        packed(batch["inputs_embeds"])
        if "inputs_embeds" in batch
        else embeddings.word_embeddings(packed(batch["input_ids"]))
    )
    hidden = words + embeddings.token_type_embeddings(packed(types))
    hidden = embeddings.LayerNorm(hidden + embeddings.position_embeddings(packed(positions)))
    hidden = _dropout(hidden, _real_rows(masks.embedding, buckets), masks.embedding_rate)

    # where each bucket's tokens sit in one flat padded buffer of every bucket's [n_b * w_b] positions
    offsets, total = [], 0
    for b in buckets:
        offsets.append(total)
        total += int(b.rows.shape[0]) * b.width
    dest = torch.cat([b.real + off for b, off in zip(buckets, offsets, strict=True)])
    lengths = torch.cat([mask[b.rows, : b.width].sum(1) for b in buckets])
    cls_at = torch.cumsum(lengths, 0) - lengths  # each row's first token in the packed order

    def padded(x: torch.Tensor) -> list[torch.Tensor]:  # [T, d] -> every bucket's [n_b, heads, w_b, size]
        flat = x.new_zeros(total, x.shape[-1]).index_copy(0, dest, x)
        return [
            flat[off : off + int(b.rows.shape[0]) * b.width].view(-1, b.width, heads, size).transpose(1, 2)
            for b, off in zip(buckets, offsets, strict=True)
        ]

    for i, layer in enumerate(layers):
        rates = masks.rates[i]
        last = i == len(layers) - 1
        attention = layer.attention
        keys, values = padded(attention.self.key(hidden)), padded(attention.self.value(hidden))
        residual = hidden.index_select(0, cls_at) if last else hidden
        queries = attention.self.query(residual)
        if last:  # one [CLS] query per row, the rows in packed order
            sizes = [int(b.rows.shape[0]) for b in buckets]
            per_bucket = [q.view(-1, 1, heads, size).transpose(1, 2) for q in queries.split(sizes)]
        else:
            per_bucket = padded(queries)
        contexts = [
            _attend(q, k, v, b.keep, drawn[i][0], rates[0]).transpose(1, 2).reshape(-1, width)
            for q, k, v, b, drawn in zip(per_bucket, keys, values, buckets, masks.layers, strict=True)
        ]
        context = torch.cat(contexts) if last else torch.cat(contexts).index_select(0, dest)
        pick = _cls_rows if last else (lambda ms: _real_rows(ms, buckets))
        out = _dropout(attention.output.dense(context), pick([d[i][1] for d in masks.layers]), rates[1])
        attended = attention.output.LayerNorm(out + residual)
        out = _dropout(
            layer.output.dense(layer.intermediate(attended)), pick([d[i][2] for d in masks.layers]), rates[2]
        )
        hidden = layer.output.LayerNorm(out + attended)
    order = torch.cat([b.rows for b in buckets])
    return hidden.index_select(0, torch.argsort(order))
