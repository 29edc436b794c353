"""``harness plots``: draw the plot specs (alignment / uniformity) from the run records."""

from __future__ import annotations

import argparse
import sys

from harness.commands.report_flags import add_common_report_arguments, add_titles_argument
from harness.commands.setting_flags import add_override_arguments, overrides_from_args

HELP = "draw alignment/uniformity plots (PNG and PDF) from run records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="plot specs (default: all in plots/)")
    add_common_report_arguments(parser)
    parser.add_argument("--out", default="results/plots", help="output folder (default results/plots)")
    add_titles_argument(parser)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.atomic import check_output_dir
    from harness.config.inputs import check_runs_dir, check_spec_paths
    from harness.config.paths import resolve_data_root
    from harness.reporting.plots import write_plots
    from harness.specs.find import load_plot_specs
    from harness.store.run_store import RunStore

    check_spec_paths(args.specs, "plot spec")
    check_runs_dir(args.runs_dir)  # a misspelt folder: one line, exit 2, nothing written
    profile = args.profile or "cpu"
    specs = load_plot_specs(args.specs)
    out = check_output_dir(args.out, "plots output folder")
    written = write_plots(
        specs,
        RunStore(args.runs_dir),
        profile,
        out,
        overrides=overrides_from_args(args),
        data_root=resolve_data_root(args.data_dir),
        note=lambda line: print(line, file=sys.stderr),
        titles=args.titles,
    )
    for path in written:
        print(path)
    return 0
