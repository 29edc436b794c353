"""ConSERT: NT-Xent against a loop written from the equation, the augmentations, and the reductions."""

from __future__ import annotations

import math

import pytest
import torch

from harness.encoder.model import dropout_off
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods import build_params
from methods.base import repeat_rows
from methods.consert import (
    CUTOFF_KEEPS,
    RECIPE,
    ConSERT,
    ConSERTParams,
    nt_xent_terms,
    shuffled_positions,
)
from methods.losses import info_nce
from methods.simcse import SimCSE, SimCSEParams
from tests.helpers import cos

GRID = [(b, d, tau) for b in (2, 5, 8) for d in (4, 12) for tau in (0.1, 1.0)]


def ref_nt_xent(z1: list[list[float]], z2: list[list[float]], tau: float, intra: bool) -> float:
    """ConSERT Eq. 1 over the 2B rows r = [z1; z2]: the positive of r_k is its other view, the
    denominator sums over every r_j, j != k (intra) or over the other view's rows only (not intra);
    the loss is the mean over the 2B anchors."""
    r = z1 + z2
    n = len(z1)
    total = 0.0
    for k in range(2 * n):
        pos = (k + n) % (2 * n)
        others = [j for j in range(2 * n) if j != k and (intra or (j < n) != (k < n))]
        den = sum(math.exp(cos(r[k], r[j]) / tau) for j in others)
        total += -math.log(math.exp(cos(r[k], r[pos]) / tau) / den)
    return total / (2 * n)


@pytest.mark.parametrize(("b", "d", "tau"), GRID)
@pytest.mark.parametrize("intra", [True, False])
def test_nt_xent_matches_the_loop_reference(b: int, d: int, tau: float, intra: bool) -> None:
    gen = torch.Generator().manual_seed(b * 100 + d)
    z1 = torch.randn(b, d, generator=gen, dtype=torch.float64)
    z2 = torch.randn(b, d, generator=gen, dtype=torch.float64)
    a, c = nt_xent_terms(z1, z2, tau, intra)
    assert ((a + c) / 2).item() == pytest.approx(ref_nt_xent(z1.tolist(), z2.tolist(), tau, intra), rel=1e-9)


def test_without_intra_view_negatives_the_terms_are_both_directions_of_infonce() -> None:
    gen = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(6, 8, generator=gen), torch.randn(6, 8, generator=gen)
    a, c = nt_xent_terms(z1, z2, 0.1, intra_view_negatives=False)
    torch.testing.assert_close(a, info_nce(z1, z2, 0.1))
    torch.testing.assert_close(c, info_nce(z2, z1, 0.1))


MASK = torch.tensor([[1] * 7 + [0] * 3, [1] * 10, [1, 1, 1] + [0] * 7, [1] * 5 + [0] * 5])


def test_shuffle_permutes_each_rows_real_positions_and_keeps_the_padding() -> None:
    torch.manual_seed(0)
    changed = 0
    for _ in range(20):
        pos = shuffled_positions(MASK)
        for row, m in zip(pos, MASK, strict=True):
            n = int(m.sum())
            assert sorted(row[:n].tolist()) == list(range(n))
            assert row[n:].tolist() == list(range(n, len(m)))
            changed += int(row[:n].tolist() != list(range(n)))
    assert changed > 40  # a real permutation, not the identity


@pytest.mark.parametrize("rate", [0.1, 0.2, 0.5])
def test_cutoffs_zero_the_counts_consert_zeroes(rate: float) -> None:
    torch.manual_seed(1)
    d = 16
    lengths = MASK.sum(1)
    token = CUTOFF_KEEPS["token_cutoff"](rate, MASK, d)  # [n, L, 1]
    assert token.shape == (4, 10, 1)
    for i, n in enumerate(lengths.tolist()):
        assert int((token[i, :, 0] == 0).sum()) == math.floor(n * rate)
        assert bool((token[i, n:] == 1).all())  # padding never counts
    feature = CUTOFF_KEEPS["feature_cutoff"](rate, MASK, d)  # [n, 1, d]
    assert feature.shape == (4, 1, d)
    assert ((feature == 0).sum(dim=(1, 2)) == math.floor(d * rate)).all()
    assert not torch.equal(feature[0], feature[1])  # drawn per row
    element = CUTOFF_KEEPS["dropout"](rate, MASK, d)  # [n, L, d]
    for i, n in enumerate(lengths.tolist()):
        assert int((element[i] == 0).sum()) == math.floor(n * d * rate)
        assert bool((element[i, n:] == 1).all())


def test_the_method_picks_its_views_augmentations_once_when_it_is_built() -> None:
    method = ConSERT(ConSERTParams(view1="shuffle", view2="token_cutoff", rate2=0.3), 16)
    assert method.shuffles == [True, False]
    assert method.cutoffs == [(1, CUTOFF_KEEPS["token_cutoff"], 0.3)]
    plain = ConSERT(ConSERTParams(view1="none", view2="none"), 16)
    assert plain.shuffles == [False, False] and plain.cutoffs == []


@pytest.fixture(scope="module")
def batch(encoder):
    sents = ["a man plays a guitar .", "two dogs run", "the sky is blue today and tomorrow", "hi"]
    return encoder.tokenize(sents, max_length=16)


def consert(hidden: int, **overrides) -> ConSERT:
    return ConSERT(ConSERTParams.from_overrides({**RECIPE, **overrides}), hidden)


def test_dropout_only_consert_is_simcse_symmetrised_at_the_same_temperature(encoder, batch) -> None:
    """Views 'none'/'none' with the network's dropout on, no intra-view negatives, paper weighting:
    ConSERT's loss is (InfoNCE(z1, z2) + InfoNCE(z2, z1)) / 2 on SimCSE's two dropout views, and its
    first half is SimCSE's loss itself (same seed = same dropout masks, same rows)."""
    tau = 0.1
    method = consert(
        encoder.hidden_size,
        view1="none",
        view2="none",
        network_dropout=True,
        intra_view_negatives=False,
        loss_weight="paper",
        temperature=tau,
    )
    simcse = SimCSE(SimCSEParams(temperature=tau, mlp=False), encoder.hidden_size)
    encode = TrainingEncode(encoder)
    torch.manual_seed(3)
    ours = method.compute_loss(encode, batch, step=0).loss
    torch.manual_seed(3)
    theirs = simcse.compute_loss(encode, batch, step=0).loss
    torch.manual_seed(3)
    views = encode(repeat_rows(batch, 2)).view(4, 2, -1)
    torch.testing.assert_close(theirs, info_nce(views[:, 0], views[:, 1], tau))
    backward = info_nce(views[:, 1], views[:, 0], tau)
    torch.testing.assert_close(ours, (theirs + backward) / 2)


def test_released_weighting_is_0_15_times_the_sum(encoder, batch) -> None:
    paper = consert(encoder.hidden_size, loss_weight="paper")
    released = consert(encoder.hidden_size)
    encode = TrainingEncode(encoder)
    torch.manual_seed(5)
    lp = paper.compute_loss(encode, batch, step=0)
    torch.manual_seed(5)
    lr = released.compute_loss(encode, batch, step=0)
    torch.testing.assert_close(lr.loss, 0.15 * 2 * lp.loss)
    assert float(lr.metrics["loss_ntxent"]) == pytest.approx(lp.loss.item(), rel=1e-5)


def test_default_views_are_the_features_of_the_manual_augmentation(encoder, batch) -> None:
    """The default (feature cutoff 0.2 / shuffle, dropout off): view 1 is the row with a fifth of its
    embedding-output channels zeroed, view 2 the row with shuffled positions, as ConSERT computes them;
    length buckets give the same features (the masks are drawn once per call)."""
    method = consert(encoder.hidden_size)
    torch.manual_seed(7)
    rows, edit = method.augmented_batch(batch)
    assert edit is not None and edit.output is not None and edit.words is None
    n, length = rows["attention_mask"].shape
    identity = torch.arange(length).expand(n, -1)
    assert torch.equal(rows["position_ids"][0::2], identity[0::2])  # view 1 is not shuffled
    assert not torch.equal(rows["position_ids"][1::2], identity[1::2])
    states = torch.ones(n, length, encoder.hidden_size)
    kept = edit.output(states, rows["attention_mask"], torch.arange(n))
    zeroed = (kept[0::2, 0] == 0).sum(dim=1)
    assert (zeroed == int(encoder.hidden_size * 0.2)).all()
    assert bool((kept[1::2] == 1).all())  # view 2 is not cut
    plain = TrainingEncode(encoder)(rows, dropout=False, embeddings=edit)
    bucketed = TrainingEncode(encoder, length_buckets=3)(rows, dropout=False, embeddings=edit)
    torch.testing.assert_close(bucketed, plain, rtol=1e-5, atol=1e-5)
    # the manual computation: embedding module with the shuffled ids, channels zeroed, layers
    model = encoder.model
    with torch.no_grad(), dropout_off(encoder):
        emb = model.embeddings(
            input_ids=rows["input_ids"],
            token_type_ids=rows["token_type_ids"],
            position_ids=rows["position_ids"],
        )
        hidden = emb * kept
        for layer in model.encoder.layer:
            hidden = layer(hidden, (1.0 - rows["attention_mask"][:, None, None, :].float()) * -1e9)
    with torch.no_grad():
        torch.testing.assert_close(plain.detach(), hidden[:, 0], rtol=1e-4, atol=1e-4)


def test_loss_trains_and_gradients_reach_the_encoder(encoder, batch) -> None:
    for overrides in ConSERT.smoke_params:
        method = consert(encoder.hidden_size, **dict(overrides))
        out = method.compute_loss(TrainingEncode(encoder), batch, step=0)
        assert torch.isfinite(out.loss)
        grads = torch.autograd.grad(out.loss, list(encoder.parameters()), allow_unused=True)
        assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_rates_are_validated() -> None:
    with pytest.raises(ConfigError, match="rate1"):
        build_params("consert", {"rate1": 1.0}).validate()
    with pytest.raises(ConfigError, match="rate2"):
        build_params("consert", {"rate2": 0.0}).validate()
    with pytest.raises(ConfigError, match="view1"):
        build_params("consert", {"view1": "span"})
