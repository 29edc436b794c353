"""Unsupervised SimCSE: two dropout views of each sentence, InfoNCE with in-batch negatives.

Gao, Yao and Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021.
https://arxiv.org/abs/2104.08821

:class:`ContrastiveMethod` holds the wiring every method here shares (the optional training-only MLP
head and "m dropout views in one encoder call"); the other methods are this plus their own loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import torch

from harness.encoder.calls import EncodeFn
from methods.base import LossOutput, Method, MLPHead, repeat_rows
from methods.losses import info_nce
from methods.params import ContrastiveParams

SIMCSE_CITATION = "Gao et al., SimCSE: Simple Contrastive Learning of Sentence Embeddings, EMNLP 2021"


CP = TypeVar("CP", bound=ContrastiveParams)


class ContrastiveMethod(Method[CP]):
    """Shared wiring (not registered): the optional MLP head and multi-view encoding."""

    def __init__(self, params: CP, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.mlp = MLPHead(hidden_size) if params.mlp else None

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """The training head (Linear + Tanh) if ``mlp`` is on, else the identity."""
        return self.mlp(x) if self.mlp is not None else x

    def export_head(self) -> torch.nn.Linear | None:
        return self.mlp.dense if self.mlp is not None else None

    @staticmethod
    def encode_views(encode: EncodeFn, batch: dict[str, torch.Tensor], n: int) -> torch.Tensor:
        """``n`` dropout views of every sentence from ONE encoder call: raw features ``[B, n, d]``."""
        b = batch["input_ids"].shape[0]
        return encode(repeat_rows(batch, n)).view(b, n, -1)


@dataclass(frozen=True)
class SimCSEParams(ContrastiveParams):
    """Hyper-parameters of unsupervised SimCSE: the shared ``temperature`` and ``mlp`` only."""


class SimCSE(ContrastiveMethod[SimCSEParams]):
    """``loss = InfoNCE(head(z1), head(z2))`` with ``z1, z2`` two dropout views from one call."""

    name = "simcse"
    description = "Unsupervised SimCSE: two dropout views per sentence, InfoNCE over in-batch negatives."
    citation = SIMCSE_CITATION

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        views = self.head(self.encode_views(encode, batch, 2))
        loss = info_nce(views[:, 0], views[:, 1], self.params.temperature)
        return LossOutput(loss, {"loss_infonce": loss.detach()})
