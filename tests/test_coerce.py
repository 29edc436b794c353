"""Coercion of typed values (``--set``, settings, TOML values): the declared type, or one error naming
the field; never a number that is not finite."""

from __future__ import annotations

import math
from typing import Literal

import pytest

from harness.coerce import check_finite, coerce_value
from harness.errors import ConfigError


@pytest.mark.parametrize(
    "value", [math.inf, -math.inf, math.nan, "inf", "-Infinity", "NaN", " nan ", "1e999"]
)
def test_non_finite_numbers_and_their_text_are_refused_naming_the_field(value: object) -> None:
    with pytest.raises(ConfigError, match=r"^--set lr must be finite, got "):
        check_finite("--set lr", value)


@pytest.mark.parametrize("value", [0.0, -3.5, 7, "3e-5", "text", "", None, True, [1.0]])
def test_everything_else_passes_the_finite_check(value: object) -> None:
    check_finite("x", value)


def test_numbers_are_read_from_text_and_checked() -> None:
    assert coerce_value("lr", "3e-5", float) == 3e-5
    assert coerce_value("steps", " 12 ", int) == 12 and coerce_value("steps", 12.0, int) == 12
    assert isinstance(coerce_value("lr", 1, float), float)
    with pytest.raises(ConfigError, match=r"^temperature: 'hot' is not a valid float$"):
        coerce_value("temperature", "hot", float)
    with pytest.raises(ConfigError, match=r"^steps: 1\.5 is not a valid int$"):
        coerce_value("steps", 1.5, int)
    with pytest.raises(ConfigError, match="is not a valid int"):
        coerce_value("steps", True, int)  # a bool is not a count
    with pytest.raises(ConfigError, match="is not a valid float"):
        coerce_value("lr", False, float)
    with pytest.raises(ConfigError, match="lr must be finite, got 'inf'"):
        coerce_value("lr", "inf", float)
    assert coerce_value("lr", "-.5E+2", float) == -50.0 and coerce_value("seed", "+7", int) == 7


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("\u0664\u0662", int),
        ("\uff14", int),
        ("4_2", int),
        ("4 2", int),
        ("0x2a", int),
        ("\u0661.5", float),
        ("1_0.0", float),
    ],
)
def test_numbers_in_text_are_ascii_digits_only(text: str, kind: type) -> None:
    # int() and float() read Arabic-Indic and full-width digits and underscores: a setting does not
    with pytest.raises(ConfigError, match=rf"^seed: '{text}' is not a valid {kind.__name__}$"):
        coerce_value("seed", text, kind)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        (" Yes ", True),
        ("1", True),
        ("on", True),
        ("false", False),
        ("OFF", False),
        ("0", False),
    ],
)
def test_switches_read_the_usual_words(text: str, expected: bool) -> None:
    assert coerce_value("mlp", text, bool) is expected


def test_a_switch_refuses_other_words_and_keeps_a_bool() -> None:
    assert coerce_value("mlp", False, bool) is False
    with pytest.raises(ConfigError, match=r"^mlp: 'maybe' is not a valid bool$"):
        coerce_value("mlp", "maybe", bool)


def test_a_choice_is_one_of_its_literals_with_a_hint() -> None:
    kind = Literal["sgw", "group", "zca"]
    assert coerce_value("whitening", " zca ", kind) == "zca"
    with pytest.raises(
        ConfigError, match=r"^whitening: 'sgww' is not one of 'sgw', 'group', 'zca' \(did you mean 'sgw'\?\)$"
    ):
        coerce_value("whitening", "sgww", kind)
    with pytest.raises(ConfigError, match="is not one of"):
        coerce_value("whitening", "pca", kind)


def test_a_tuple_is_read_from_a_comma_list_or_a_sequence_item_by_item() -> None:
    assert coerce_value("weights", "0.8, 1.0", tuple[float, ...]) == (0.8, 1.0)
    assert coerce_value("weights", "(0.8,1.0)", tuple[float, ...]) == (0.8, 1.0)
    assert coerce_value("sizes", [1, "3"], tuple[int, ...]) == (1, 3)
    assert coerce_value("sizes", 5, tuple[int, ...]) == (5,)
    assert coerce_value("weights", "", tuple[float, ...]) == ()
    with pytest.raises(ConfigError, match=r"^weights: 'x' is not a valid float$"):
        coerce_value("weights", "1.0,x", tuple[float, ...])
    with pytest.raises(ConfigError, match="weights must be finite"):
        coerce_value("weights", "1.0, nan", tuple[float, ...])


def test_text_stays_text_and_other_types_pass_through() -> None:
    assert coerce_value("name", 384, str) == "384"
    marker = object()
    assert coerce_value("anything", marker, object) is marker


def test_finiteness_is_a_rule_of_numbers_and_the_message_names_the_source() -> None:
    assert coerce_value("--model", "nan", str) == "nan"  # a text field: what it names is checked where used
    with pytest.raises(ConfigError, match=r"^--set temperature must be finite, got 'inf'$"):
        coerce_value("--set temperature", "inf", float)
    with pytest.raises(ConfigError, match=r"^override max_steps: 'x' is not a valid int$"):
        coerce_value("override max_steps", "x", int)
