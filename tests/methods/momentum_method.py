"""A test-only stateful method: a momentum key encoder and a negative queue (MoCo-style).

It exists to prove that the method contract fits stateful methods: it is written against
``methods.base`` alone and registered by one line in its test; the training loop is not touched.
Its key encoder runs through the run's ``encode`` (``encoder=self.key_encoder``), so the keys get
the run's training pooler and length buckets; it declares nothing of what it costs: the harness
measures its rows without gradient and its frozen copy (:func:`harness.run.footprint.footprint`),
and the grid's cost and memory estimates count them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Metric, MLPHead, ModelLoader
from methods.losses import cosine_logits
from methods.memory import NegativeQueue, ema_update
from methods.params import ContrastiveParams
from methods.simcse import ContrastiveMethod


@dataclass(frozen=True)
class MomentumQueueParams(ContrastiveParams):
    """Hyper-parameters of the test-only momentum method.

    Attributes:
        momentum: EMA factor of the key encoder and key head.
        queue_size: past keys kept as extra negatives.
    """

    momentum: float = 0.9
    queue_size: int = 16

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if not 0.0 < self.momentum <= 1.0:  # the one rule: ema_update trusts it
            raise ConfigError(f"momentum must be in (0, 1], got {self.momentum}")
        if self.queue_size < 1:
            raise ConfigError(f"queue_size must be >= 1, got {self.queue_size}")


class MomentumQueue(ContrastiveMethod[MomentumQueueParams]):
    """Queries from the online encoder, keys from a momentum copy, negatives = batch keys + queue."""

    name = "momentum_queue"
    description = "Test-only: momentum key encoder and a negative queue."
    citation = "He et al., Momentum Contrast for Unsupervised Visual Representation Learning, CVPR 2020"
    smoke_params = ({}, {"momentum": 0.5, "queue_size": 4})
    key_encoder: nn.Module
    key_head: MLPHead

    def __init__(self, params: MomentumQueueParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.queue = NegativeQueue(params.queue_size, hidden_size)
        self._keys: torch.Tensor | None = None

    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        super().bind(encoder, load)
        self.register_frozen("key_encoder", copy.deepcopy(encoder))
        key_head = MLPHead(self.hidden_size)
        if self.mlp is not None:
            key_head.load_state_dict(self.mlp.state_dict())
        self.register_frozen("key_head", key_head.to(next(encoder.parameters()).device))

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        q = self.head(encode(batch))
        with torch.no_grad():
            k = self.key_head(encode(batch, encoder=self.key_encoder))
        negatives = torch.cat([k, self.queue.contents().to(k.dtype)])
        logits = cosine_logits(q, negatives, self.params.temperature)
        loss = nn.functional.cross_entropy(logits, torch.arange(q.shape[0], device=q.device))
        self._keys = k
        return LossOutput(loss, {"loss_infonce": loss.detach()})

    def after_step(self, step: int) -> Mapping[str, Metric]:
        assert self.mlp is not None
        ema_update(self.key_encoder, self.encoder, self.params.momentum)
        ema_update(self.key_head, self.mlp, self.params.momentum)
        if self._keys is not None:
            self.queue.push(self._keys)
        return {"queue_filled": self.queue.filled.clone()}
