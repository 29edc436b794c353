"""``harness methods``: every method's parameters with their choices, defaults written as ``--set``
takes them."""

from __future__ import annotations

import re
import shlex
import typing

import pytest

from harness.cli import main
from methods import REGISTRY, get_method


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
