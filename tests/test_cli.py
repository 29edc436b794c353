"""The command line: a user error is one line with exit status 2, a stray OS error too, and a
warning is one line shown once."""

from __future__ import annotations

import argparse
import errno
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from harness.cli import build_parser, main
from harness.config.profiles import PROFILES
from tests.helpers import REPO_ROOT, one_error_line


def test_user_error_is_one_line_exit_2(capsys):
    assert main(["methods", "no-such-method"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("harness methods: error: unknown method 'no-such-method'; registered: ")
    assert "simcse" in err[0]


def test_the_command_line_shows_a_warning_as_one_line_once() -> None:
    import warnings

    from harness import cli

    before = warnings.formatwarning
    text = "run record x.json: skipping field(s) of the wrong type: final"
    with cli._one_line_warnings():
        shown = [
            warnings.formatwarning(text, RuntimeWarning, "harness/store/run_store.py", 1) for _ in range(3)
        ]
        other = warnings.formatwarning("another", UserWarning, "x.py", 2, None)
    assert shown == [f"warning: {text}\n", "", ""] and other == "warning: another\n"
    assert warnings.formatwarning is before


@pytest.mark.parametrize("command", ["tables", "report", "export"])
def test_ctrl_c_while_the_commands_are_imported_is_one_line_and_130(command: str) -> None:
    # a real SIGINT at the first command module's import (the first second of every command)
    code = (
        "import os, signal, sys\n"
        "import harness.cli as cli\n"
        "load = cli.command_modules\n"
        "def interrupted():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return load()\n"
        "cli.command_modules = interrupted\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, command, "x"], capture_output=True, text=True, env=env, timeout=120
    )
    assert (done.returncode, done.stderr) == (130, f"harness {command}: interrupted\n")


def test_the_console_entry_imports_nothing_of_the_harness_before_main_runs() -> None:
    # the window main() cannot cover: [project.scripts]' `from harness.cli import main`
    code = (
        "import sys\nfrom harness.cli import main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('harness', 'methods')))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout == "['harness', 'harness.cli']\n"


def test_a_stray_os_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.commands import tables_cmd

    def full(_args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "/somewhere/file")

    monkeypatch.setattr(tables_cmd, "run", full)
    assert main(["tables"]) == 2
    assert one_error_line(capsys) == "harness tables: error: /somewhere/file: no space left on the device"


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
