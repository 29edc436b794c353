"""The encoder call a method makes during training (the EncodeFn the loop hands it)."""

from __future__ import annotations

import torch
from torch import nn

from harness.encoder.calls import EmbeddingEdit, TokenFeatures
from harness.encoder.forward import length_buckets
from harness.encoder.model import SentenceEncoder, dropout_rate


class TrainingEncode:
    """The :class:`~harness.encoder.calls.EncodeFn` the training loop hands a method.

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

    Where :meth:`SentenceEncoder.can_pack` (a BERT encoder with a [CLS] pooler on the CPU), a call
    without edits runs on its real tokens only (:func:`~harness.encoder.packed.packed_cls_states`):
    the linear layers skip the padding the buckets leave, attention still runs bucket by bucket,
    and dropout draws the bucketed forward's masks, so the features are the same up to float
    rounding and the random stream is the same.

    ``encoder=`` (a :class:`SentenceEncoder`, e.g. a method's momentum copy of the run's encoder)
    runs one call on that module instead, through the same pooler and length buckets.

    On an encoder with a compiled training forward
    (:meth:`~harness.encoder.model.SentenceEncoder.compile_training`), a pooled call without edits
    runs it on the whole call, unbucketed: the step's batches are padded to one width, so each call
    keeps one shape the compiler (and a GPU's CUDA graphs) capture once.

    :meth:`tokens` is the same call returning the padding-zeroed last layer instead of the pooled
    feature (:class:`~harness.encoder.calls.TokenFeatures`).

    ``embeddings=`` (a :class:`~harness.encoder.calls.EmbeddingEdit`) edits the call inside the embedding
    layer (:func:`edited_forward`), bucket by bucket: each bucket's edit functions see that bucket's
    rows, trimmed to its width, and their indices in the call. A batch may also carry
    ``position_ids`` ``[n, L]`` (a token shuffle), cut into buckets like every other key.
    """

    def __init__(
        self, encoder: SentenceEncoder, pooler: str = "cls_before_pooler", length_buckets: int = 1
    ) -> None:
        # the run's settings: a pooler of the choices, length_buckets >= 1 (checked where they entered)
        self.encoder = encoder
        self.pooler = pooler
        self.hidden_size = encoder.hidden_size
        self.length_buckets = length_buckets

    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> torch.Tensor:
        """Pooled training features ``[n, d]`` of one call (see the class docstring)."""
        return self._call(batch, dropout, encoder, embeddings, tokens=False)

    def tokens(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> TokenFeatures:
        """The same call's token-level features: the padding-zeroed last layer and the mask."""
        hidden = self._call(batch, dropout, encoder, embeddings, tokens=True)
        return TokenFeatures(hidden, batch["attention_mask"])

    def _call(
        self,
        batch: dict[str, torch.Tensor],
        dropout: bool | float,
        encoder: nn.Module | None,
        embeddings: EmbeddingEdit | None,
        tokens: bool,
    ) -> torch.Tensor:
        module = self.encoder if encoder is None else encoder
        if not isinstance(module, SentenceEncoder):
            raise TypeError(f"encode(encoder=...) needs a SentenceEncoder, got {type(module).__name__}")
        if dropout is True:
            return self._features(batch, module, embeddings, tokens)
        with dropout_rate(module, 0.0 if dropout is False else float(dropout)):
            return self._features(batch, module, embeddings, tokens)

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

        if encoder.compiled and edit is None and not tokens:  # one shape per call: no buckets
            return encoder.features(batch, self.pooler, compiled=True)
        if edit is None and not tokens and encoder.can_pack(self.pooler):  # real tokens only
            return encoder.packed_features(batch, self.pooler, self.length_buckets)
        cut = length_buckets(batch["attention_mask"], self.length_buckets)
        if len(cut) <= 1 or getattr(encoder.tokenizer, "padding_side", "right") != "right":
            return one(batch, None)
        table = encoder.word_embeddings() if encoder.one_word_lookup else None
        words = table(batch["input_ids"]) if table is not None and "input_ids" in batch else None
        full_width = int(batch["attention_mask"].shape[1])
        parts = []
        for rows, width in cut:
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
        return out[torch.argsort(torch.cat([rows for rows, _ in cut]))]
