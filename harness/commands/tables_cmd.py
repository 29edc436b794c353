"""``harness tables``: render table specs from the run records (LaTeX + a Markdown preview)."""

from __future__ import annotations

import argparse

from harness.commands.report_flags import (
    add_analysis_arguments,
    add_common_report_arguments,
    add_effect_argument,
    add_titles_argument,
)
from harness.commands.setting_flags import add_override_arguments, overrides_from_args

HELP = "render LaTeX tables (and a Markdown preview) from run records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="table specs (default: all in tables/)")
    add_common_report_arguments(parser)
    parser.add_argument("--out", default="results/tables", help="output folder (default results/tables)")
    add_analysis_arguments(parser)
    add_effect_argument(parser)
    add_titles_argument(parser)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.atomic import check_output_dir
    from harness.config.inputs import check_runs_dir, check_spec_paths
    from harness.config.paths import resolve_data_root
    from harness.reporting.tables.build import build_tables
    from harness.reporting.tables.write import write_tables
    from harness.specs.find import load_table_specs
    from harness.stats.outcomes import parse_effect
    from harness.store.run_store import RunStore

    check_spec_paths(args.specs)
    parse_effect(args.effect)  # a bad --effect: one line, exit 2, nothing written
    profile = args.profile or "cpu"
    specs = load_table_specs(args.specs)
    check_runs_dir(args.runs_dir)  # a misspelt folder: one line, exit 2, nothing written
    out = check_output_dir(args.out, "tables output folder")
    if any(spec.claims for spec in specs):
        check_output_dir(out.parent / "claims", "claims output folder")
    tables = build_tables(
        specs,
        RunStore(args.runs_dir),
        profile,
        overrides=overrides_from_args(args),
        data_root=resolve_data_root(args.data_dir),
    )
    for path in write_tables(tables, out):
        print(path)
    if any(spec.claims for spec in specs):
        from harness.commands.claims_cmd import write_claims_for

        for path in write_claims_for(args, out.parent / "claims"):
            print(path)
    return 0
