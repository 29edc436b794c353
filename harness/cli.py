"""The ``harness`` command line.

Each subcommand lives in ``harness/commands/<name>_cmd.py`` and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; :func:`command_modules` lists them. Heavy imports
happen inside ``run`` so that ``harness --help`` stays fast. User errors
(:class:`~harness.errors.HarnessError`) become one line on stderr and exit status 2, with no traceback;
so does an :class:`OSError` no command foresaw (a disk that filled up mid-way: the files the harness
writes are atomic, see :mod:`harness.atomic`). Ctrl-C and SIGTERM end every command the same way: what
it was writing is left as it was, a run's record says ``interrupted``, exit status 130; at any moment,
the first second's imports included (this module imports only the standard library before :func:`main`
runs, and ``main`` catches the interrupt around everything it does).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import NoReturn


def command_modules() -> dict[str, ModuleType]:
    """Every subcommand and its module, in the order ``harness --help`` lists them (imported when
    :func:`main` builds its parser, inside its guard: a Ctrl-C during these imports is one line too)."""
    from harness.commands import (
        check_cmd,
        claims_cmd,
        data_cmd,
        eval_cmd,
        export_cmd,
        grid_cmd,
        methods_cmd,
        plots_cmd,
        report_cmd,
        results_cmd,
        tables_cmd,
        train_cmd,
    )

    return {
        "eval": eval_cmd,
        "train": train_cmd,
        "methods": methods_cmd,
        "grid": grid_cmd,
        "check": check_cmd,
        "tables": tables_cmd,
        "claims": claims_cmd,
        "plots": plots_cmd,
        "report": report_cmd,
        "export": export_cmd,
        "data": data_cmd,
        "results": results_cmd,
    }


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as the harness's own: one line (``harness CMD: error: ...``), exit 2.

    argparse prints the usage before its error; here the usage stays in ``--help`` and the line names
    the flag and, for a closed flag, its choices (:func:`harness.commands.flags.closed_choice`).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from harness import __version__

    parser = OneLineParser(
        prog="harness",
        description="Benchmark and ablation harness for contrastive sentence embeddings.",
        epilog=profiles_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in command_modules().items():
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_module=module)
    return parser


def profiles_epilog() -> str:
    """The profiles (``--profile``), one line each, from :data:`harness.config.profiles.PROFILES`."""
    from harness.config.profiles import PROFILES

    lines = ["profiles (--profile; what a run costs):"]
    for name, values in PROFILES.items():
        steps = values.get("max_steps")
        length = f"{steps} steps" if steps else "one epoch"
        lines.append(
            f"  {name:<7} {values.get('model')}, batch {values.get('batch_size')}, {length}, "
            f"final tasks {values.get('final_tasks')}"
            + (f", eval precision {values['eval_precision']}" if "eval_precision" in values else "")
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``harness`` console script (``[project.scripts]``): a command's exit status; Ctrl-C at any
    point, while the command modules are still imported too, is one line and status 130."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        name = _command_of(argv)
        print(f"harness {name}: interrupted" if name else "harness: interrupted", file=sys.stderr)
        return 130


def _command_of(argv: Sequence[str] | None) -> str:
    """The subcommand typed (for the interrupt's line before the parser has read it), or ``""``: the
    first word that is not an option (``harness`` itself takes none but ``--help`` and ``--version``)."""
    words = list(sys.argv[1:] if argv is None else argv)
    return next((w for w in words if not w.startswith("-")), "")


def _main(argv: Sequence[str] | None) -> int:
    from harness.atomic import cause_of
    from harness.errors import HarnessError
    from harness.grid.signals import sigterm_as_interrupt

    _interruptible()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a parser error (its one line is printed) is exit status 2, returned
        if exc.code == 2:
            return 2
        raise  # --help and --version exit 0
    try:  # SIGTERM (`kill PID`) stops any command as Ctrl-C does: records marked, temporaries removed
        with _one_line_warnings(), sigterm_as_interrupt():
            return int(args._module.run(args) or 0)
    except HarnessError as exc:
        print(f"harness {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a read or write no check foresaw (a disk that filled up, ...): one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"harness {args.command}: error: {where}{cause_of(exc)}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """A warning (e.g. a skipped run record) is one line, ``warning: ...``, shown once."""
    shown: set[str] = set()

    def one_line(message: Warning | str, *_where: object, **_line: object) -> str:
        text = f"warning: {message}\n"
        if text in shown:  # each command that reads the store again would repeat it
            return ""
        shown.add(text)
        return text

    previous, warnings.formatwarning = warnings.formatwarning, one_line
    try:
        yield
    finally:
        warnings.formatwarning = previous


def _interruptible() -> None:
    """Make SIGINT interrupt even when it was inherited as ignored.

    A process started in the background by a non-interactive shell (``harness grid ... &`` in a
    script, a CI job) inherits SIGINT as *ignored*, and Python keeps it so; ``kill -INT`` must still
    stop a grid or a run cleanly (runs marked interrupted, exit 130).
    """
    import signal
    import threading

    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)


if __name__ == "__main__":
    sys.exit(main())
