"""Methods on a tiny random encoder: reductions to SimCSE (loss AND gradients), the dropout-off pass,
view layouts of the WhitenedCSE readings, probe metrics."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sentences import SENTS

from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_rates
from harness.encoder.training_encode import TrainingEncode
from harness.errors import TrainingError
from harness.run.footprint import footprint
from methods import REGISTRY, build_params
from methods.base import Method
from methods.whitening import group_whiten, random_permutations


@pytest.fixture(scope="module")
def batch(encoder):
    return encoder.tokenize(SENTS, max_length=32)


def make(name: str, hidden: int, **overrides: Any) -> Any:
    torch.manual_seed(123)  # the same MLP head initialisation for every method
    return REGISTRY[name](build_params(name, overrides), hidden)


def loss_and_grads(method: Method, encoder, batch, seed: int = 7):
    encoder.zero_grad(set_to_none=True)
    method.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    out = method.compute_loss(TrainingEncode(encoder), batch, step=0)
    out.loss.backward()
    params = list(encoder.parameters()) + list(method.parameters())
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    return out, grads


def assert_same(a, b):
    (out_a, grads_a), (out_b, grads_b) = a, b
    torch.testing.assert_close(out_a.loss, out_b.loss, rtol=1e-5, atol=1e-6)
    assert len(grads_a) == len(grads_b)
    for ga, gb in zip(grads_a, grads_b):
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def simcse_ref(encoder, batch):
    return loss_and_grads(make("simcse", encoder.hidden_size), encoder, batch)


@pytest.mark.parametrize("reading", ["paper", "released"])
def test_whitenedcse_without_whitening_and_m2_is_simcse(encoder, batch, simcse_ref, reading):
    method = make("whitenedcse", encoder.hidden_size, whitening="none", num_positives=2, reading=reading)
    assert_same(loss_and_grads(method, encoder, batch), simcse_ref)


def test_simcsepp_with_m1_no_dcl_dropout_negatives_is_simcse(encoder, batch, simcse_ref):
    method = make("simcsepp", encoder.hidden_size, m=1.0, lambda_dcl=0.0, off_dropout=False)
    assert_same(loss_and_grads(method, encoder, batch), simcse_ref)


@pytest.mark.parametrize(
    "overrides",
    [
        {"variant": "pos_plus_noise", "noise_var": 0.0},
        {"variant": "neg_plus_noise", "noise_var": 0.0},
        {"variant": "pos_minus_noise", "k_samples": 1},
        {"variant": "neg_minus_noise", "k_samples": 1},
    ],
)
def test_noise_probes_without_noise_change_are_simcse(encoder, batch, simcse_ref, overrides):
    method = make("noise_probe", encoder.hidden_size, **overrides)
    assert_same(loss_and_grads(method, encoder, batch), simcse_ref)


def test_barlow_probe_with_zero_weight_is_simcse(encoder, batch, simcse_ref):
    method = make("barlow_probe", encoder.hidden_size, bt_weight=0.0)
    assert_same(loss_and_grads(method, encoder, batch), simcse_ref)


class RecordingEncode(TrainingEncode):
    """TrainingEncode that records the dropout rates seen INSIDE each encoder forward."""

    def __init__(self, encoder) -> None:
        super().__init__(encoder)
        self.rates: list[list[float]] = []
        self.outputs: list[torch.Tensor] = []
        encoder.model.register_forward_pre_hook(lambda mod, args: self.rates.append(dropout_rates(mod)))

    def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
        out = super().__call__(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)
        self.outputs.append(out)
        return out


def test_simcsepp_off_dropout_pass_runs_without_dropout_and_with_gradient(batch):
    encoder = load_encoder("random:tiny", seed=1)
    encoder.train()
    before = dropout_rates(encoder)
    assert any(r > 0 for r in before)
    encode = RecordingEncode(encoder)
    method = make("simcsepp", encoder.hidden_size)
    out = method.compute_loss(encode, batch, step=0)
    assert len(encode.rates) == 2
    assert encode.rates[0] == dropout_rates(encoder.model) and any(r > 0 for r in encode.rates[0])
    assert all(r == 0.0 for r in encode.rates[1])
    assert dropout_rates(encoder) == before  # switched back on for the next step
    assert encoder.training
    (g0,) = torch.autograd.grad(out.loss, encode.outputs[1], retain_graph=True)
    assert g0.abs().sum() > 0  # the dropout-off negatives carry gradient
    assert set(out.metrics) == {"loss_infonce", "loss_dcl"}


def test_simcsepp_dcl_only_makes_no_dropout_off_pass(batch):
    encoder = load_encoder("random:tiny", seed=1)
    encoder.train()
    encode = RecordingEncode(encoder)
    method = make("simcsepp", encoder.hidden_size, infonce=False)
    out = method.compute_loss(encode, batch, step=0)
    assert len(encode.rates) == 1
    assert set(out.metrics) == {"loss_dcl"}
    assert out.loss.item() == pytest.approx(0.1 * float(out.metrics["loss_dcl"]), rel=1e-5)


def test_whitenedcse_paper_reading_whitens_each_view_with_its_own_permutation():
    method = make("whitenedcse", 8, num_groups=2, group_scaling="count", num_positives=3, reading="paper")
    views = torch.randn(16, 3, 8, dtype=torch.float64)
    torch.manual_seed(5)
    out, _ = method.whiten(views, step=0)
    torch.manual_seed(5)
    perm = random_permutations(3, 8)
    for k in range(3):
        expected, _ = group_whiten(views[:, k], 2, 1e-5, perm=perm[k])
        torch.testing.assert_close(out[:, k], expected)


def test_whitenedcse_released_reading_whitens_sentence_major_row_blocks():
    method = make("whitenedcse", 8, num_groups=2, group_scaling="count", num_positives=3, reading="released")
    views = torch.randn(16, 3, 8, dtype=torch.float64)
    torch.manual_seed(5)
    out, _ = method.whiten(views, step=0)
    torch.manual_seed(5)
    perm = random_permutations(3, 8)
    flat = views.reshape(48, 8)
    expected = torch.cat(
        [group_whiten(flat[k * 16 : (k + 1) * 16], 2, 1e-5, perm=perm[k])[0] for k in range(3)]
    )
    torch.testing.assert_close(out.reshape(48, 8), expected)


def test_group_is_sgw_without_shuffle(encoder, batch):
    a = make("whitenedcse", encoder.hidden_size, whitening="group", num_groups=16, group_scaling="count")
    b = make(
        "whitenedcse",
        encoder.hidden_size,
        whitening="sgw",
        shuffle=False,
        num_groups=16,
        group_scaling="count",
    )
    assert_same(loss_and_grads(a, encoder, batch), loss_and_grads(b, encoder, batch))
    c = make("whitenedcse", encoder.hidden_size, whitening="sgw", num_groups=16, group_scaling="count")
    assert not torch.allclose(
        loss_and_grads(c, encoder, batch)[0].loss, loss_and_grads(a, encoder, batch)[0].loss
    )


def test_sgw_positive_source_with_m2_is_the_dropout_source(encoder, batch):
    a = make("whitenedcse", encoder.hidden_size, num_groups=16, num_positives=2, positive_source="sgw")
    b = make("whitenedcse", encoder.hidden_size, num_groups=16, num_positives=2)
    assert_same(loss_and_grads(a, encoder, batch), loss_and_grads(b, encoder, batch))


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"reading": "released"},
        {"positive_source": "sgw"},
        {"loss": "l2"},
        {"positive_weights": "0.8,1.0"},
        {"whitening_grad": "full", "num_groups": 32},
        {"whitening": "zca"},
        {"whitening": "pca"},
        {"num_positives": 5, "whitening": "none"},
    ],
)
def test_whitenedcse_variants_train(encoder, batch, overrides):
    overrides = {"num_groups": 16, **overrides}
    method = make("whitenedcse", encoder.hidden_size, **overrides)
    out, grads = loss_and_grads(method, encoder, batch)
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(g).all() for g in grads)
    m = method.params.num_positives
    assert {f"loss_pos{k}" for k in range(2, m + 1)} <= set(out.metrics)
    if method.params.whitening != "none":
        assert float(out.metrics["whiten_min_eig"]) > 0
    assert float(out.metrics[f"loss_{method.params.loss}"]) == pytest.approx(out.loss.item(), rel=1e-6)


def test_barlow_probe_logs_correlation_rank(encoder, batch):
    b = len(SENTS)
    out, _ = loss_and_grads(make("barlow_probe", encoder.hidden_size), encoder, batch)
    assert 0 < float(out.metrics["corr_rank"]) <= b
    padded, _ = loss_and_grads(make("barlow_probe", encoder.hidden_size, padding_rows=100), encoder, batch)
    assert float(padded.metrics["corr_rank"]) > b
    assert {"loss_infonce", "loss_bt"} <= set(padded.metrics)
    assert padded.loss.item() == pytest.approx(
        float(padded.metrics["loss_infonce"]) + float(padded.metrics["loss_bt"]), rel=1e-5
    )


@pytest.mark.parametrize(
    "variant", ["pos_plus_noise", "neg_plus_noise", "pos_minus_noise", "neg_minus_noise"]
)
def test_noise_probes_change_the_loss(encoder, batch, simcse_ref, variant):
    method = make("noise_probe", encoder.hidden_size, variant=variant, k_samples=3)
    out, _ = loss_and_grads(method, encoder, batch)
    assert torch.isfinite(out.loss)
    assert not torch.allclose(out.loss, simcse_ref[0].loss)


class FakeEncode:
    """An EncodeFn without an encoder: random features for each row (cheap tests of the wiring)."""

    def __init__(self, hidden_size: int, seed: int = 0) -> None:
        self.hidden_size = hidden_size
        self.gen = torch.Generator().manual_seed(seed)
        self.calls: list[tuple[int, bool]] = []

    def __call__(self, batch, *, dropout=True, encoder=None):
        n = batch["input_ids"].shape[0]
        self.calls.append((n, dropout))
        return torch.randn(n, self.hidden_size, generator=self.gen).requires_grad_(True)


def fake_batch(b: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.zeros(b, 3, dtype=torch.long),
        "attention_mask": torch.ones(b, 3, dtype=torch.long),
    }


def test_singular_whitening_raises_training_error_naming_step_and_group():
    # 4 sentences, 2 groups of 16 channels: singular without the ridge
    method = make("whitenedcse", 32, num_groups=2, eps=0.0)
    with pytest.raises(TrainingError, match=r"step 3: .*block 0, group 0"):
        method.compute_loss(FakeEncode(32), fake_batch(4), step=3)
    ridged = make("whitenedcse", 32, num_groups=2)
    assert torch.isfinite(ridged.compute_loss(FakeEncode(32), fake_batch(4), step=3).loss)


def test_encoder_rows_per_method():
    cases = {
        ("simcse", ()): [(16, True)],
        ("whitenedcse", (("num_groups", 8),)): [(24, True)],
        ("whitenedcse", (("num_groups", 8), ("positive_source", "sgw"), ("num_positives", 4))): [(16, True)],
        ("simcsepp", ()): [(16, True), (8, False)],
        ("simcsepp", (("off_dropout", False),)): [(16, True)],
        ("noise_probe", (("variant", "neg_minus_noise"), ("k_samples", 3))): [(48, True)],
        ("barlow_probe", (("padding_rows", 5),)): [(16, True)],
    }
    for (name, overrides), expected in cases.items():
        encode = FakeEncode(32)
        out = make(name, 32, **dict(overrides)).compute_loss(encode, fake_batch(8), step=0)
        assert encode.calls == expected, name
        assert torch.isfinite(out.loss)


def test_barlow_probe_samples_rank_every_k_steps(encoder, batch):
    method = make("barlow_probe", encoder.hidden_size, rank_every=5)
    encode = TrainingEncode(encoder)
    with torch.no_grad():
        sampled = [s for s in range(1, 12) if "corr_rank" in method.compute_loss(encode, batch, s).metrics]
    assert sampled == [1, 5, 10]
    never = make("barlow_probe", encoder.hidden_size, rank_every=0)
    with torch.no_grad():
        assert "corr_rank" not in never.compute_loss(encode, batch, 1).metrics


class RowCountingEncode(TrainingEncode):
    """TrainingEncode that counts the rows each encoder call computes, with and without gradient."""

    def __init__(self, encoder) -> None:
        super().__init__(encoder)
        self.rows = 0
        self.no_grad_rows = 0

    def _call(self, batch, dropout, encoder, embeddings, tokens):
        out = super()._call(batch, dropout, encoder, embeddings, tokens)
        if out.requires_grad:
            self.rows += int(batch["input_ids"].shape[0])
        else:
            self.no_grad_rows += int(batch["input_ids"].shape[0])
        return out


ROW_CASES: list[tuple[str, dict[str, Any]]] = [
    ("simcse", {}),
    ("whitenedcse", {"num_groups": 16}),
    ("whitenedcse", {"num_groups": 16, "num_positives": 4}),
    ("whitenedcse", {"num_groups": 16, "positive_source": "sgw"}),
    ("simcsepp", {}),
    ("simcsepp", {"off_dropout": False, "m": 1.0}),
    ("noise_probe", {"variant": "pos_minus_noise", "k_samples": 3}),
    ("noise_probe", {"variant": "neg_minus_noise", "k_samples": 2, "k_independent": True}),
    ("noise_probe", {"variant": "neg_plus_noise"}),
    ("barlow_probe", {"padding_rows": 8}),
]
SMOKE_CASES = [(name, dict(p)) for name, cls in REGISTRY.items() for p in cls.smoke_params]


@pytest.mark.parametrize(("name", "overrides"), ROW_CASES + SMOKE_CASES)
def test_the_footprint_counts_what_a_step_encodes(encoder, batch, name, overrides):
    """The grid's cost and memory estimates count the measured footprint's rows with and without
    gradient per sentence (on a one-layer stand-in, four sentences): a real step of the tiny encoder
    on another batch encodes the same per sentence."""
    method = make(name, encoder.hidden_size, **overrides)
    method.bind(encoder)
    counting = RowCountingEncode(encoder)
    method.compute_loss(counting, batch, step=1)
    b = batch["input_ids"].shape[0]
    measured = footprint(name, method.params, encoder.hidden_size)
    assert counting.rows == measured.rows * b
    assert counting.no_grad_rows == measured.no_grad_rows * b


@pytest.mark.parametrize(("name", "overrides"), SMOKE_CASES)
def test_the_footprint_counts_the_copies_bind_holds(encoder, name, overrides):
    """The memory estimate adds the footprint's whole encoder copies: after ``bind`` on the tiny
    encoder, the method's new trainable and frozen weights are within one copy below the count (a
    share of a copy, such as key layers sharing the embedding layer, counts as one) and not above it
    by more than small heads built in ``bind``."""
    method = make(name, encoder.hidden_size, **overrides)
    own = sum(p.numel() for p in method.trainable_parameters())
    method.bind(encoder)
    whole = sum(p.numel() for p in encoder.parameters())
    trained = (sum(p.numel() for p in method.trainable_parameters()) - own) / whole
    frozen = (sum(p.numel() for p in method.parameters()) - own) / whole - trained
    measured = footprint(name, method.params, encoder.hidden_size)
    assert measured.trained_copies - 1 < trained <= measured.trained_copies + 0.25, (trained, measured)
    assert measured.frozen_copies - 1 < frozen <= measured.frozen_copies + 0.25, (frozen, measured)


@pytest.mark.parametrize(("name", "overrides"), ROW_CASES + SMOKE_CASES)
def test_the_footprint_counts_the_parameters_the_method_builds(encoder, name, overrides):
    """The memory estimate adds the method's own trainable parameters (heads, projectors, and those
    ``bind`` builds): the footprint's count, taken on the stand-in encoder, equals those of the real
    method bound to the tiny encoder, less its whole trained encoder copies (counted apart)."""
    method = make(name, encoder.hidden_size, **overrides)
    method.bind(encoder)
    own = sum(p.numel() for p in method.trainable_parameters())
    whole = sum(p.numel() for p in encoder.parameters())
    measured = footprint(name, method.params, encoder.hidden_size)
    assert measured.own_parameters == own - measured.trained_copies * whole


def test_the_footprint_of_the_known_methods() -> None:
    """Values read off the methods' definitions: SimCSE's two views, WhitenedCSE's m positives, the
    noise probe's 2K samples, CT's trained second model, DCLR's frozen complementary model (two
    views without gradient) and MoCoSE's queries and keys with gradient (as released: the keys are not
    detached) and its frozen key encoder; MoCo's keys without gradient under key_gradient = "none"."""
    d = 32
    expect = {
        ("simcse", ()): (2.0, 0.0, 0, 0),
        ("whitenedcse", (("num_groups", 8), ("num_positives", 4))): (4.0, 0.0, 0, 0),
        ("noise_probe", (("variant", "neg_minus_noise"), ("k_samples", 3))): (6.0, 0.0, 0, 0),
        ("ct", ()): (2.0, 0.0, 1, 0),
        ("dclr", ()): (2.0, 2.0, 0, 1),
        ("mocose", ()): (2.0, 0.0, 0, 1),
        ("mocose", (("key_gradient", "none"),)): (1.0, 1.0, 0, 1),
    }
    for (name, overrides), (rows, no_grad, trained, frozen) in expect.items():
        measured = footprint(name, build_params(name, dict(overrides)), d)
        got = (measured.rows, measured.no_grad_rows, measured.trained_copies, measured.frozen_copies)
        assert got == (rows, no_grad, trained, frozen), name
    assert footprint("simcse", build_params("simcse", {"mlp": False}), d).own_parameters == 0
    assert footprint("simcse", build_params("simcse", {}), d).own_parameters == d * d + d  # the MLP head
