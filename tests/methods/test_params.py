"""Typed parameters (methods.params): coerced from strings, misspelt keys and bad values named for
every method, checked once when a run is resolved; every paper-vs-released switch's default, pinned."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from harness.config.settings import resolve_settings
from harness.errors import ConfigError
from harness.store.run_config import resolve_run
from methods import REGISTRY, build_params, get_method
from methods.simcse import SimCSEParams
from methods.whitenedcse import WhitenedCSEParams
from tests.helpers import checked_params


def test_overrides_are_coerced_from_strings():
    p = build_params("simcse", {"temperature": "0.1", "mlp": "false"})
    assert p == SimCSEParams(temperature=0.1, mlp=False)


def test_misspelt_key_names_key_and_suggests():
    with pytest.raises(ConfigError, match=r"unknown parameter 'temprature'.*did you mean 'temperature'"):
        build_params("simcse", {"temprature": 0.1})


def test_bad_value_type_names_field():
    with pytest.raises(ConfigError, match="temperature: 'hot' is not a valid float"):
        build_params("simcse", {"temperature": "hot"})


def test_validation_names_field():
    with pytest.raises(
        ConfigError, match=r"^temperature must be from 0\.001 to 1000 \(a softmax temperature\), got 0.0$"
    ):
        SimCSEParams(temperature=0.0).validate(8)


def test_the_temperature_range_holds_its_ends_and_the_dcl_temperature_is_one() -> None:
    for tau in (0.001, 1000.0):
        checked_params("simcse", temperature=tau)
        checked_params("simcsepp", tau_dcl=tau)
    with pytest.raises(ConfigError, match=r"^tau_dcl must be from 0\.001 to 1000 .*got 1e-320$"):
        checked_params("simcsepp", tau_dcl=1e-320)


def test_bad_choice_and_non_finite_values_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"reading: 'papr' is not one of 'paper', 'released'.*'paper'"):
        WhitenedCSEParams(reading="papr")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="temperature must be finite"):
        checked_params("simcse", temperature="inf")
    with pytest.raises(ConfigError, match="m must be finite"):
        checked_params("simcsepp", m=float("nan"))


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("tau", [0.0, -0.05, 1e-320, 0.00099, 1001.0])
def test_temperature_lies_in_its_stated_range_named(name, tau):
    # 1e-320 is > 0 but overflows 1/tau: the run would stop at a NaN loss without naming it
    with pytest.raises(ConfigError, match=rf"^temperature must be from 0\.001 to 1000 .*got {tau}$"):
        checked_params(name, num_groups=16, temperature=tau) if name == "whitenedcse" else checked_params(
            name, temperature=tau
        )


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


def test_a_record_built_elsewhere_is_checked_once_when_it_is_resolved(record_counts: Counter[Any]) -> None:
    params = WhitenedCSEParams(num_groups=16)
    settings = resolve_settings("smoke", require_corpus=False)  # random:tiny, d = 64
    config = resolve_run("whitenedcse", params, settings)
    assert record_counts["validate", "WhitenedCSEParams", 64] == 1
    get_method("whitenedcse")(config.params, 64)
    get_method("whitenedcse")(config.params, 64)
    assert record_counts["validate", "WhitenedCSEParams", 64] == 1  # the method trusts the resolved record
    assert params == WhitenedCSEParams(num_groups=16) and "_validated_for" not in params.__dict__


# -- every paper-vs-released switch's default, pinned --------------------------------------------------
# Every paper-vs-released switch's default, pinned: a default that reproduces a released code's
# behaviour cannot change without this test failing (docs/baselines.md, "Fidelity", cites the lines).
#
# Each registered method's every switch is listed in exactly one of the two tables, so a new switch has
# to be placed (a released behaviour, or another reading chosen as the default for a stated reason).

RELEASED: dict[tuple[str, str], object] = {
    ("consert", "loss_weight"): "released",  # --cl_rate 0.15 times loss_a + loss_b
    ("dclr", "complementary_feature"): "pooler",  # cl_forward_denoised: encoder.pooler, no MLP when is_fix
    ("dclr", "loss_form"): "released",  # cl_vat_forward: BCE on softmax(cos_sim * weights)
    ("isbert", "cnn_activation"): "none",  # CNN.py: no activation
    ("mocose", "key_dropout"): "on",  # Trainer.training_step's model.train() reaches the EMA copies
    (
        "mocose",
        "key_gradient",
    ): "full",  # keys not detached; the notebook freezes target encoder and pooler only
    ("mocose", "queue_init"): "random",  # register_buffer("queue", torch.randn(out_size, K))
    ("mocose", "queue_order"): "released",  # dequeue_and_enqueue: cat((keys.T, queue))[:, 0:K]
    ("simcsepp", "dcl_reduction"): "mean",  # a reconstruction: the README's script has DCL commented out
    ("simcsepp", "m_placement"): "released",
    ("whitenedcse", "positive_source"): "dropout",  # a reconstruction: models.py does not parse as released
    ("whitenedcse", "whitening_grad"): "stop",
}
"""Switches whose default is the released code's behaviour (WhitenedCSE's and SimCSE++'s are
reconstructions of snapshots that do not run as committed: docs/baselines.md)."""

OTHER: dict[tuple[str, str], object] = {
    ("arccse", "margin_form"): "paper",  # no official code was found; the paper's equation
    ("barlow_probe", "correlation"): "centred",  # a probe of SimCSE++ Table 2, no released code
    ("noise_probe", "k_independent"): False,  # a probe of SimCSE++ Table 1, no released code
    ("whitenedcse", "l2_form"): "softmax",
    ("whitenedcse", "reading"): "paper",
    ("whitenedcse", "running_stats"): "current",
}
"""Switches whose default is not a released behaviour (no released code, or the paper's reading)."""


def test_every_switch_is_placed_and_the_released_defaults_hold() -> None:
    found = {(name, key) for name, cls in REGISTRY.items() for key in cls.params_cls.switches()}
    assert found == set(RELEASED) | set(OTHER), "place every switch in RELEASED or OTHER"
    assert not set(RELEASED) & set(OTHER)
    for (name, key), value in {**RELEASED, **OTHER}.items():
        assert getattr(REGISTRY[name].params_cls(), key) == value, (name, key)


def test_a_params_coercion_error_names_the_flag_and_the_models_a_method_loads_are_listed() -> None:
    with pytest.raises(ConfigError, match=r"^--set temperature must be finite, got 'nan'$"):
        SimCSEParams.from_overrides({"temperature": "nan"}, "simcse", where="--set")
    with pytest.raises(ConfigError, match=r"^temperature must be finite, got 'nan'$"):
        SimCSEParams.from_overrides({"temperature": "nan"}, "simcse")  # a spec's value: its field
    assert SimCSEParams().models() == ()
    dclr = get_method("dclr").params_cls
    assert dclr().models() == ()  # complementary = initial: a copy of the run's own encoder
    assert dclr.from_overrides({"complementary": "some/model"}).models() == ("some/model",)
