"""What a training method may ask of the encoder in one call: the call (:class:`EncodeFn`), the
token-level features it can return, and edits inside the embedding layer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

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
