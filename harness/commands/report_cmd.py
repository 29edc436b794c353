"""``harness report``: one self-contained HTML page with every table, the claims, plots and provenance."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.report_flags import add_analysis_arguments, add_common_report_arguments
from harness.commands.setting_flags import add_override_arguments, overrides_from_args

HELP = "write results/report.html: every table, the claims, the plots and each run's provenance"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="table specs (default: all in tables/)")
    add_common_report_arguments(parser)
    parser.add_argument(
        "--results", default="results", help="folder holding claims/ and plots/ (default results)"
    )
    parser.add_argument("--out", default=None, help="the HTML file (default <results>/report.html)")
    add_analysis_arguments(parser, as_written=True)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.atomic import check_output_file
    from harness.config.inputs import check_runs_dir
    from harness.config.paths import resolve_data_root
    from harness.reporting.report import render_report, write_report
    from harness.reporting.tables.build import build_tables
    from harness.specs.find import load_table_specs
    from harness.stats.correction import DEFAULT_CORRECTION, DEFAULT_FAMILY, Analysis
    from harness.store.run_store import RunStore

    profile = args.profile or "cpu"
    store = RunStore(check_runs_dir(args.runs_dir))  # a misspelt folder: one line, exit 2
    specs = load_table_specs(args.specs)
    results = Path(args.results)
    out = check_output_file(Path(args.out) if args.out else results / "report.html", "report --out")
    tables = build_tables(
        specs,
        store,
        profile,
        overrides=overrides_from_args(args),
        data_root=resolve_data_root(args.data_dir),
    )
    records = [r for r in store.records() if (r.get("config") or {}).get("profile") == profile]
    correction = None
    if args.family is not None or args.correction is not None:  # else: as claims.json was written
        correction = Analysis(args.correction or DEFAULT_CORRECTION, args.family or DEFAULT_FAMILY)
    text = render_report(
        tables,
        records,
        claims_dir=results / "claims",
        plots_dir=results / "plots",
        profile=profile,
        correction=correction,
    )
    print(write_report(text, out))
    return 0
