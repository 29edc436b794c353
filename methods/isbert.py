"""IS-BERT: maximise the mutual information between a sentence's global vector and its own
n-gram (token-level) features, with a Jensen-Shannon estimator.

Zhang, He, Liu, Lim and Bing, "An Unsupervised Sentence Embedding Method by Mutual Information
Maximization", EMNLP 2020. https://arxiv.org/abs/2009.12061; official code:
https://github.com/yanzhangnlp/IS-BERT (a fork of sentence-transformers:
``sentence_transformers/models/CNN.py``, ``models/Pooling.py``, ``losses/MutualInformationLoss.py``,
``examples/training/nli/unsupervised_training_nli.py``, ``SentenceTransformer.py`` ``fit``).
docs/baselines.md lists where each value comes from.

One training step (one encoder call, dropout on, ``encode.tokens(batch)``):

1. Local features: a 1-D CNN over the last layer's token states ``h [n, L, d]``, one ``Conv1d``
   per kernel size ``k`` (``channels`` filters each, "same" padding ``(k - 1) / 2``), the outputs
   concatenated: ``l [n, L, len(kernel_sizes) * channels]``, optionally through ReLU.
   Padding positions are zero on the way in and set to zero on the way out.
2. Global feature: ``g_i = mean over the real tokens t of sentence i of l_it`` (special tokens
   included, as sentence-transformers' mean pooling over the attention mask).
3. Scores ``s(t, j) = l_t . g_j`` for every real token t of the batch and every sentence j. With
   ``i(t)`` the sentence of token t, N real tokens and B sentences (Jensen-Shannon bound):

       E_pos = (1 / N) sum_t [log 2 - softplus(-s(t, i(t)))]
       E_neg = (1 / (N (B - 1))) sum_t sum_{j != i(t)} [softplus(-s(t, j)) + s(t, j) - log 2]
       loss  = E_neg - E_pos

The sentence embedding (dev evaluations, final tasks) is ``g`` computed in eval mode: the method's
:meth:`~methods.base.Method.sentence_head`, not an encoder pooler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, Method
from methods.params import ContrastiveParams, switch

LOG2 = math.log(2.0)


def jsd_local_global_loss(local: torch.Tensor, sentence: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """IS-BERT's Jensen-Shannon mutual-information loss ``E_neg - E_pos`` (module docstring, step 3).

    Args:
        local: token features ``[n, L, e]`` (padding positions are ignored whatever they hold).
        sentence: the global vectors ``[n, e]``.
        mask: the attention mask ``[n, L]`` (1 = a real token).

    A batch of one sentence has no negatives: its ``E_neg`` is 0.
    """
    keep = mask.to(torch.bool)
    n = int(mask.shape[0])
    tokens = local[keep]  # [N, e], the real tokens, sentence-major
    owner = torch.arange(n, device=mask.device).unsqueeze(1).expand_as(keep)[keep]  # [N]
    scores = tokens @ sentence.t()  # [N, n]
    positive = owner.unsqueeze(1) == torch.arange(n, device=mask.device).unsqueeze(0)
    count = scores.shape[0]
    e_pos = (LOG2 - F.softplus(-scores[positive])).sum() / count
    if n < 2:
        return -e_pos
    # softplus(-s) + s = softplus(s): the same expression, without the cancellation for large s
    e_neg = (F.softplus(scores[~positive]) - LOG2).sum() / (count * (n - 1))
    return e_neg - e_pos


class TokenCNN(nn.Module):
    """IS-BERT's CNN over token states and its mean: the method's sentence head.

    ``tokens(hidden, mask)`` gives the local features ``[n, L, len(kernel_sizes) * channels]``
    (zero at padding positions); ``forward(hidden, mask)`` their mean over each sentence's real
    tokens ``[n, len(kernel_sizes) * channels]``. Padding positions are zeroed before the
    convolutions, so a sentence's features do not depend on how far its batch is padded. Weights:
    PyTorch's ``Conv1d`` initialisation, as the released ``CNN.py``.
    """

    def __init__(self, hidden_size: int, kernel_sizes: tuple[int, ...], channels: int, relu: bool) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(hidden_size, channels, kernel_size=k, padding=(k - 1) // 2) for k in kernel_sizes
        )
        self.relu = relu
        self.out_size = channels * len(kernel_sizes)

    def tokens(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask.unsqueeze(-1).to(hidden.dtype)
        x = (hidden * keep).transpose(1, 2)  # [n, d, L]
        out = torch.cat([conv(x) for conv in self.convs], dim=1).transpose(1, 2)  # [n, L, e]
        if self.relu:
            out = F.relu(out)
        return out * keep.to(out.dtype)

    def pool(self, local: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mean of ``local`` over each row's real tokens (local is zero elsewhere)."""
        count = mask.sum(dim=1, keepdim=True).to(local.dtype).clamp(min=1.0)
        return local.sum(dim=1) / count

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.pool(self.tokens(hidden, mask), mask)


@dataclass(frozen=True)
class ISBERTParams(ContrastiveParams):
    """Hyper-parameters of IS-BERT. The shared ``temperature`` and ``mlp`` are NOT used: the scores
    are raw dot products and the CNN is the only head (``describe`` says so in the run record).

    Attributes:
        kernel_sizes: the CNN's window sizes, odd (released ``CNN.py`` default ``[1, 3, 5]``).
        channels: filters per window size (``CNN.py`` default ``out_channels = 256``; the sentence
            vector has ``len(kernel_sizes) * channels`` dimensions, 768 by default).
        cnn_activation: ``none`` (default, the released ``CNN.py``: the convolutions' outputs as
            they are) or ``relu`` (the paper's n-gram feature ``f(w . h + b)`` with ``f`` = ReLU).
    """

    kernel_sizes: tuple[int, ...] = (1, 3, 5)
    channels: int = 256
    cnn_activation: Literal["none", "relu"] = switch(
        "none", "CNN activation: none (released CNN.py) or relu (the paper's n-gram features)"
    )

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if not self.kernel_sizes or any(k < 1 or k % 2 == 0 for k in self.kernel_sizes):
            raise ConfigError(f"kernel_sizes needs one or more odd sizes >= 1, got {list(self.kernel_sizes)}")
        if self.channels < 1:
            raise ConfigError(f"channels must be >= 1, got {self.channels}")

    def describe(self, hidden_size: int) -> dict[str, str]:
        size = self.channels * len(self.kernel_sizes)
        return {
            "unused": "temperature and mlp (IS-BERT: raw dot products, the CNN is the head); "
            "train_pooler and eval_pooler",
            "sentence_embedding": f"mean over tokens of the CNN's outputs ({size} dims), not a pooler",
        }


class ISBERT(Method[ISBERTParams]):
    """Token CNN + mean; Jensen-Shannon MI between each sentence vector and its own token features."""

    name = "isbert"
    description = (
        "IS-BERT: a CNN over the token states, mean-pooled; maximises a Jensen-Shannon estimate of the "
        "mutual information between each sentence vector and its own n-gram features."
    )
    citation = (
        "Zhang, He, Liu, Lim and Bing, An Unsupervised Sentence Embedding Method by Mutual Information "
        "Maximization, EMNLP 2020 (github.com/yanzhangnlp/IS-BERT)"
    )
    smoke_params = ({}, {"kernel_sizes": (1, 3), "channels": 16, "cnn_activation": "relu"})

    def __init__(self, params: ISBERTParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.cnn = TokenCNN(
            hidden_size, params.kernel_sizes, params.channels, params.cnn_activation == "relu"
        )

    def sentence_head(self) -> nn.Module:
        return self.cnn

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        features = encode.tokens(batch)
        mask = features.attention_mask
        local = self.cnn.tokens(features.hidden, mask)
        sentence = self.cnn.pool(local, mask)
        loss = jsd_local_global_loss(local, sentence, mask)
        return LossOutput(loss)
