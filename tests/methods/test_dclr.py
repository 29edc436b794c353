"""DCLR: its weights, noise refinement and both loss forms against loops written from the equations;
the reduction to SimCSE (loss and gradients); the complementary model's wiring; the released
complementary feature and loss (RUCAIBox/DCLR) against a loop reference."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from harness.encoder.loading import load_encoder, loader_beside
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError, ModelLoadError
from methods import build_params
from methods.dclr import (
    DCLR,
    DCLR_LOSSES,
    DCLRParams,
    complementary_weights,
    dclr_paper_loss,
    dclr_released_loss,
    refine_noise,
)
from methods.losses import cosine_logits, info_nce
from tests.helpers import bound_method, cos, loss_and_grads, no_dropout, threshold_between

GRID = [(b, n, d, tau) for b in (2, 5) for n in (0, 3) for d in (4, 7) for tau in (0.05, 1.0)]


def ref_logits(z1, z2, noise, tau):
    return [[cos(a, c) / tau for c in list(z2) + list(noise)] for a in z1]


def ref_released(logits, weights):
    # p = softmax_c(l_ic * w_ic); mean over all (i, c) of -[y log p + (1 - y) log(1 - p)], y_ic = [c == i]
    total, count = 0.0, 0
    for i, (row, wrow) in enumerate(zip(logits, weights)):
        scaled = [x * w for x, w in zip(row, wrow)]
        den = sum(math.exp(x) for x in scaled)
        for c, x in enumerate(scaled):
            p = math.exp(x) / den
            total += -math.log(p) if c == i else -math.log(1.0 - p)
            count += 1
    return total / count


def ref_paper(logits, weights):
    # mean_i -log exp(l_ii) / sum_c w_ic exp(l_ic)
    total = 0.0
    for i, (row, wrow) in enumerate(zip(logits, weights)):
        den = sum(w * math.exp(x) for x, w in zip(row, wrow))
        total += -math.log(math.exp(row[i]) / den)
    return total / len(logits)


def ref_weights(c1, c2, phi, num_noise):
    out = []
    for i, a in enumerate(c1):
        row = [1.0 if j == i or cos(a, b) <= phi else 0.0 for j, b in enumerate(c2)]
        out.append(row + [1.0] * num_noise)
    return out


def random_weights(b: int, n: int, gen: torch.Generator) -> torch.Tensor:
    w = (torch.rand(b, b, generator=gen) > 0.4).double()
    w.fill_diagonal_(1.0)
    return torch.cat([w, torch.ones(b, n, dtype=torch.float64)], dim=1)


@pytest.mark.parametrize(("b", "n", "d", "tau"), GRID)
@pytest.mark.parametrize("form", ["released", "paper"])
def test_dclr_loss_matches_loop(b, n, d, tau, form):
    gen = torch.Generator().manual_seed(b * 100 + n * 10 + d)
    z1, z2 = torch.randn(b, d, generator=gen).double(), torch.randn(b, d, generator=gen).double()
    noise = torch.randn(n, d, generator=gen).double()
    weights = random_weights(b, n, gen)
    logits = ref_logits(z1.tolist(), z2.tolist(), noise.tolist(), tau)
    got = DCLR_LOSSES[form](torch.tensor(logits, dtype=torch.float64), weights)
    ref = ref_released if form == "released" else ref_paper
    assert float(got) == pytest.approx(ref(logits, weights.tolist()), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("form", ["released", "paper"])
def test_the_method_picks_its_loss_form_once_when_it_is_built(form: str) -> None:
    method = DCLR(DCLRParams(loss_form=form), 8)  # type: ignore[arg-type]
    assert method.objective is DCLR_LOSSES[form]
    assert method.objective is (dclr_released_loss if form == "released" else dclr_paper_loss)


@pytest.mark.parametrize(("b", "n", "d", "tau"), GRID)
def test_complementary_weights_match_loop(b, n, d, tau):
    gen = torch.Generator().manual_seed(b + n + d)
    c1 = torch.randn(b, d, generator=gen).double()
    c2 = c1 + 0.5 * torch.randn(b, d, generator=gen).double()  # some pairs above, some below phi
    for phi in (0.0, 0.3, 0.9, 1.0):
        got = complementary_weights(c1, c2, phi, n)
        assert got.tolist() == ref_weights(c1.tolist(), c2.tolist(), phi, n)


def ref_refine(z1, z2, noise, tau, steps, step_size):
    """Gradient ascent with the InfoNCE's gradient written out: for
    ``l = mean_i [-s_ii + log sum_c exp(s_ic)]`` and ``s_ik = cos(a_i, n_k) / tau``,
    ``dl/dn_k = mean_i p_ik (a_i / (|a_i| |n_k|) - cos(a_i, n_k) n_k / |n_k|^2) / tau``."""
    nz = [list(r) for r in noise]
    for _ in range(steps):
        grad = [[0.0] * len(nz[0]) for _ in nz]
        for a in z1:
            row = [cos(a, c) / tau for c in list(z2) + nz]
            den = sum(math.exp(x) for x in row)
            norm_a = math.sqrt(sum(x * x for x in a))
            for k, n in enumerate(nz):
                p = math.exp(row[len(z2) + k]) / den
                norm_n = math.sqrt(sum(x * x for x in n))
                c = cos(a, n)
                for j in range(len(n)):
                    d_cos = a[j] / (norm_a * norm_n) - c * n[j] / norm_n**2
                    grad[k][j] += p * d_cos / tau / len(z1)
        for k, g in enumerate(grad):
            norm = math.sqrt(sum(x * x for x in g))
            nz[k] = [x + step_size * gx / norm for x, gx in zip(nz[k], g)]
    return nz


@pytest.mark.parametrize(("b", "n", "d", "tau"), [g for g in GRID if g[1] > 0])
def test_refine_noise_matches_loop(b, n, d, tau):
    gen = torch.Generator().manual_seed(7 * b + n + d)
    z1, z2 = torch.randn(b, d, generator=gen).double(), torch.randn(b, d, generator=gen).double()
    noise = torch.randn(n, d, generator=gen).double()
    step_size = 0.05  # larger than the default 1e-3 so that the steps visibly move the noise
    got = refine_noise(z1, z2, noise, tau, steps=3, step_size=step_size)
    ref = ref_refine(z1.tolist(), z2.tolist(), noise.tolist(), tau, 3, step_size)
    torch.testing.assert_close(got, torch.tensor(ref, dtype=torch.float64), rtol=1e-6, atol=1e-7)
    assert not got.requires_grad


def test_refine_noise_raises_the_infonce_and_zero_steps_keep_the_noise():
    gen = torch.Generator().manual_seed(3)
    z1, z2, noise = (torch.randn(s, 6, generator=gen).double() for s in (4, 4, 5))

    def nce(nz):
        logits = cosine_logits(z1, torch.cat([z2, nz]), 0.05)
        return float(torch.nn.functional.cross_entropy(logits, torch.arange(4)))

    refined = refine_noise(z1, z2, noise, 0.05, steps=4, step_size=1e-3)
    assert nce(refined) > nce(noise)
    torch.testing.assert_close(refine_noise(z1, z2, noise, 0.05, steps=0, step_size=1e-3), noise)


@pytest.mark.parametrize(("b", "d", "tau"), [(2, 4, 0.05), (5, 7, 1.0), (8, 12, 0.05)])
def test_paper_form_without_drops_or_noise_is_infonce(b, d, tau):
    gen = torch.Generator().manual_seed(b)
    z1, z2 = torch.randn(b, d, generator=gen).double(), torch.randn(b, d, generator=gen).double()
    logits = torch.tensor(ref_logits(z1.tolist(), z2.tolist(), [], tau), dtype=torch.float64)
    got = DCLR_LOSSES["paper"](logits, torch.ones(b, b, dtype=torch.float64))
    torch.testing.assert_close(got, info_nce(z1, z2, tau), rtol=1e-12, atol=1e-12)


def test_released_form_without_drops_or_noise_is_infonce_plus_the_negative_terms():
    # mean over B^2 entries: B InfoNCE rows plus -log(1 - p_ij) for the off-diagonal entries
    gen = torch.Generator().manual_seed(11)
    b = 6
    z1, z2 = torch.randn(b, 5, generator=gen).double(), torch.randn(b, 5, generator=gen).double()
    logits = torch.nn.functional.normalize(z1, dim=-1) @ torch.nn.functional.normalize(z2, dim=-1).T / 0.05
    p = torch.softmax(logits, dim=1)
    off = ~torch.eye(b, dtype=torch.bool)
    expected = (b * info_nce(z1, z2, 0.05) - torch.log(1 - p[off]).sum()) / b**2
    got = DCLR_LOSSES["released"](logits, torch.ones(b, b, dtype=torch.float64))
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


# -- the method on the tiny encoder ---------------------------------------------------------------


def test_paper_form_with_phi_1_and_no_noise_is_simcse(encoder, sents_batch):
    """The SimCSE views come from the first encoder call, so the same seed gives the same masks."""
    simcse = bound_method("simcse", encoder)
    ref_out, ref_grads = loss_and_grads(simcse, encoder, sents_batch, trainable_only=True)
    dclr = bound_method("dclr", encoder, loss_form="paper", phi=1.0, noise_times=0)
    out, grads = loss_and_grads(dclr, encoder, sents_batch, trainable_only=True)
    torch.testing.assert_close(out.loss, ref_out.loss, rtol=1e-5, atol=1e-6)
    assert len(grads) == len(ref_grads)
    for a, b in zip(grads, ref_grads):  # the same features; the two losses' sums differ in rounding
        torch.testing.assert_close(a, b, rtol=1e-4, atol=5e-6)
    assert float(out.metrics["dropped_negatives"]) == 0.0


def test_noise_and_drops_change_the_loss(encoder, sents_batch):
    # temperature 1: at 0.05 the positive's exp(20) dwarfs a noise term's exp(0) in float32
    paper = {"loss_form": "paper", "temperature": 1.0}
    drops = [{"phi": 1.0, "noise_times": 0}, {"phi": 1.0, "noise_times": 2}, {"phi": 0.0, "noise_times": 0}]
    plain, noisy, dropped = (
        loss_and_grads(
            bound_method("dclr", encoder, **paper, **d), encoder, sents_batch, trainable_only=True
        )[0]
        for d in drops
    )
    # more negatives in the denominator
    assert float(noisy.metrics["loss_dclr"]) > float(plain.metrics["loss_dclr"])
    assert float(dropped.metrics["dropped_negatives"]) > 0
    assert float(dropped.metrics["loss_dclr"]) < float(plain.metrics["loss_dclr"])  # fewer negatives


def test_initial_complementary_model_is_a_frozen_copy(encoder):
    method = DCLR(DCLRParams(), encoder.hidden_size)
    method.bind(encoder)
    comp = method.complementary_encoder
    assert comp is not encoder and comp.training
    assert all(not p.requires_grad for p in comp.parameters())
    trainable = {id(p) for p in method.trainable_parameters()}
    assert not trainable & {id(p) for p in comp.parameters()}
    assert not any(k.startswith("complementary_encoder") for k in method.snapshot_state())
    for a, b in zip(comp.parameters(), encoder.parameters()):
        torch.testing.assert_close(a, b)


def test_complementary_model_from_a_saved_folder(encoder, tmp_path):
    other = load_encoder("random:tiny", seed=5)
    hf_model: Any = other.model
    hf_model.save_pretrained(str(tmp_path))
    other.tokenizer.save_pretrained(str(tmp_path))
    method = DCLR(DCLRParams(complementary=str(tmp_path)), encoder.hidden_size)
    method.bind(encoder, loader_beside(encoder))  # the harness loads the model the method names
    for a, b in zip(method.complementary_encoder.parameters(), other.parameters()):
        torch.testing.assert_close(a, b)
    assert all(not p.requires_grad for p in method.complementary_encoder.parameters())


@pytest.mark.parametrize(
    ("overrides", "field"),
    [({"phi": 1.5}, "phi"), ({"noise_times": -1}, "noise_times"), ({"ascent_steps": -1}, "ascent_steps")],
)
def test_bad_values_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        build_params("dclr", overrides).validate(64)


def test_a_missing_complementary_folder_is_a_one_line_user_error(encoder, tmp_path):
    method = DCLR(DCLRParams(complementary=str(tmp_path / "no-such-run")), encoder.hidden_size)
    with pytest.raises(ModelLoadError, match="no-such-run"):
        method.bind(encoder, loader_beside(encoder))


# -- the released complementary feature and loss (RUCAIBox/DCLR) ---------------------------------------
# DCLR's complementary feature as released (RUCAIBox/DCLR), each reading against a loop reference.
#
# The released ``cl_vat_forward`` (simcse/models.py) pools the trained and the fixed encoder alike
# with ``encoder.pooler`` (``cl_forward_denoised``: BERT's pooler, dense + tanh on [CLS]) and applies
# its MLP only to the trained one (``is_fix``); the weights are ``where(cos_fix / temp > 20 phi, 0, 1)``
# with the positive's set back to 1 (``mask_weights``), and with no noise negatives the loss is the
# binary cross-entropy over ``softmax(cos_sim * weights)``. The reference below recomputes that from
# the complementary model's own Hugging Face forward (its ``pooler_output``) in float64 without dropout,
# and compares the loss with the method's for both readings of ``complementary_feature``.

SENTENCES = [
    "a man is playing a guitar .",
    "a man plays the guitar .",
    "two dogs run through the snow",
    "the stock market fell sharply today",
    "a woman slices a tomato",
    "children play soccer in a park",
]


def released_loss(
    z1: torch.Tensor, z2: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor, phi: float, temp: float
) -> torch.Tensor:
    """``cl_vat_forward`` with ``noise_times = 0`` (no noise columns), written as loops."""
    b = z1.shape[0]
    cos_sim = torch.stack(
        [torch.stack([F.cosine_similarity(z1[i], z2[j], dim=0) / temp for j in range(b)]) for i in range(b)]
    )
    cos_fix = torch.stack(
        [torch.stack([F.cosine_similarity(c1[i], c2[j], dim=0) / temp for j in range(b)]) for i in range(b)]
    )
    weights = torch.where(cos_fix > phi * 20, 0.0, 1.0)  # the code's phi * 20, i.e. phi / temp at 0.05
    for i in range(b):
        weights[i, i] = 1.0  # mask_weights: eye - diag(diag(weights)) added back
    soft = torch.softmax(cos_sim * weights, -1)
    total = torch.zeros(())
    for i in range(b):
        for j in range(b):
            y = 1.0 if i == j else 0.0
            total = total - (y * torch.log(soft[i, j]) + (1 - y) * torch.log(1 - soft[i, j]))
    return total / (b * b)


def test_the_released_feature_is_the_default() -> None:
    assert DCLRParams().complementary_feature == "pooler"


@pytest.mark.parametrize("feature", ["pooler", "train_pooler"])
def test_the_loss_matches_the_released_loop(float64, feature: str) -> None:
    encoder = load_encoder("random:tiny", seed=11)
    no_dropout(encoder)
    encoder.train()
    batch = encoder.tokenize(SENTENCES, max_length=16)
    model: Any = encoder.model
    with torch.no_grad():
        out = model(**batch, return_dict=True)
    # the complementary model is a frozen copy of this encoder at the start ("initial")
    c = out.pooler_output if feature == "pooler" else out.last_hidden_state[:, 0]
    sims = F.normalize(c, dim=-1) @ F.normalize(c, dim=-1).T
    off = sims[~torch.eye(len(SENTENCES), dtype=torch.bool)]
    phi = threshold_between(off)  # about half of the in-batch negatives are dropped
    params = DCLRParams.from_overrides({"phi": phi, "noise_times": 0.0, "complementary_feature": feature})
    method = DCLR(params, encoder.hidden_size)
    method.bind(encoder)
    no_dropout(method)
    got = method.compute_loss(TrainingEncode(encoder), batch, step=1)
    assert 0.2 < float(got.metrics["dropped_negatives"]) < 0.8
    z = method.head(out.last_hidden_state[:, 0])  # the run's training feature (cls_before_pooler) + MLP
    expected = released_loss(z, z, c, c, phi, params.temperature)
    assert float(got.loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-10)


def test_the_two_readings_drop_different_negatives(float64) -> None:
    encoder = load_encoder("random:tiny", seed=11)
    no_dropout(encoder)
    batch = encoder.tokenize(SENTENCES, max_length=16)
    model: Any = encoder.model
    with torch.no_grad():
        out = model(**batch, return_dict=True)
    pooled = F.normalize(out.pooler_output, dim=-1)
    cls = F.normalize(out.last_hidden_state[:, 0], dim=-1)
    mask = ~torch.eye(len(SENTENCES), dtype=torch.bool)
    phi = threshold_between((pooled @ pooled.T)[mask])
    assert not torch.equal((pooled @ pooled.T)[mask] > phi, (cls @ cls.T)[mask] > phi)


def test_a_complementary_model_without_a_pooler_is_refused_with_the_released_feature() -> None:
    encoder = load_encoder("random:tiny", seed=12)
    model: Any = encoder.model
    model.pooler = None
    with pytest.raises(ConfigError, match="complementary_feature=train_pooler"):
        DCLR(DCLRParams(), encoder.hidden_size).bind(encoder)
    DCLR(DCLRParams(complementary_feature="train_pooler"), encoder.hidden_size).bind(encoder)
