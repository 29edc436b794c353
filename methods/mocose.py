"""MoCoSE: a momentum key encoder, a negative queue, FGSM noise on the word embeddings.

Cao et al., "Exploring the Impact of Negative Samples of Contrastive Learning: A Case Study of
Sentence Embedding", Findings of ACL 2022; released code: https://github.com/xbdxwyh/mocose
(``mocose.py``; the settings in ``mocose_demo.ipynb``).

One training step, ``B`` sentences:

1. Queries: the online encoder (dropout on) with ``eps * sign(g)`` added to the word-embedding
   lookup, ``g`` the gradient of the previous step's loss with respect to the queries' word
   embeddings (FGSM; none at the first step), cropped or zero-padded to this batch's shape. With
   ``mlp`` the [CLS] feature goes through the online pooler (``Linear``, initialised from the
   encoder's pooler), the projection (``Linear + LayerNorm + Dropout``) and the predictor
   (``Linear + LayerNorm + Dropout``, ``Linear + Tanh``).
2. Keys, without gradient: the key encoder, whose embedding layer is the online one (copied every
   step: the code shares it) and whose transformer layers are an EMA of the online layers, with the
   same word-embedding noise and the embedding dropout on but the layers' dropout off (the code's
   target encoder is in eval mode); with ``mlp``, the EMA pooler and EMA projection (no predictor).
3. ``loss = mean_i -log exp(s(q_i, k_i)) / (sum_j exp(s(q_i, k_j)) + sum_m exp(s(q_i, Q_m)))``,
   ``s = cos / tau``, ``Q`` the queue of past keys.
4. After the optimiser step: the EMA with the decay ``1 - (1 - m)(cos(pi u / T) + 1) / 2`` at update
   ``u`` (rising from ``m`` to 1 over ``T = momentum_steps``), then the keys enter the queue.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from harness.errors import ConfigError
from methods.base import (
    ContrastiveParams,
    EmbeddingEdit,
    EncodeFn,
    LossOutput,
    Method,
    Metric,
    ModelLoader,
    check_non_negative,
    check_positive,
    encoder_parts,
    encoder_setting,
    switch,
)
from methods.losses import cosine_logits
from methods.memory import NegativeQueue, ema_update

MOCOSE_CITATION = (
    "Cao et al., Exploring the Impact of Negative Samples of Contrastive Learning: A Case Study of "
    "Sentence Embedding (MoCoSE), Findings of ACL 2022 (code: github.com/xbdxwyh/mocose)"
)


@dataclass(frozen=True)
class MoCoSEParams(ContrastiveParams):
    """Hyper-parameters of MoCoSE (grid keys), besides the shared ``temperature`` (0.05, the code's
    ``InfoNCEWithQueue``) and ``mlp`` (the online pooler, projection and predictor; False: none).

    Attributes:
        momentum: EMA decay ``m`` of the key layers and heads at the start (``ema_decay`` 0.85).
        momentum_steps: ``T`` of the cosine schedule that raises the decay to 1 (the code's EMA
            default, 15000); 0 keeps the decay at ``m``.
        queue_size: past keys kept as negatives (``K`` 256); 0 = in-batch keys only.
        queue_init: ``random`` (the code: ``K`` random unit vectors until keys replace them) or
            ``empty``.
        fgsm: ``eps`` of the word-embedding noise (``config.fgsm`` 5e-9); 0 = off.
        predictor_layers: layers of the online predictor (``mlp_layers`` 2).
    """

    momentum: float = 0.85
    momentum_steps: int = 15000
    queue_size: int = 256
    queue_init: Literal["random", "empty"] = switch(
        "random", "random: the code's K random unit vectors fill the queue at first; empty: keys only"
    )
    fgsm: float = 5e-9
    predictor_layers: int = 2

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"momentum must be in [0, 1), got {self.momentum}")
        for name in ("momentum_steps", "queue_size"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        check_non_negative(self.fgsm, "fgsm")
        check_positive(self.predictor_layers, "predictor_layers")

    def decay(self, update: int) -> float:
        """The EMA decay at update ``update`` (1-based): cosine from ``momentum`` towards 1."""
        if self.momentum_steps == 0:
            return self.momentum
        return 1.0 - (1.0 - self.momentum) * (math.cos(math.pi * update / self.momentum_steps) + 1.0) / 2.0


def queue_info_nce(q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor, temperature: float) -> torch.Tensor:
    """``mean_i -log exp(s(q_i, k_i)) / (sum_j exp(s(q_i, k_j)) + sum_m exp(s(q_i, queue_m)))``."""
    logits = cosine_logits(q, torch.cat([k, queue.to(k.dtype)]), temperature)
    return F.cross_entropy(logits, torch.arange(q.shape[0], device=q.device))


class Projection(nn.Module):
    """MoCoSE's projection: ``Linear(d, d) + LayerNorm + Dropout``."""

    def __init__(self, d: int, eps: float, dropout: float) -> None:
        super().__init__()
        self.dense = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.dropout(self.norm(self.dense(x)))
        return out


class Predictor(nn.Module):
    """MoCoSE's predictor: ``layers - 1`` blocks of ``Linear + LayerNorm + Dropout``, ``Linear + Tanh``."""

    def __init__(self, d: int, layers: int, eps: float, dropout: float) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Projection(d, eps, dropout) for _ in range(layers - 1)])
        self.dense = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(self.blocks(x)))


class MoCoSE(Method[MoCoSEParams]):
    """Online queries with FGSM noise, EMA keys, a queue of past keys (see the module docstring)."""

    name = "mocose"
    description = (
        "MoCoSE: EMA key encoder sharing the online embedding layer, a queue of past keys, FGSM noise "
        "on the word embeddings, projection + predictor heads."
    )
    citation = MOCOSE_CITATION
    key_encoder: nn.Module
    key_pooler: nn.Linear
    key_projection: Projection
    smoke_params = (
        {},
        {"queue_size": 4, "queue_init": "empty", "fgsm": 1e-3, "momentum_steps": 0, "predictor_layers": 1},
        {"mlp": False, "queue_size": 0, "fgsm": 0.0, "momentum": 0.0},
    )

    def __init__(self, params: MoCoSEParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.queue = NegativeQueue(params.queue_size, hidden_size) if params.queue_size > 0 else None
        if self.queue is not None and params.queue_init == "random":
            with torch.no_grad():
                self.queue.rows.copy_(F.normalize(torch.randn(params.queue_size, hidden_size), dim=-1))
                self.queue.filled.fill_(params.queue_size)
        self.updates: torch.Tensor
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))
        self.pooler: nn.Linear | None = None
        self.projection: Projection | None = None
        self.predictor: Predictor | None = None
        self._keys: torch.Tensor | None = None
        self._words: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._noise_grad: torch.Tensor | None = None
        self.embedding_dropout = 0.1

    # -- lifecycle --------------------------------------------------------------------------------
    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        super().bind(encoder, load)
        eps = encoder_setting(encoder, "layer_norm_eps", 1e-12)
        self.embedding_dropout = encoder_setting(encoder, "hidden_dropout_prob", 0.1)
        device = next(encoder.parameters()).device
        if self.params.mlp:
            self.pooler, self.projection, self.predictor = self._heads(eps, self.embedding_dropout)
            dense = encoder_parts(encoder).get("pooler_dense")
            if isinstance(dense, nn.Linear):  # the code loads BERT's pooler dense into its pooler
                self.pooler.load_state_dict(dense.state_dict())
            self.to(device)
            self.register_frozen("key_pooler", copy.deepcopy(self.pooler))
            self.register_frozen("key_projection", copy.deepcopy(self.projection))
        self.register_frozen("key_encoder", copy.deepcopy(encoder))

    def _heads(self, eps: float, dropout: float) -> tuple[nn.Linear, Projection, Predictor]:
        """The pooler, projection and predictor that :meth:`bind` builds, in this order: the order
        draws their random initialisation, so a run's heads depend on it."""
        d = self.hidden_size
        pooler, projection = nn.Linear(d, d), Projection(d, eps, dropout)
        return pooler, projection, Predictor(d, self.params.predictor_layers, eps, dropout)

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        self._words = []
        q = encode(batch) if p.fgsm == 0 else encode(batch, embeddings=self._query_edit())
        key_edit = EmbeddingEdit(words=self._noise if p.fgsm > 0 else None, output=self._embedding_dropout)
        with torch.no_grad():
            k = encode(batch, dropout=False, encoder=self.key_encoder, embeddings=key_edit)
        if self.pooler is not None:
            assert self.projection is not None and self.predictor is not None
            q = self.predictor(self.projection(self.pooler(q)))
            with torch.no_grad():
                self.key_projection.eval()  # the code's EMA copies are in eval mode: no dropout
                k = self.key_projection(self.key_pooler(k))
        queue = self.queue.contents() if self.queue is not None else k.new_zeros(0, k.shape[1])
        loss = queue_info_nce(q, k, queue, p.temperature)
        self._keys = k.detach()
        return LossOutput(loss, {"loss_infonce": loss.detach()})

    def after_step(self, step: int) -> dict[str, Metric]:
        self.updates += 1
        decay = self.params.decay(int(self.updates) + 1)  # the code updates before its forward: u = step + 1
        online, key = self.encoder, self.key_encoder
        parts, key_parts = encoder_parts(online), encoder_parts(key)
        if "layers" in parts and "layers" in key_parts:
            ema_update(key_parts["layers"], parts["layers"], decay)
            for name in ("embeddings", "pooler_dense"):  # the embedding layer is shared: copied
                if name in parts and name in key_parts:
                    ema_update(key_parts[name], parts[name], 0.0)
        else:  # another architecture: the whole encoder follows the EMA
            ema_update(key, online, decay)
        if self.pooler is not None:
            ema_update(self.key_pooler, self.pooler, decay)
            assert self.projection is not None
            ema_update(self.key_projection, self.projection, decay)
        self._collect_noise_gradient()
        if self.queue is not None and self._keys is not None:
            self.queue.push(self._keys)
        metrics: dict[str, Metric] = {"ema_decay": decay}
        if self.queue is not None:
            metrics["queue_filled"] = self.queue.filled.clone()
        return metrics

    # -- the word-embedding noise -----------------------------------------------------------------
    def _query_edit(self) -> EmbeddingEdit:
        def words(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            out = self._noise(x, mask, rows)
            if out.requires_grad:
                out.retain_grad()
                self._words.append((rows, out))
            return out

        return EmbeddingEdit(words=words)

    def _noise(self, x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``x + eps * sign(g)`` with ``g`` the previous step's gradient, cropped/zero-padded to ``x``."""
        g = self._noise_grad
        if g is None:
            return x
        length = min(int(g.shape[1]), int(x.shape[1]))
        delta = torch.zeros_like(x)
        inside = rows < g.shape[0]
        delta[inside, :length] = g[rows[inside], :length].to(x.dtype)
        return x + self.params.fgsm * delta

    def _embedding_dropout(self, x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.embedding_dropout, training=True)

    def _collect_noise_gradient(self) -> None:
        """``sign(dL/dx)`` of the queries' word embeddings from this step's backward, for the next step."""
        parts = [(rows, x.grad) for rows, x in self._words if x.grad is not None]
        self._words = []
        if not parts:
            return
        n = max(int(rows.max()) for rows, _ in parts) + 1
        length = max(int(g.shape[1]) for _, g in parts)
        full = torch.zeros(n, length, parts[0][1].shape[2], device=parts[0][1].device)
        for rows, g in parts:
            full[rows, : g.shape[1]] = g.sign().float()
        self._noise_grad = full

    def export_head(self) -> nn.Linear | None:
        return None  # MoCoSE evaluates the [CLS] feature before any head (cls_before_pooler)
