"""User-facing errors: one family the command line turns into one line, and one spelling hint."""

from __future__ import annotations

import pytest

from harness.errors import (
    ConfigError,
    DataError,
    GridLockedError,
    HarnessError,
    ModelLoadError,
    TrainingError,
    did_you_mean,
)


def test_the_hint_names_the_closest_choice_or_nothing() -> None:
    assert did_you_mean("simcs", ["simcse", "simcsepp", "whitenedcse"]) == " (did you mean 'simcse'?)"
    assert did_you_mean("temprature", ("temperature", "mlp")) == " (did you mean 'temperature'?)"
    assert did_you_mean("xyz", ["simcse", "whitenedcse"]) == ""
    assert did_you_mean("anything", []) == ""


def test_the_hint_compares_names_as_text() -> None:
    assert did_you_mean(384, [128, 385, 768]) == " (did you mean '385'?)"
    assert did_you_mean("STS17", ["STS12", "STSBenchmark"]) == " (did you mean 'STS12'?)"


@pytest.mark.parametrize("cls", [ConfigError, DataError, ModelLoadError, TrainingError, GridLockedError])
def test_every_user_error_is_a_harness_error(cls: type[Exception]) -> None:
    assert issubclass(cls, HarnessError) and not issubclass(HarnessError, cls)
    with pytest.raises(HarnessError, match="the message"):
        raise cls("the message")


def test_a_config_error_is_also_a_value_error() -> None:
    """Callers that validate with ``except ValueError`` catch a bad configuration value too."""
    with pytest.raises(ValueError, match="bad value"):
        raise ConfigError("bad value")
    assert not issubclass(DataError, ValueError)
