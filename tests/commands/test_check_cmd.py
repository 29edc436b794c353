"""``harness check`` is a command of the command line (what it checks:
tests/grid/preflight/test_command.py)."""

from __future__ import annotations


def test_check_is_a_command() -> None:
    from harness.cli import build_parser, command_modules

    assert "check" in command_modules()
    args = build_parser().parse_args(["check", "all", "--profile", "paper"])
    assert args._module.__name__ == "harness.commands.check_cmd"
