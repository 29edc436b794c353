"""Unsupervised SimCSE: two dropout views of each sentence, InfoNCE with in-batch negatives.

Gao, Yao and Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021.
https://arxiv.org/abs/2104.08821
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.errors import ConfigError
from methods.base import EncodeFn, LossOutput, Method, MethodParams, MLPHead, repeat_rows
from methods.losses import info_nce


@dataclass(frozen=True)
class SimCSEParams(MethodParams):
    """Hyper-parameters of unsupervised SimCSE.

    Attributes:
        temperature: tau of the InfoNCE softmax (paper: 0.05).
        mlp: apply the training-only MLP head (Linear + Tanh) to the pooled feature.
    """

    temperature: float = 0.05
    mlp: bool = True

    def validate(self, hidden_size: int | None = None) -> None:
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")


class SimCSE(Method):
    name = "simcse"
    description = "Unsupervised SimCSE: two dropout views per sentence, InfoNCE over in-batch negatives."
    citation = "Gao et al., SimCSE: Simple Contrastive Learning of Sentence Embeddings, EMNLP 2021"
    params_cls = SimCSEParams

    def __init__(self, params: SimCSEParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.p: SimCSEParams = params
        self.mlp = MLPHead(hidden_size) if params.mlp else None

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x) if self.mlp is not None else x

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        n = batch["input_ids"].shape[0]
        views = self.head(encode(repeat_rows(batch, 2))).view(n, 2, -1)
        loss = info_nce(views[:, 0], views[:, 1], self.p.temperature)
        return LossOutput(loss)
