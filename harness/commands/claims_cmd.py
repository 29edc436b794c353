"""``harness claims``: test the papers' claims on paired seeds (claims.md/.tex/.json + forest plot)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.report_flags import (
    add_analysis_arguments,
    add_common_report_arguments,
    add_effect_argument,
    add_titles_argument,
    analysis_from_args,
)
from harness.commands.setting_flags import add_override_arguments, overrides_from_args

HELP = "test every table's claims on paired seeds: paper delta, measured interval, verdict, corrected verdict"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="table specs (default: all in tables/)")
    add_common_report_arguments(parser)
    parser.add_argument("--out", default="results/claims", help="output folder (default results/claims)")
    add_analysis_arguments(parser)
    add_effect_argument(parser)
    add_titles_argument(parser)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.atomic import check_output_dir
    from harness.config.inputs import check_runs_dir, check_spec_paths
    from harness.specs.find import load_table_specs
    from harness.stats.outcomes import parse_effect

    check_spec_paths(args.specs)
    parse_effect(args.effect)  # a bad --effect: one line, exit 2, nothing written
    load_table_specs(args.specs)  # a bad spec, or two of one name: one line before the folder is made
    check_runs_dir(args.runs_dir)  # a misspelt folder: one line, exit 2, nothing written
    out = check_output_dir(args.out, "claims output folder")
    for path in write_claims_for(args, out):
        print(path)
    return 0


def write_claims_for(args: argparse.Namespace, out: Path) -> list[Path]:
    """Build and write the claims of ``args.specs`` (shared with ``harness tables``); print the
    totals, raw and corrected, and the seeds each undecided claim needs for 80 % power."""
    from harness.config.paths import resolve_data_root
    from harness.reporting.claims import build_claims, corrected_totals, totals, write_claims
    from harness.specs.find import load_table_specs
    from harness.stats.decisions import power_lines
    from harness.stats.outcomes import parse_effect
    from harness.store.run_store import RunStore

    profile = args.profile or "cpu"
    effect = parse_effect(args.effect)
    analysis = analysis_from_args(args, profile)
    specs = [s for s in load_table_specs(args.specs) if s.claims]
    results = build_claims(
        specs,
        RunStore(args.runs_dir),
        profile,
        overrides=overrides_from_args(args),
        data_root=resolve_data_root(args.data_dir),
        analysis=analysis,
    )
    paths = write_claims(results, profile, out, analysis, titles=bool(getattr(args, "titles", False)))
    if analysis.sequential:
        print(f"test: {analysis.test} ({args.runs_dir}/sequential.json: seeds added until decided)")
    print(f"{len(results)} claims; {totals(results)}")
    print(corrected_totals(results, analysis))
    for line in power_lines(results, effect, analysis):
        print(line)
    return paths
