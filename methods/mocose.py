"""MoCoSE: a momentum key encoder, a negative queue, FGSM noise on the word embeddings.

Cao et al., "Exploring the Impact of Negative Samples of Contrastive Learning: A Case Study of
Sentence Embedding", Findings of ACL 2022; released code: https://github.com/xbdxwyh/mocose
(``mocose.py``; the settings in ``mocose_demo.ipynb``; the trainer in ``mocose_tools.py``).

One training step, ``B`` sentences, as the released code runs it (the defaults; each difference from
the MoCo structure the paper describes is a switch, docs/baselines.md "MoCoSE"):

1. Queries: the online encoder (dropout on) with ``eps * sign(g)`` added to the word-embedding
   lookup, ``g`` the gradient of the previous step's loss with respect to the queries' word
   embeddings (FGSM; none at the first step), cropped or zero-padded to this batch's shape. With
   ``mlp`` the [CLS] feature goes through the online pooler (``Linear``, initialised from the
   encoder's pooler), the projection (``Linear + LayerNorm + Dropout``) and the predictor
   (``Linear + LayerNorm + Dropout``, ``Linear + Tanh``); the projection and predictor start as BERT
   starts its layers (``init_weights``: weights normal(0, 0.02), zero biases).
2. Keys: the online embedding layer (the code shares it between the branches: a second call, its
   own dropout mask, the same word-embedding noise), then the key encoder's transformer layers (an
   EMA of the online ones), the EMA pooler and the key projection (no predictor).
   ``key_dropout = "on"``: the key layers and key projection run with dropout, because Hugging
   Face's ``Trainer.training_step`` puts the whole model, the EMA copies included, in train mode
   every step; ``"off"``: without (the copies' ``eval()`` at construction).
   ``key_gradient = "full"``: the keys are not detached: the key projection is trained by the
   optimiser besides its EMA (the released notebook freezes only the key encoder and key pooler),
   and the shared embedding layer gets the key branch's gradient through the frozen key layers;
   ``"none"``: keys without gradient and a key projection that only follows the EMA (MoCo's).
3. ``loss = mean_i -log exp(s(q_i, k_i)) / (sum_j exp(s(q_i, k_j)) + sum_m exp(s(q_i, Q_m)))``,
   ``s = cos / tau``, ``Q`` the queue of past keys.
4. After the optimiser step: the EMA with the decay ``1 - (1 - m)(cos(pi u / T) + 1) / 2`` at update
   ``u`` (rising from ``m`` to 1 over ``T = momentum_steps``), then the keys enter the queue:
   ``queue_order = "released"`` puts them in front and keeps the first ``K`` rows (so a full queue
   loses the last rows of its oldest batch, and a batch larger than ``K`` keeps its first ``K``
   keys); ``"fifo"`` drops the oldest row first (the paper's first-in-first-out queue).
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.calls import EmbeddingEdit, EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Method, Metric, ModelLoader, encoder_parts, encoder_setting
from methods.losses import cosine_logits
from methods.memory import HostCount, NegativeQueue, ema_update
from methods.params import ContrastiveParams, check_non_negative, check_positive, switch

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
        key_dropout: ``on`` (released: the key layers and key projection run with dropout, the
            Trainer's ``model.train()`` reaching the EMA copies) or ``off`` (the copies in eval mode).
        key_gradient: ``full`` (released: keys not detached; the key projection is trained by the
            optimiser and follows the EMA; the shared embedding layer gets the key branch's
            gradient) or ``none`` (MoCo: keys without gradient, the key projection an EMA only).
        queue_order: ``released`` (new keys in front, the first ``K`` rows kept) or ``fifo`` (the
            oldest row leaves first).
    """

    momentum: float = 0.85
    momentum_steps: int = 15000
    queue_size: int = 256
    queue_init: Literal["random", "empty"] = switch(
        "random", "random: the code's K random unit vectors fill the queue at first; empty: keys only"
    )
    fgsm: float = 5e-9
    predictor_layers: int = 2
    key_dropout: Literal["on", "off"] = switch(
        "on",
        "on: key layers and key projection with dropout (released: the Trainer's model.train() "
        "reaches the EMA copies); off: the copies in eval mode",
    )
    key_gradient: Literal["full", "none"] = switch(
        "full",
        "full: keys not detached, key projection trained besides its EMA, embedding layer reached "
        "(released); none: keys without gradient, projection EMA only (MoCo)",
    )
    queue_order: Literal["released", "fifo"] = switch(
        "released",
        "released: new keys in front, the first K rows kept (a full queue loses the newest rows of its "
        "oldest batch); fifo: the oldest row leaves first",
    )

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


class NewestFirstQueue(nn.Module):
    """The released code's key queue (``MoCoSEModel.dequeue_and_enqueue``): a push puts the batch's
    keys in front of the queue and keeps its first ``size`` rows.

    A full queue therefore loses the LAST rows of its oldest batch first (a row-by-row FIFO,
    :class:`~methods.memory.NegativeQueue`, loses its first rows), and a batch larger than the queue
    keeps its first ``size`` keys. Rows are kept newest first.
    """

    rows: torch.Tensor
    filled: torch.Tensor

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        if size < 1 or dim < 1:
            raise ValueError(f"queue size and dim must be >= 1, got {size} and {dim}")
        self.register_buffer("rows", torch.zeros(size, dim))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        self._filled = HostCount()

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])

    def contents(self) -> torch.Tensor:
        """The rows kept, newest first, ``[n, dim]``."""
        return self.rows[: self._filled.get(self.filled)]

    @torch.no_grad()
    def push(self, batch: torch.Tensor) -> None:
        """``rows = [batch; rows][:size]`` (detached)."""
        kept = torch.cat([batch.detach().to(self.rows.dtype), self.contents()])[: self.size]
        self.rows[: kept.shape[0]] = kept
        self._filled.set(self.filled, kept.shape[0])


def bert_init(module: nn.Module, std: float) -> None:
    """BERT's ``init_weights`` on ``module``: every ``Linear`` normal(0, std) with a zero bias, every
    ``LayerNorm`` weight 1 and bias 0 (what the released ``MoCoSEModel.__init__`` applies to its
    projection and predictor before the encoder's weights are loaded)."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.Linear):
                sub.weight.normal_(0.0, std)
                if sub.bias is not None:
                    sub.bias.zero_()
            elif isinstance(sub, nn.LayerNorm):
                sub.weight.fill_(1.0)
                sub.bias.zero_()


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
        {"key_dropout": "off", "key_gradient": "none", "queue_order": "fifo", "queue_size": 4},
    )

    def __init__(self, params: MoCoSEParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.queue: NegativeQueue | NewestFirstQueue | None = None
        if params.queue_size > 0:
            order = NewestFirstQueue if params.queue_order == "released" else NegativeQueue
            self.queue = order(params.queue_size, hidden_size)
        if self.queue is not None and params.queue_init == "random":
            with torch.no_grad():
                self.queue.rows.copy_(F.normalize(torch.randn(params.queue_size, hidden_size), dim=-1))
                self.queue.filled.fill_(params.queue_size)
        self.updates: torch.Tensor
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))
        self._updates = HostCount()
        self.pooler: nn.Linear | None = None
        self.projection: Projection | None = None
        self.predictor: Predictor | None = None
        self._keys: torch.Tensor | None = None
        self._words: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._query_rows = 0  # the rows of this step's query call (its buckets cut 0..n-1)
        self._noise_grad: torch.Tensor | None = None
        self.embedding_dropout = 0.1

    # -- lifecycle --------------------------------------------------------------------------------
    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        super().bind(encoder, load)
        eps = encoder_setting(encoder, "layer_norm_eps", 1e-12)
        self.embedding_dropout = encoder_setting(encoder, "hidden_dropout_prob", 0.1)
        parts = encoder_parts(encoder)
        if not isinstance(getattr(parts.get("embeddings"), "word_embeddings", None), nn.Embedding):
            raise ConfigError(
                "mocose: the keys run through the online embedding layer (the released code shares it "
                "between the branches), which needs a BERT-style encoder with a word-embedding table"
            )
        device = next(encoder.parameters()).device
        if self.params.mlp:
            self.pooler, self.projection, self.predictor = self._heads(eps, self.embedding_dropout)
            std = encoder_setting(encoder, "initializer_range", 0.02)
            for head in (self.pooler, self.projection, self.predictor):  # MoCoSEModel's init_weights
                bert_init(head, std)
            dense = parts.get("pooler_dense")
            if isinstance(dense, nn.Linear):  # the code loads BERT's pooler dense into its pooler
                self.pooler.load_state_dict(dense.state_dict())
            self.to(device)
            self.register_frozen("key_pooler", copy.deepcopy(self.pooler))
            key_projection = copy.deepcopy(self.projection)
            if self.params.key_gradient == "full":  # trained by the optimiser, and an EMA
                self.key_projection = key_projection
            else:
                self.register_frozen("key_projection", key_projection)
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
        self._query_rows = int(batch["input_ids"].shape[0])
        q = encode(batch) if p.fgsm == 0 else encode(batch, embeddings=self._query_edit())
        with contextlib.nullcontext() if p.key_gradient == "full" else torch.no_grad():
            k = self._keys_of(encode, batch)
            if self.pooler is not None:
                self.key_projection.train(p.key_dropout == "on")
                k = self.key_projection(self.key_pooler(k))
        if self.pooler is not None:
            assert self.projection is not None and self.predictor is not None
            q = self.predictor(self.projection(self.pooler(q)))
        queue = self.queue.contents() if self.queue is not None else k.new_zeros(0, k.shape[1])
        loss = queue_info_nce(q, k, queue, p.temperature)
        self._keys = k.detach()
        return LossOutput(loss, {"loss_infonce": loss.detach()})

    def _keys_of(self, encode: EncodeFn, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The key encoder's training feature: the online embedding layer's output (a call of its
        own: its own dropout mask, the same FGSM noise on the words) through the key layers."""
        hidden = self._online_embedding(batch)

        def shared(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            return hidden[rows, : x.shape[1]].to(x.dtype)

        on = self.params.key_dropout == "on"
        return encode(batch, dropout=on, encoder=self.key_encoder, embeddings=EmbeddingEdit(output=shared))

    def _online_embedding(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The online embedding layer on ``batch`` (in the encoder's mode: dropout on in training),
        the word-embedding lookup with this step's FGSM noise."""
        embeddings = encoder_parts(self.encoder)["embeddings"]
        table: nn.Module = getattr(embeddings, "word_embeddings")  # noqa: B009 (checked in bind)
        ids = batch["input_ids"]
        words = table(ids)
        if self.params.fgsm > 0:
            words = self._noise(words, batch["attention_mask"], torch.arange(ids.shape[0], device=ids.device))
        out: torch.Tensor = embeddings(
            inputs_embeds=words,
            token_type_ids=batch.get("token_type_ids"),
            position_ids=batch.get("position_ids"),
        )
        return out

    def after_step(self, step: int) -> dict[str, Metric]:
        updates = self._updates.get(self.updates) + 1
        self._updates.set(self.updates, updates)
        decay = self.params.decay(updates + 1)  # the code updates before its forward: u = step + 1
        online, key = self.encoder, self.key_encoder
        parts, key_parts = encoder_parts(online), encoder_parts(key)
        if "layers" in parts and "layers" in key_parts:
            ema_update(key_parts["layers"], parts["layers"], decay)
            for name in ("embeddings", "pooler_dense"):  # unused by the keys (the online one is): kept equal
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
        inside = (rows < g.shape[0]).to(x.dtype)[:, None, None]  # rows beyond g's get no noise
        delta[:, :length] = g[rows.clamp(max=g.shape[0] - 1), :length].to(x.dtype) * inside
        return x + self.params.fgsm * delta

    def _collect_noise_gradient(self) -> None:
        """``sign(dL/dx)`` of the queries' word embeddings from this step's backward, for the next step."""
        parts = [(rows, x.grad) for rows, x in self._words if x.grad is not None]
        self._words = []
        if not parts:
            return
        n = self._query_rows
        length = max(int(g.shape[1]) for _, g in parts)
        full = torch.zeros(n, length, parts[0][1].shape[2], device=parts[0][1].device, dtype=torch.float32)
        for rows, g in parts:
            full[rows, : g.shape[1]] = g.sign().float()
        self._noise_grad = full

    def export_head(self) -> nn.Linear | None:
        return None  # MoCoSE evaluates the [CLS] feature before any head (cls_before_pooler)
