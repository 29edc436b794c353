"""How a run embeds sentences for its dev evaluations and its final tasks: through the method's sentence
head where it has one (on the text its sentence input makes of each sentence), else the evaluation
pooler; and the method's head copied into the encoder's pooler."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from harness.encoder.model import SentenceEncoder, TokenCache
from harness.errors import ConfigError
from harness.store.run_config import RunConfig

if TYPE_CHECKING:
    from methods.base import Method


class RunEmbedding:
    """A run's two embeddings: :meth:`dev` for the dev evaluations, :meth:`final` for the final tasks."""

    def __init__(self, encoder: SentenceEncoder, method: Method, config: RunConfig) -> None:
        self.encoder = encoder
        self.method = method
        self.config = config
        self.dev_tokens = TokenCache(encoder)  # the dev evaluations' batches, tokenised once
        dense = encoder.parts().get("pooler_dense")
        self.pooler_dense = dense if isinstance(dense, nn.Linear) else None
        """Where :meth:`head_into_pooler` copies the method's head (None: the model has no pooler layer)."""
        if config.eval_pooler == "cls" and method.export_head() is not None and self.pooler_dense is None:
            raise ConfigError(
                f"eval_pooler 'cls' scores {config.method}'s trained head in the model's pooler layer, and "
                f"encoder {encoder.name} has no pooler Linear(d, d) to hold it: choose another eval_pooler"
            )

    def dev(self, batch: list[str]) -> np.ndarray | torch.Tensor:
        """Embeddings for the dev evaluations: the training precision, each batch tokenised once per
        run. On an accelerator they stay there (the dev evaluation scores them on the device); on the
        CPU, NumPy."""
        out = self._embed(batch, self.config.precision, self.dev_tokens)
        return out if out.device.type != "cpu" else out.numpy()

    def final(self, batch: list[str]) -> np.ndarray:
        """Embeddings for the final tasks: fp32 unless the config asks otherwise."""
        return self._embed(batch, self.config.eval_precision).cpu().numpy()

    def _embed(self, batch: list[str], precision: str, tokens: TokenCache | None = None) -> torch.Tensor:
        head = self.method.sentence_head()
        if head is None:  # the encoder's own pooled call
            return self.encoder.embed_tensor(batch, self.config.eval_pooler, precision, tokens=tokens)
        text = self.method.sentence_input()
        if text is not None:  # the method's input around each sentence (PromptBERT's template)
            batch = [text(sentence) for sentence in batch]
        return self.encoder.embed_tensor(batch, self.config.eval_pooler, precision, head=head, tokens=tokens)

    def head_into_pooler(self) -> None:
        """Copy the method's trained head (if it has one) into the encoder's pooler layer (where it has
        one), so that the ``cls`` pooler reads it; whether it must be there was decided once, above."""
        head = self.method.export_head()
        if head is None or self.pooler_dense is None:
            return
        with torch.no_grad():
            self.pooler_dense.weight.copy_(head.weight)
            self.pooler_dense.bias.copy_(head.bias)
