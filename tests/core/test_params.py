"""Method parameter records: coercion, misspelt keys, validation messages, the registry lookup."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from methods import build_params, get_method
from methods.simcse import SimCSEParams


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
    with pytest.raises(ConfigError, match="temperature must be finite and > 0"):
        SimCSEParams(temperature=0.0).validate(8)


def test_unknown_method_suggests():
    with pytest.raises(ConfigError, match=r"unknown method 'simcs'.*did you mean 'simcse'"):
        get_method("simcs")
