"""DCLR: noise-based negatives refined by gradient ascent, and in-batch negatives weighted by a
frozen complementary model.

Zhou, Zhang, Zhao and Wen, "Debiased Contrastive Learning of Unsupervised Sentence
Representations", ACL 2022. https://arxiv.org/abs/2205.00656; official code:
https://github.com/RUCAIBox/DCLR (``simcse/models.py``, ``cl_vat_forward``; ``train.py``; ``run.sh``).
Every value below is read from that repository; docs/baselines.md lists where.

One training step:

1. ``z1, z2 = head(two dropout views)`` from ONE encoder call on the doubled batch (as SimCSE).
2. Complementary similarities: the frozen complementary model encodes the doubled batch too (two
   dropout views, no gradient: the released code runs its fixed BERT in training mode), giving
   ``c_ij = cos(c1_i, c2_j)``. Its feature (``complementary_feature``) is, as released, its BERT
   pooler output ``tanh(dense([CLS]))`` and no MLP (``cl_forward_denoised`` pools every encoder with
   ``encoder.pooler`` and applies the MLP only to the trained one); ``train_pooler`` uses the run's
   training pooler instead. In-batch negative ``j != i`` gets weight ``w_ij = 0`` when
   ``c_ij > phi``, else 1; the positive always has weight 1.
3. Noise negatives: ``N = int(B * noise_times)`` vectors ``n_k ~ N(0, noise_std^2 I)`` of width d,
   refined by ``ascent_steps`` steps of normalised gradient ASCENT on the InfoNCE over
   ``[s(z1_i, z2_j) | s(z1_i, n_k)]``: ``n_k <- n_k + ascent_step_size * g_k / ||g_k||`` (a NaN
   entry becomes 0, as in the code). The refined vectors are constants for the encoder's gradient.
4. The loss over the logits ``L = [s(z1_i, z2_j) | s(z1_i, n_k)]`` (``[B, B + N]``) and weights
   ``W = [w_ij | 1]``, in one of two forms (``loss_form``):

   * ``released`` (``cl_vat_forward``): ``p = softmax_row(L * W)`` (a dropped negative's logit
     becomes 0, it is not removed) and a binary cross-entropy over EVERY entry,
     ``mean_{i, c} -[y_ic log p_ic + (1 - y_ic) log(1 - p_ic)]`` with ``y`` one at ``c = i``;
   * ``paper``: InfoNCE whose denominator sums ``w_ij exp(s(z1_i, z2_j))`` over the batch and
     ``exp(s(z1_i, n_k))`` over the noise, ``mean_i -log exp(L_ii) / sum_c W_ic exp(L_ic)``.

With ``phi = 1`` (no cosine exceeds 1) and ``noise_times = 0`` the paper form is SimCSE's InfoNCE.

The complementary model (``complementary``): ``initial`` (default) is a frozen copy of the run's
encoder as it is when training starts; any other value is a model name or folder that
the harness loads and hands to :meth:`~methods.base.Method.bind` (the paper's choice is a trained
SimCSE: a SimCSE run of the same store trained with ``--save-model`` keeps its encoder under
``RUNS/checkpoints/<run_id>``). It must share the run's tokenizer (it reads the same token ids); the
harness checks that when it loads it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, ModelLoader, encoder_parts, repeat_rows
from methods.losses import cosine_logits
from methods.params import ContrastiveParams, check_non_negative, switch
from methods.simcse import ContrastiveMethod

INITIAL = "initial"
"""``complementary`` value: a frozen copy of the run's encoder at the start of training."""


# -- pure maths -------------------------------------------------------------------------------------


def complementary_weights(c1: torch.Tensor, c2: torch.Tensor, phi: float, num_noise: int) -> torch.Tensor:
    """DCLR's instance weights ``[B, B + N]``: ``w_ij = 0`` where ``cos(c1_i, c2_j) > phi`` (``j != i``),
    else 1; the positive ``w_ii`` and the ``N`` noise columns are 1.

    Args:
        c1, c2: ``[B, d_c]`` the complementary model's two views (any width ``d_c``).
        phi: the similarity threshold.
        num_noise: ``N``, the number of noise columns appended.
    """
    sim = F.normalize(c1, dim=-1) @ F.normalize(c2, dim=-1).T
    w = (sim <= phi).to(c1.dtype)
    w.fill_diagonal_(1.0)
    return torch.cat([w, w.new_ones(w.shape[0], num_noise)], dim=1)


def refine_noise(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    noise: torch.Tensor,
    temperature: float,
    steps: int,
    step_size: float,
) -> torch.Tensor:
    """Gradient ascent on the noise negatives (DCLR's refinement), returned detached.

    Each step: ``l = mean_i -log softmax([s(a_i, p_j)]_j ++ [s(a_i, n_k)]_k)[i]``,
    ``g = dl/dn``, ``n <- n + step_size * g / ||g||_row``; NaN entries (a zero gradient row) become 0.

    Args:
        anchor, positive: ``[B, d]`` (``z1``, ``z2``; treated as constants here).
        noise: ``[N, d]`` the starting noise.
        temperature: ``tau``; steps: number of ascent steps; step_size: the step length.
    """
    a, p = anchor.detach(), positive.detach()
    base = cosine_logits(a, p, temperature)
    target = torch.arange(a.shape[0], device=a.device)
    n = noise.detach()
    with torch.enable_grad():
        for _ in range(steps):
            n = n.clone().requires_grad_(True)
            logits = torch.cat([base, cosine_logits(a, n, temperature)], dim=1)
            (grad,) = torch.autograd.grad(F.cross_entropy(logits, target), n)
            n = n.detach() + step_size * grad / grad.norm(dim=-1, keepdim=True)
            n = torch.where(torch.isnan(n), torch.zeros_like(n), n)
    return n.detach()


def dclr_released_loss(logits: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """DCLR's released objective on logits ``[B, B + N]`` (positives on the diagonal of the first
    ``B`` columns): ``mean_{i,c} -[y_ic log p_ic + (1 - y_ic) log(1 - p_ic)]`` with
    ``p = softmax_row(logits * weights)`` and ``y_ic = [c == i]``."""
    b = logits.shape[0]
    idx = torch.arange(b, device=logits.device)
    scaled = logits * weights
    log_p = torch.log_softmax(scaled, dim=1)
    # log(1 - p_ic) = logsumexp_{c' != c} scaled_ic' - logsumexp_c' scaled_ic', kept finite near p = 1
    log_not_p = torch.log((-torch.expm1(log_p)).clamp_min(torch.finfo(log_p.dtype).tiny))
    positive = torch.zeros_like(log_p, dtype=torch.bool)
    positive[idx, idx] = True
    per_entry = torch.where(positive, -log_p, -log_not_p)
    return per_entry.mean()


def dclr_paper_loss(logits: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """DCLR's paper objective on logits ``[B, B + N]``:
    ``mean_i -log exp(logits_ii) / sum_c weights_ic exp(logits_ic)`` (weights 0 or 1)."""
    idx = torch.arange(logits.shape[0], device=logits.device)
    masked = logits.masked_fill(weights == 0, float("-inf"))
    return (torch.logsumexp(masked, dim=1) - logits[idx, idx]).mean()


DCLR_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "released": dclr_released_loss,
    "paper": dclr_paper_loss,
}
"""The objective of each ``loss_form``: the method picks its own once, when it is built."""


# -- the method -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DCLRParams(ContrastiveParams):
    """Hyper-parameters of DCLR (grid keys), besides the shared ``temperature`` and ``mlp``.

    Attributes:
        phi: complementary-similarity threshold: an in-batch negative whose cosine under the
            complementary model exceeds it gets weight 0 (run.sh BERT-base: 0.9; RoBERTa: 0.85).
        noise_times: noise negatives per batch sentence, ``N = int(B * noise_times)`` (run.sh
            BERT-base: 1; RoBERTa: 2.5); 0 = none.
        noise_std: standard deviation of the Gaussian noise (code: ``torch.randn``, 1.0).
        ascent_steps: gradient-ascent steps on the noise (train.py ``pgd``: 4); 0 = raw noise.
        ascent_step_size: length of each normalised ascent step (code: 1e-3).
        loss_form: ``released`` (default: softmax of weight-multiplied logits, binary cross-entropy
            over every entry, the code's ``cl_vat_forward``) or ``paper`` (InfoNCE with the weights
            on the denominator terms).
        complementary: ``initial`` (a frozen copy of the encoder at the start of training) or a
            model name or folder (e.g. ``RUNS/checkpoints/<run_id>`` of a SimCSE run trained with
            ``--save-model``; the paper's choice is a trained SimCSE).
        complementary_feature: ``pooler`` (default, the released code: the complementary model's
            BERT pooler output, ``tanh(dense([CLS]))``, no MLP) or ``train_pooler`` (the run's
            training pooler, what this harness used before).
    """

    phi: float = 0.9
    noise_times: float = 1.0
    noise_std: float = 1.0
    ascent_steps: int = 4
    ascent_step_size: float = 1e-3
    loss_form: Literal["released", "paper"] = switch(
        "released", "released: BCE on softmax(weights * logits); paper: weighted InfoNCE denominator"
    )
    complementary: str = INITIAL
    complementary_feature: Literal["pooler", "train_pooler"] = switch(
        "pooler",
        "pooler: the complementary model's BERT pooler output, tanh(dense([CLS])), no MLP (released); "
        "train_pooler: the run's training pooler",
    )

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        if not 0.0 <= self.phi <= 1.0:
            raise ConfigError(f"phi must be in [0, 1] (a cosine threshold), got {self.phi}")
        check_non_negative(self.noise_times, "noise_times")
        check_non_negative(self.noise_std, "noise_std")
        check_non_negative(self.ascent_step_size, "ascent_step_size")
        if self.ascent_steps < 0:
            raise ConfigError(f"ascent_steps must be >= 0, got {self.ascent_steps}")
        if not self.complementary.strip():
            raise ConfigError("complementary must be 'initial' or a model name or folder, got ''")

    def models(self) -> tuple[str, ...]:
        return () if self.complementary == INITIAL else (self.complementary,)


class DCLR(ContrastiveMethod[DCLRParams]):
    """SimCSE's two dropout views plus refined noise negatives and complementary-model weights."""

    name = "dclr"
    description = (
        "DCLR: noise negatives refined by gradient ascent and in-batch negatives dropped by a frozen "
        "complementary model's similarity."
    )
    citation = (
        "Zhou et al., Debiased Contrastive Learning of Unsupervised Sentence Representations, ACL 2022 "
        "(github.com/RUCAIBox/DCLR)"
    )
    smoke_params = (
        {},
        {"loss_form": "paper", "noise_times": 2.5, "phi": 0.5, "complementary_feature": "train_pooler"},
    )
    complementary_encoder: nn.Module

    def __init__(self, params: DCLRParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.objective = DCLR_LOSSES[params.loss_form]

    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        super().bind(encoder, load)
        if self.params.complementary == INITIAL:
            model = copy.deepcopy(encoder)
        elif load is None:
            raise ConfigError(f"dclr: complementary={self.params.complementary!r} needs the harness's loader")
        else:
            model = load(self.params.complementary)
        model.train()  # dropout on, as the released code's fixed model in a training-mode module
        if self.params.complementary_feature == "pooler" and not isinstance(
            encoder_parts(model).get("pooler_dense"), nn.Linear
        ):
            raise ConfigError(
                f"dclr: complementary_feature='pooler' reads the complementary model's pooler layer, "
                f"and {self.params.complementary!r} has none; set complementary_feature=train_pooler"
            )
        self.register_frozen("complementary_encoder", model)

    def complementary_features(self, encode: EncodeFn, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The complementary model's two dropout views of every sentence, ``[B, 2, d_c]``, no gradient."""
        doubled = repeat_rows(batch, 2)
        b = batch["input_ids"].shape[0]
        with torch.no_grad():
            if self.params.complementary_feature == "train_pooler":
                return encode(doubled, encoder=self.complementary_encoder).view(b, 2, -1)
            dense = encoder_parts(self.complementary_encoder)["pooler_dense"]
            cls = encode.tokens(doubled, encoder=self.complementary_encoder).hidden[:, 0]
            return torch.tanh(dense(cls)).view(b, 2, -1)  # BertPooler: dense, then Tanh

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        p = self.params
        views = self.head(self.encode_views(encode, batch, 2))
        z1, z2 = views[:, 0], views[:, 1]
        b = z1.shape[0]
        comp = self.complementary_features(encode, batch)
        num_noise = int(b * p.noise_times)
        noise = torch.randn(num_noise, z1.shape[1], device=z1.device, dtype=z1.dtype) * p.noise_std
        noise = refine_noise(z1, z2, noise, p.temperature, p.ascent_steps, p.ascent_step_size)
        weights = complementary_weights(comp[:, 0], comp[:, 1], p.phi, num_noise)
        logits = torch.cat(
            [cosine_logits(z1, z2, p.temperature), cosine_logits(z1, noise, p.temperature)], dim=1
        )
        loss = self.objective(logits, weights)
        dropped = (weights[:, :b] == 0).sum() / max(b * (b - 1), 1)
        return LossOutput(loss, {"loss_dclr": loss.detach(), "dropped_negatives": dropped})
