"""The flag helpers every command shares: numbers in ASCII digits, one KEY=VALUE parser."""

from __future__ import annotations

import pytest

from harness.cli import build_parser
from harness.commands.flags import parse_key_values
from harness.errors import ConfigError


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["grid", "all", "--seeds", "\u0663"], "--seeds"),
        (["check", "all", "--seeds", "2_0"], "--seeds"),
        (["grid", "all", "--cpus-per-trial", "\u0662"], "--cpus-per-trial"),
        (["grid", "all", "--lost-node-wait", "\u0663"], "--lost-node-wait"),
        (["eval", "--output", "o.json", "--whiten-sentences", "\u0661\u0660"], "--whiten-sentences"),
    ],
)
def test_other_number_flags_are_ascii_digits(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(argv)
    assert stop.value.code == 2
    assert f"argument {flag}: expected a " in capsys.readouterr().err
    assert build_parser().parse_args(["grid", "all", "--seeds", " 3 "]).seeds == 3


def test_one_key_value_parser() -> None:
    assert parse_key_values([" a = 1 ", "b=x=y", "c="], "--set") == {"a": "1", "b": "x=y", "c": ""}
    for bad in ("novalue", "=1"):
        with pytest.raises(ConfigError, match=f"--override expects KEY=VALUE, got '{bad}'"):
            parse_key_values([bad], "--override")
