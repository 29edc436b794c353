"""``harness results``: the run records as a tidy table (CSV) or in MTEB's result format.

What the columns are and how MTEB's files are laid out: :mod:`harness.results` and
:mod:`harness.reporting.mteb`.
"""

from __future__ import annotations

import argparse

from harness.commands.flags import closed_choice
from harness.commands.report_flags import add_common_report_arguments
from harness.commands.setting_flags import add_override_arguments, overrides_from_args

HELP = "export the run records: a tidy CSV (one line per score) or MTEB's result format (per-task JSON)"
FORMATS = ("csv", "mteb")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out",
        metavar="OUT",
        help="csv: the file to write; mteb: the folder, an MTEB result cache "
        "(OUT/results/<model>/<revision>/<task>.json)",
    )
    parser.add_argument(
        "--format",
        default="csv",
        type=closed_choice("format", FORMATS),
        choices=FORMATS,
        help="csv (default): spec, paper_row, measured, method, parameters, seed, group, task, score, ...; "
        "mteb: one folder per run with model_meta.json and a TaskResult JSON per STS task",
    )
    parser.add_argument(
        "--spec",
        dest="specs",
        action="append",
        default=None,
        metavar="SPEC",
        help="a table spec whose rows name the runs (repeatable; 'all' for every spec); default: every "
        "finished record, unnamed",
    )
    add_common_report_arguments(parser)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.atomic import check_output_dir, check_output_file, write_text
    from harness.config.inputs import check_runs_dir
    from harness.results import load, write_mteb

    check_runs_dir(args.runs_dir)  # a misspelt folder: one line, exit 2, nothing written
    overrides = overrides_from_args(args)
    if args.format == "mteb":
        out = check_output_dir(args.out, "results folder")
        written = write_mteb(
            args.runs_dir, out, args.specs, args.profile, overrides=overrides, data_dir=args.data_dir
        )
        models = len({p.parent for p in written})
        print(f"{len(written)} files for {models} runs under {Path(out) / 'results'}")
        return 0
    target = check_output_file(Path(args.out), "results file")
    frame = load(args.runs_dir, args.specs, args.profile, overrides=overrides, data_dir=args.data_dir)
    print(write_text(target, frame.to_csv(index=False)))
    print(f"{len(frame)} scores of {frame['run_id'].nunique()} runs")
    return 0
