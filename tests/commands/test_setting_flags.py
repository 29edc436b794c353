"""The run-setting flags are generated from RunSettings: every setting is a flag, typed, with its
choices and its docstring as help; one KEY=VALUE parser serves --set and --override."""

from __future__ import annotations

import argparse
import typing

import pytest

from harness.cli import build_parser
from harness.commands.setting_flags import overrides_from_args, setting_help, settings_from_args
from harness.config.settings import OVERRIDABLE, RunSettings
from harness.errors import ConfigError


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {opt: action for action in parser._actions for opt in action.option_strings}


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_setting_has_its_docstring_entry_as_help() -> None:
    docs = setting_help()
    assert set(docs) == {f for f in RunSettings.__dataclass_fields__}
    assert docs["lr"] == "peak learning rate of AdamW (linear decay to 0)."
    assert "``" not in docs["precision"] and "harness.config.hardware.auto_precision" in docs["precision"]


@pytest.mark.parametrize(
    ("command", "left_out"),
    [("train", set()), ("grid", {"seed"}), ("check", {"seed"}), ("tables", {"seed"}), ("plots", {"seed"})],
)
def test_every_overridable_setting_is_a_flag(command: str, left_out: set[str]) -> None:
    flags = _flags(_subparser(command))
    docs = setting_help()
    hints = typing.get_type_hints(RunSettings)
    for name in OVERRIDABLE:
        flag = "--" + name.replace("_", "-")
        if name in left_out:
            assert flag not in flags
            continue
        action = flags[flag]
        assert action.dest == f"setting_{name}" and action.help == docs[name].replace("%", "%%")
        if typing.get_origin(hints[name]) is typing.Literal:
            assert set(typing.get_args(hints[name])) <= set(str(action.metavar).strip("{}").split(","))
    assert "--profile" in flags and ("--set" in flags) == (command == "train")


def test_flags_reach_the_settings_and_override_items_win() -> None:
    args = build_parser().parse_args(
        ["train", "--weight-decay", "0.01", "--max-steps", "epoch", "--eval-pooler", "avg", "--set", "m=0.5"]
    )
    assert settings_from_args(args) == {"weight_decay": "0.01", "max_steps": "epoch", "eval_pooler": "avg"}
    grid = build_parser().parse_args(
        ["grid", "all", "--lr", "1e-4", "--warmup-steps", "3", "--override", "lr=2e-4", "--override=seed=1"]
    )
    assert overrides_from_args(grid) == {"lr": "2e-4", "warmup_steps": "3", "seed": "1"}


@pytest.mark.parametrize("text", ["\u0664\u0662", "4_2", "1e15", "x"])
def test_a_seed_flag_is_text_the_settings_read_in_ascii_digits(text: str) -> None:
    # argparse's int() reads other scripts' digits and underscores: the settings alone read the value
    args = build_parser().parse_args(["train", "--seed", text])
    assert settings_from_args(args) == {"seed": text}
    with pytest.raises(ConfigError, match=rf"^seed: '{text}' is not a valid int$"):
        RunSettings(**{**_SETTINGS, "seed": settings_from_args(args)["seed"]})


_SETTINGS = {"model": "m", "corpus": "c", "corpus_id": "c:0", "profile": "cpu", "batch_size": 2}
_SETTINGS |= {"max_length": 8, "max_steps": 1, "eval_every": 1, "lr": 1e-4}
