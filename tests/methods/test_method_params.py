"""Parameter records: validation errors name the field; overrides are coerced; misspelt keys fail."""

from __future__ import annotations

import pytest

from harness.config.run_config import resolve_run
from harness.config.settings import resolve_settings
from harness.errors import ConfigError
from methods import REGISTRY, build_params
from methods.whitenedcse import WhitenedCSEParams


def build(name: str, hidden: int = 64, **overrides):
    params = build_params(name, overrides)
    params.validate(hidden)
    return params


@pytest.mark.parametrize("hidden", [64, 384, 768, 1024])
def test_default_groups_suit_every_shipped_width(hidden: int) -> None:
    # The default keeps the paper's 2 channels per group (384 groups at d = 768) at any width.
    params = build("whitenedcse", hidden=hidden)
    assert params.effective_groups(hidden) == hidden // 2
    assert params.describe(hidden) == {"groups": f"{hidden // 2} groups of 2 channels at d={hidden}"}


def test_group_scaling_count_keeps_the_number_and_splits_unevenly() -> None:
    # The paper's BERT-large setting: 384 groups on 1024 channels.
    params = build("whitenedcse", hidden=1024, group_scaling="count")
    assert params.effective_groups(1024) == 384
    assert params.describe(1024) == {"groups": "256 groups of 3 and 128 of 2 channels at d=1024"}


def test_more_groups_than_channels_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"num_groups=384 gives 384 groups, more than .* d=64"):
        build("whitenedcse", group_scaling="count")
    with pytest.raises(ConfigError, match=r"num_groups=5000 gives 2500 groups, more than .* d=384"):
        WhitenedCSEParams(num_groups=5000).validate(384)
    build("whitenedcse", whitening="zca", num_groups=5000)  # num_groups is read only by sgw / group


def test_bad_choice_and_non_finite_values_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"reading: 'papr' is not one of 'paper', 'released'.*'paper'"):
        WhitenedCSEParams(reading="papr")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="temperature must be finite"):
        build("simcse", temperature="inf")
    with pytest.raises(ConfigError, match="m must be finite"):
        build("simcsepp", m=float("nan"))
    with pytest.raises(ConfigError, match="temperature must be finite and > 0"):
        build("simcse", temperature=0)


def test_num_positives_at_least_two():
    with pytest.raises(ConfigError, match="num_positives must be >= 2"):
        build("whitenedcse", num_groups=16, num_positives=1)


def test_positive_weights_length_and_values():
    assert build("whitenedcse", num_groups=16, positive_weights="0.8, 1.0").positive_weights == (0.8, 1.0)
    with pytest.raises(ConfigError, match="positive_weights needs num_positives - 1 = 2"):
        build("whitenedcse", num_groups=16, positive_weights="1.0")
    with pytest.raises(ConfigError, match="positive_weights must be"):
        build("whitenedcse", num_groups=16, positive_weights="0,0")


def test_sgw_positive_source_needs_shuffled_paper_reading():
    with pytest.raises(ConfigError, match="positive_source='sgw'"):
        build("whitenedcse", num_groups=16, positive_source="sgw", reading="released")
    with pytest.raises(ConfigError, match="positive_source='sgw'"):
        build("whitenedcse", num_groups=16, positive_source="sgw", whitening="group")


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
        build("whitenedcse", num_groups=16, **overrides)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"m": 0.0}, "m must be finite and > 0"),
        ({"tau_dcl": 0.0}, "tau_dcl"),
        ({"lambda_dcl": -0.1}, "lambda_dcl"),
        ({"infonce": False, "lambda_dcl": 0.0}, "lambda_dcl"),
        ({"m_placement": "both"}, "m_placement"),
        ({"dcl_reduction": "max"}, "dcl_reduction"),
    ],
)
def test_simcsepp_bad_values_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        build("simcsepp", **overrides)


@pytest.mark.parametrize(
    ("name", "overrides", "field"),
    [
        ("noise_probe", {"noise_var": -0.1}, "noise_var"),
        ("noise_probe", {"k_samples": 0}, "k_samples"),
        ("noise_probe", {"variant": "pos_noise"}, "variant"),
        ("barlow_probe", {"padding_rows": -1}, "padding_rows"),
        ("barlow_probe", {"bt_weight": -1.0}, "bt_weight"),
        ("barlow_probe", {"offdiag_weight": -1.0}, "offdiag_weight"),
    ],
)
def test_probe_bad_values_name_the_field(name, overrides, field):
    with pytest.raises(ConfigError, match=field):
        build(name, **overrides)


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("tau", [0.0, -0.05])
def test_temperature_must_be_positive(name, tau):
    with pytest.raises(ConfigError, match="temperature must be finite and > 0"):
        build(name, num_groups=16, temperature=tau) if name == "whitenedcse" else build(name, temperature=tau)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_unknown_key_is_rejected_with_a_suggestion(name):
    with pytest.raises(
        ConfigError, match=rf"unknown parameter 'temprature' for method '{name}'.*'temperature'"
    ):
        build_params(name, {"temprature": 0.1})


def test_validation_runs_when_the_run_is_resolved():
    settings = resolve_settings("smoke", require_corpus=False)  # random:tiny, d = 64
    with pytest.raises(ConfigError, match="num_positives"):
        resolve_run("whitenedcse", WhitenedCSEParams(num_groups=16, num_positives=1), settings)
    with pytest.raises(ConfigError, match=r"more than .* d=64"):
        resolve_run("whitenedcse", {"num_groups": 5000, "group_scaling": "count"}, settings)
