"""``harness plots``: draw the plot specs (alignment / uniformity) from the run records."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands.common import add_override_arguments, overrides_from_args
from harness.commands.grid_cmd import add_common_report_arguments

HELP = "draw alignment/uniformity plots (PNG and PDF) from run records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="plot specs (default: all in plots/)")
    add_common_report_arguments(parser)
    parser.add_argument("--out", default="results/plots", help="output folder (default results/plots)")
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.commands.common import check_spec_paths
    from harness.paths import resolve_data_root
    from harness.reporting.plots import write_plots
    from harness.specs import load_plot_specs
    from harness.store import RunStore

    check_spec_paths(args.specs)
    profile = args.profile or "cpu"
    written = write_plots(
        load_plot_specs(args.specs),
        RunStore(args.runs_dir),
        profile,
        Path(args.out),
        overrides=overrides_from_args(args),
        data_root=resolve_data_root(args.data_dir),
        note=lambda line: print(line, file=sys.stderr),
    )
    for path in written:
        print(path)
    return 0
