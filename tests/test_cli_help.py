"""The help a user reads: every profile named wherever a profile is chosen; `harness methods` lists
every method's parameters with their choices, defaults written as ``--set`` takes them."""

from __future__ import annotations

import argparse
import re
import shlex
import typing

import pytest

from harness.cli import build_parser, main
from harness.config.profiles import PROFILES
from methods import REGISTRY, get_method


def test_harness_help_and_every_profile_option_name_every_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    listed = top.split("profiles (--profile")[1]
    for name in PROFILES:
        assert re.search(rf"^  {name}\s+\S", listed, re.MULTILINE), name
    train_line = " ".join(top.split("\n    train ")[1].split("\n    methods ")[0].split())
    assert all(name in train_line for name in PROFILES), train_line
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    seen = 0
    for command, subparser in sub.choices.items():
        for action in subparser._actions:
            if "--profile" in action.option_strings:
                seen += 1
                assert all(name in (action.help or "") for name in PROFILES), (command, action.help)
    assert seen >= 5  # train, grid, tables, plots, report, ...


def parameter_rows(out: str) -> dict[str, tuple[str, str]]:
    """``--set name=value  takes`` lines -> {name: (value as typed, what it takes)}."""
    rows = {}
    for line in out.splitlines():
        match = re.match(r"^    --set (\w+)=(\S*)\s+(.*)$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_methods_lists_every_parameter_with_its_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods"]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    assert len(blocks) == len(REGISTRY)
    for block, name in zip(blocks, REGISTRY):
        assert block.startswith(f"{name}: ")
        params_cls = get_method(name).params_cls
        rows = parameter_rows(block)
        assert list(rows) == params_cls.keys()
        hints = typing.get_type_hints(params_cls)
        for key, (_, takes) in rows.items():
            if typing.get_origin(hints[key]) is typing.Literal:
                assert takes.startswith("one of " + " | ".join(typing.get_args(hints[key])))
        for key in params_cls.switches():
            assert rows[key][1].endswith("(switch)")


def test_methods_name_prints_defaults_as_set_takes_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods", "whitenedcse"]) == 0
    out = capsys.readouterr().out
    rows = parameter_rows(out)
    assert rows["positive_weights"][0] == '""' and "comma-separated numbers" in rows["positive_weights"][1]
    assert rows["whitening"] == ("sgw", "one of sgw | group | zca | pca | none")
    assert rows["mlp"] == ("true", "true | false") and rows["num_groups"][1] == "integer"
    assert "()" not in out and "'sgw'" not in out and "True" not in out
    params_cls = get_method("whitenedcse").params_cls
    for description in params_cls.switches().values():
        assert description in out
    # every default, typed as printed (through a shell), is what --set reads back as the default
    typed = {key: shlex.split(f"{key}={value}")[0].partition("=")[2] for key, (value, _) in rows.items()}
    assert params_cls.from_overrides(typed) == params_cls()
    weights = params_cls.from_overrides({"positive_weights": "1,0.5"})
    assert weights.to_dict()["positive_weights"] == [1.0, 0.5]
