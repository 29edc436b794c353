"""ConSERT: two views made inside the embedding layer, NT-Xent over both views' rows.

Yan et al., "ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation Transfer",
ACL 2021; released code: https://github.com/yym6472/ConSERT (augmentations in its
``transformers/modeling_bert.py``, the loss in ``sentence_transformers/losses/AdvCLSoftmaxLoss.py``,
the unsupervised recipe in ``scripts/unsup-consert-base.sh``).

One training step, ``B`` sentences:

1. ONE encoder call on the doubled batch (rows ``2i``: view 1 of sentence ``i``, ``2i+1``: view 2),
   with the run's dropout off unless ``network_dropout`` (the released recipe trains with
   ``--no_dropout``). Each view applies its augmentation:

   * ``shuffle``: the position ids of the first ``len_i`` positions ([CLS] and [SEP] included) are
     permuted, padding keeps its own (``position_ids`` in the batch, read by the embedding module);
   * ``token_cutoff``: ``floor(len_i * rate)`` of the row's first ``len_i`` token vectors are zeroed;
   * ``feature_cutoff``: ``floor(d * rate)`` channels of the row are zeroed at every position;
   * ``dropout``: ``floor(len_i * d * rate)`` of the row's first ``len_i * d`` elements are zeroed
     (no rescaling: ConSERT's "dropout" augmentation, not the network's dropout);
   * ``none``: the plain row.

   The cutoffs edit the embedding layer's output (after its LayerNorm and dropout), which the first
   transformer layer reads (``encode(embeddings=EmbeddingEdit(output=...))``). The masks are drawn
   for the whole call, so length buckets see the same masks as one call would.
2. ``z1, z2`` the pooled views (``[B, d]``, the optional head applied); :func:`nt_xent_terms` gives
   ``a`` (anchors ``z1``) and ``b`` (anchors ``z2``), each the mean over ``B`` anchors of
   ``-log softmax`` over the other view's ``B`` rows and (``intra_view_negatives``) the own view's
   other ``B - 1`` rows.
3. ``loss = 0.15 (a + b)`` (released: ``--cl_rate 0.15`` times the sum) or ``(a + b) / 2``
   (paper: the mean over all ``2B`` anchors), ``loss_weight`` chooses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from harness.encoder.calls import EmbeddingEdit, EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, repeat_rows
from methods.params import ContrastiveParams, switch
from methods.simcse import ContrastiveMethod

CONSERT_CITATION = (
    "Yan et al., ConSERT: A Contrastive Framework for Self-Supervised Sentence Representation "
    "Transfer, ACL 2021 (code: github.com/yym6472/ConSERT)"
)

Augmentation = Literal["none", "shuffle", "token_cutoff", "feature_cutoff", "dropout"]
RECIPE = {"temperature": 0.1, "mlp": False}
"""The released unsupervised recipe's values of the shared fields (``--temperature 0.1``, no
projection head), which the table rows set."""
RELEASED_CL_RATE = 0.15
"""``--cl_rate`` of ``scripts/unsup-consert-base.sh``: the weight of the summed NT-Xent terms."""


@dataclass(frozen=True)
class ConSERTParams(ContrastiveParams):
    """Hyper-parameters of ConSERT (grid keys), besides the shared ``temperature`` and ``mlp``.

    Defaults: the unsupervised best combination of the released recipe
    (``scripts/unsup-consert-base.sh``): feature cutoff 0.2 and token shuffle, the network's dropout
    off. Its temperature 0.1 and "no projection head" are the shared fields ``temperature`` and
    ``mlp``, declared once for every method (defaults 0.05 and True): the table rows set
    ``temperature = 0.1, mlp = false`` (:data:`RECIPE`).

    Attributes:
        view1: augmentation of the first view (none, shuffle, token_cutoff, feature_cutoff, dropout).
        view2: augmentation of the second view.
        rate1: cutoff rate of view 1 (token_cutoff, feature_cutoff, dropout only); in (0, 1).
        rate2: cutoff rate of view 2 (idem).
        network_dropout: keep the encoder's own dropout on while encoding the views (released
            recipe: off, ``--no_dropout``).
        intra_view_negatives: NT-Xent's negatives include the anchor's own view's other rows (paper
            and code); False leaves the other view's rows only (the symmetrised SimCSE InfoNCE).
        loss_weight: ``released`` (0.15 times the sum of both anchors' terms, ``--cl_rate 0.15``)
            or ``paper`` (the mean over all 2B anchors).
    """

    view1: Augmentation = "feature_cutoff"
    view2: Augmentation = "shuffle"
    rate1: float = 0.2
    rate2: float = 0.2
    network_dropout: bool = False
    intra_view_negatives: bool = True
    loss_weight: Literal["released", "paper"] = switch(
        "released", "released: 0.15 x (sum of both anchors' terms); paper: mean over the 2B anchors"
    )

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        for name in ("rate1", "rate2"):
            rate = getattr(self, name)
            if not 0.0 < rate < 1.0:
                raise ConfigError(f"{name} must be in (0, 1), got {rate}")

    def describe(self, hidden_size: int) -> dict[str, str]:
        views = []
        for view, rate in ((self.view1, self.rate1), (self.view2, self.rate2)):
            views.append(f"{view} {rate:g}" if view in CUTOFFS else view)
        return {"views": " / ".join(views)}


def nt_xent_terms(
    z1: torch.Tensor, z2: torch.Tensor, temperature: float, intra_view_negatives: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """NT-Xent's two halves: anchors ``z1`` and anchors ``z2`` (ConSERT Eq. 1, SimCLR's loss).

    Args:
        z1, z2: ``[B, d]`` the two views; ``z2[i]`` is the positive of ``z1[i]``.
        temperature: ``tau``.
        intra_view_negatives: include ``s(z1_i, z1_j), j != i`` (resp. ``z2``) among the negatives.

    Returns:
        ``(a, b)``: ``a = mean_i -log softmax(s(z1_i, z2_.), s(z1_i, z1_{j != i}))[i]``, ``b`` the same
        with the views' roles swapped (``s = cos / tau``).
    """
    u, v = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)
    target = torch.arange(u.shape[0], device=u.device)
    terms = []
    for anchor, other in ((u, v), (v, u)):
        logits = anchor @ other.T / temperature
        if intra_view_negatives:
            own = anchor @ anchor.T / temperature
            own = own.masked_fill(torch.eye(len(own), dtype=torch.bool, device=own.device), float("-inf"))
            logits = torch.cat([logits, own], dim=1)
        terms.append(F.cross_entropy(logits, target))
    return terms[0], terms[1]


def shuffled_positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids ``[n, L]``: each row's first ``len_i`` positions permuted, the padding's kept."""
    n, length = mask.shape
    valid = mask.bool()
    keys = torch.rand(n, length, device=mask.device)
    keys = torch.where(valid, keys, 2.0 + torch.arange(length, device=mask.device, dtype=keys.dtype))
    return torch.argsort(keys, dim=1)


def _smallest(scores: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """True at each row's ``counts[i]`` smallest scores (rows of ``scores`` flattened after dim 0)."""
    flat = scores.reshape(scores.shape[0], -1)
    ranks = flat.argsort(dim=1).argsort(dim=1)
    return (ranks < counts[:, None]).reshape(scores.shape)


def token_cutoff_keep(rate: float, mask: torch.Tensor, width: int) -> torch.Tensor:
    """``[n, L, 1]``: ``floor(len_i * rate)`` of each row's real tokens zeroed."""
    n, length = mask.shape
    scores = torch.rand(n, length, device=mask.device).masked_fill(~mask.bool(), 2.0)
    cut = _smallest(scores, (mask.sum(dim=1).double() * rate).floor().long())
    return (~cut).float()[:, :, None]


def feature_cutoff_keep(rate: float, mask: torch.Tensor, width: int) -> torch.Tensor:
    """``[n, 1, d]``: ``floor(d * rate)`` channels of each row zeroed at every position."""
    n = mask.shape[0]
    scores = torch.rand(n, width, device=mask.device)
    cut = _smallest(scores, torch.full((n,), int(width * rate), device=mask.device))
    return (~cut).float()[:, None, :]


def dropout_keep(rate: float, mask: torch.Tensor, width: int) -> torch.Tensor:
    """``[n, L, d]``: ``floor(len_i * d * rate)`` elements of each row's real tokens zeroed."""
    n, length = mask.shape
    scores = torch.rand(n, length, width, device=mask.device).masked_fill(~mask.bool()[:, :, None], 2.0)
    cut = _smallest(scores, (mask.sum(dim=1).double() * width * rate).floor().long())
    return (~cut).float()


CutoffKeep = Callable[[float, torch.Tensor, int], torch.Tensor]

CUTOFF_KEEPS: dict[str, CutoffKeep] = {
    "token_cutoff": token_cutoff_keep,
    "feature_cutoff": feature_cutoff_keep,
    "dropout": dropout_keep,
}
"""Each cutoff's keep-mask (1 = kept) for every row, ``keep(rate, mask [n, L], width)``: ``[n, L, 1]``,
``[n, 1, d]`` or ``[n, L, d]`` (ConSERT's ``_cutoff_embeddings``: row, column and random directions);
the method picks its views' once, when it is built."""
CUTOFFS = tuple(CUTOFF_KEEPS)


class ConSERT(ContrastiveMethod[ConSERTParams]):
    """Two augmented views from one call, NT-Xent (see the module docstring)."""

    name = "consert"
    description = (
        "ConSERT: two views augmented inside the embedding layer (token shuffle, token/feature cutoff, "
        "element dropout), NT-Xent with both views' rows as negatives."
    )
    citation = CONSERT_CITATION
    smoke_params = (
        {},
        RECIPE,
        {"view1": "token_cutoff", "view2": "dropout", "rate1": 0.3, "rate2": 0.1, "loss_weight": "paper"},
        {"view1": "none", "view2": "none", "network_dropout": True, "intra_view_negatives": False},
    )

    def __init__(self, params: ConSERTParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        specs = ((params.view1, params.rate1), (params.view2, params.rate2))
        self.shuffles = [view == "shuffle" for view, _ in specs]
        """Which views shuffle their positions (view 1, view 2)."""
        self.cutoffs = [(k, CUTOFF_KEEPS[v], rate) for k, (v, rate) in enumerate(specs) if v in CUTOFFS]
        """``(view index, keep-mask function, rate)`` of each view that cuts."""

    def augmented_batch(
        self, batch: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], EmbeddingEdit | None]:
        """The doubled batch (rows ``2i``, ``2i+1``: the views of sentence ``i``), its shuffled position
        ids where a view shuffles, and the cutoff edit where a view cuts (None without one)."""
        rows = repeat_rows(batch, 2)
        mask = rows["attention_mask"]
        n, length = mask.shape
        views = torch.arange(n, device=mask.device) % 2  # 0: view 1, 1: view 2
        if any(self.shuffles):
            plain = torch.arange(length, device=mask.device).expand(n, -1)
            shuffled = shuffled_positions(mask)
            use = torch.tensor(self.shuffles, device=mask.device)[views]
            rows["position_ids"] = torch.where(use[:, None], shuffled, plain)
        if not self.cutoffs:
            return rows, None
        keep = torch.ones(n, length, self.hidden_size, device=mask.device)
        for k, keep_of, rate in self.cutoffs:
            mine = views == k
            keep[mine] = keep_of(rate, mask[mine], self.hidden_size)

        def cut(x: torch.Tensor, attention_mask: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            return x * keep[index, : x.shape[1]].to(x.dtype)

        return rows, EmbeddingEdit(output=cut)

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        rows, edit = self.augmented_batch(batch)
        b = batch["input_ids"].shape[0]
        if edit is None:
            out = encode(rows, dropout=p.network_dropout)
        else:
            out = encode(rows, dropout=p.network_dropout, embeddings=edit)
        views = self.head(out.view(b, 2, -1))
        a, c = nt_xent_terms(views[:, 0], views[:, 1], p.temperature, p.intra_view_negatives)
        weight = RELEASED_CL_RATE if p.loss_weight == "released" else 0.5
        loss = weight * (a + c)
        return LossOutput(loss, {"loss_ntxent": (a + c).detach() / 2})
