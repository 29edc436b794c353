"""WhitenedCSE on the tiny random encoder: the reduction to SimCSE (loss AND gradients), the view
layouts of the paper and released readings, group counts per width, its parameters."""

from __future__ import annotations

import pytest
import torch

from harness.errors import ConfigError, TrainingError
from methods import build_params, whitening
from methods.losses import multi_positive_l1, multi_positive_l2
from methods.whitenedcse import WhitenedCSEParams
from methods.whitening import group_whiten, random_permutations
from tests.helpers import FakeEncode, assert_same, checked_params, fake_batch, loss_and_grads, make_method


def test_whitenedcse_l2_form_switch_reaches_the_loss() -> None:
    params = build_params("whitenedcse", {"loss": "l2", "l2_form": "printed"})
    assert params == WhitenedCSEParams(loss="l2", l2_form="printed")
    assert build_params("whitenedcse") == WhitenedCSEParams(l2_form="softmax")


@pytest.mark.parametrize("hidden", [64, 384, 768, 1024])
def test_default_groups_suit_every_shipped_width(hidden: int) -> None:
    # The default keeps the paper's 2 channels per group (384 groups at d = 768) at any width.
    params = checked_params("whitenedcse", hidden=hidden)
    assert params.effective_groups(hidden) == hidden // 2
    assert params.describe(hidden) == {"groups": f"{hidden // 2} groups of 2 channels at d={hidden}"}


def test_group_scaling_count_keeps_the_number_and_splits_unevenly() -> None:
    # The paper's BERT-large setting: 384 groups on 1024 channels.
    params = checked_params("whitenedcse", hidden=1024, group_scaling="count")
    assert params.effective_groups(1024) == 384
    assert params.describe(1024) == {"groups": "256 groups of 3 and 128 of 2 channels at d=1024"}


def test_more_groups_than_channels_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"num_groups=384 gives 384 groups, more than .* d=64"):
        checked_params("whitenedcse", group_scaling="count")
    with pytest.raises(ConfigError, match=r"num_groups=5000 gives 2500 groups, more than .* d=384"):
        WhitenedCSEParams(num_groups=5000).validate(384)
    checked_params("whitenedcse", whitening="zca", num_groups=5000)  # num_groups is read only by sgw / group


def test_num_positives_at_least_two():
    with pytest.raises(ConfigError, match="num_positives must be >= 2"):
        checked_params("whitenedcse", num_groups=16, num_positives=1)


def test_positive_weights_length_and_values():
    assert checked_params("whitenedcse", num_groups=16, positive_weights="0.8, 1.0").positive_weights == (
        0.8,
        1.0,
    )
    with pytest.raises(ConfigError, match="positive_weights needs num_positives - 1 = 2"):
        checked_params("whitenedcse", num_groups=16, positive_weights="1.0")
    with pytest.raises(ConfigError, match="positive_weights must be"):
        checked_params("whitenedcse", num_groups=16, positive_weights="0,0")


def test_sgw_positive_source_needs_shuffled_paper_reading():
    with pytest.raises(ConfigError, match="positive_source='sgw'"):
        checked_params("whitenedcse", num_groups=16, positive_source="sgw", reading="released")
    with pytest.raises(ConfigError, match="positive_source='sgw'"):
        checked_params("whitenedcse", num_groups=16, positive_source="sgw", whitening="group")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"eps": -1.0}, "eps"),
        ({"momentum": 1.0}, "momentum"),
        ({"whitening": "batch"}, "whitening"),
        ({"reading": "code"}, "reading"),
        ({"loss": "l3"}, "loss"),
    ],
)
def test_whitenedcse_bad_values_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        checked_params("whitenedcse", num_groups=16, **overrides)


@pytest.mark.parametrize("reading", ["paper", "released"])
def test_whitenedcse_without_whitening_and_m2_is_simcse(encoder, sents_batch, simcse_ref, reading):
    method = make_method(
        "whitenedcse", encoder.hidden_size, whitening="none", num_positives=2, reading=reading
    )
    assert_same(loss_and_grads(method, encoder, sents_batch), simcse_ref)


def whitened_views(reading: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three views of 16 rows whitened under ``reading``: the views, the whitened views, the permutations."""
    method = make_method(
        "whitenedcse", 8, num_groups=2, group_scaling="count", num_positives=3, reading=reading
    )
    views = torch.randn(16, 3, 8, dtype=torch.float64)
    torch.manual_seed(5)
    out, _ = method.whiten(views, step=0)
    torch.manual_seed(5)
    return views, out, random_permutations(3, 8)


def test_whitenedcse_paper_reading_whitens_each_view_with_its_own_permutation():
    views, out, perm = whitened_views("paper")
    for k in range(3):
        expected, _ = group_whiten(views[:, k], 2, 1e-5, perm=perm[k])
        torch.testing.assert_close(out[:, k], expected)


def test_whitenedcse_released_reading_whitens_sentence_major_row_blocks():
    views, out, perm = whitened_views("released")
    flat = views.reshape(48, 8)
    expected = torch.cat(
        [group_whiten(flat[k * 16 : (k + 1) * 16], 2, 1e-5, perm=perm[k])[0] for k in range(3)]
    )
    torch.testing.assert_close(out.reshape(48, 8), expected)


def test_group_is_sgw_without_shuffle(encoder, sents_batch):
    a = make_method(
        "whitenedcse", encoder.hidden_size, whitening="group", num_groups=16, group_scaling="count"
    )
    b = make_method(
        "whitenedcse",
        encoder.hidden_size,
        whitening="sgw",
        shuffle=False,
        num_groups=16,
        group_scaling="count",
    )
    assert_same(loss_and_grads(a, encoder, sents_batch), loss_and_grads(b, encoder, sents_batch))
    c = make_method("whitenedcse", encoder.hidden_size, whitening="sgw", num_groups=16, group_scaling="count")
    assert not torch.allclose(
        loss_and_grads(c, encoder, sents_batch)[0].loss, loss_and_grads(a, encoder, sents_batch)[0].loss
    )


def test_sgw_positive_source_with_m2_is_the_dropout_source(encoder, sents_batch):
    a = make_method("whitenedcse", encoder.hidden_size, num_groups=16, num_positives=2, positive_source="sgw")
    b = make_method("whitenedcse", encoder.hidden_size, num_groups=16, num_positives=2)
    assert_same(loss_and_grads(a, encoder, sents_batch), loss_and_grads(b, encoder, sents_batch))


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
def test_whitenedcse_variants_train(encoder, sents_batch, overrides):
    overrides = {"num_groups": 16, **overrides}
    method = make_method("whitenedcse", encoder.hidden_size, **overrides)
    out, grads = loss_and_grads(method, encoder, sents_batch)
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(g).all() for g in grads)
    m = method.params.num_positives
    assert {f"loss_pos{k}" for k in range(2, m + 1)} <= set(out.metrics)
    if method.params.whitening != "none":
        assert float(out.metrics["whiten_min_eig"]) > 0
    assert float(out.metrics[f"loss_{method.params.loss}"]) == pytest.approx(out.loss.item(), rel=1e-6)


def test_singular_whitening_raises_training_error_naming_step_and_group():
    # 4 sentences, 2 groups of 16 channels: singular without the ridge
    method = make_method("whitenedcse", 32, num_groups=2, eps=0.0)
    with pytest.raises(TrainingError, match=r"step 3: .*block 0, group 0"):
        method.compute_loss(FakeEncode(32), fake_batch(4), step=3)
    ridged = make_method("whitenedcse", 32, num_groups=2)
    assert torch.isfinite(ridged.compute_loss(FakeEncode(32), fake_batch(4), step=3).loss)


def test_the_groups_weights_and_loss_are_made_once_when_the_method_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    method = make_method(
        "whitenedcse", 32, num_groups=6, group_scaling="count", loss="l2", positive_weights="0.7,0.3"
    )
    assert method.split.sizes == (6, 6, 5, 5, 5, 5)  # validate() checked 6 <= 32 once, with the width
    assert method.positive_weight.dtype == torch.float64 and method.positive_weight.tolist() == [0.7, 0.3]
    assert "positive_weight" not in method.state_dict()  # a parameter, not state: checkpoints unchanged
    assert method.multi_positive_loss.func is multi_positive_l2
    assert method.multi_positive_loss.keywords == {"form": "softmax"}

    def no_split(*args: object) -> None:
        raise AssertionError("a step split the channels again")

    monkeypatch.setattr(whitening, "group_sizes", no_split)
    assert torch.isfinite(method.compute_loss(FakeEncode(32), fake_batch(4), step=1).loss)
    plain = make_method("whitenedcse", 32, whitening="zca")
    assert plain.split is None and plain.positive_weight.tolist() == [1.0, 1.0]
    assert plain.multi_positive_loss is multi_positive_l1
