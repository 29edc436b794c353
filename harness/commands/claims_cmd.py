"""``harness claims``: test the papers' claims on paired seeds (claims.md/.tex/.json + forest plot)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.arguments import (
    add_common_report_arguments,
    add_override_arguments,
    add_titles_argument,
    overrides_from_args,
)

HELP = "test every table's claims on paired seeds: paper delta, measured interval, verdict"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="table specs (default: all in tables/)")
    add_common_report_arguments(parser)
    parser.add_argument("--out", default="results/claims", help="output folder (default results/claims)")
    add_titles_argument(parser)
    add_override_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from harness.atomic import check_output_dir
    from harness.config.inputs import check_runs_dir, check_spec_paths

    check_spec_paths(args.specs)
    check_runs_dir(args.runs_dir)  # a misspelt folder: one line, exit 2, nothing written
    out = check_output_dir(args.out, "claims output folder")
    for path in write_claims_for(args, out):
        print(path)
    return 0


def write_claims_for(args: argparse.Namespace, out: Path) -> list[Path]:
    """Build and write the claims of ``args.specs`` (shared with ``harness tables``)."""
    from harness.config.paths import resolve_data_root
    from harness.reporting.claims import build_claims, totals, write_claims
    from harness.specs.find import load_table_specs
    from harness.store.run_store import RunStore

    profile = args.profile or "cpu"
    specs = [s for s in load_table_specs(args.specs) if s.claims]
    results = build_claims(
        specs,
        RunStore(args.runs_dir),
        profile,
        overrides=overrides_from_args(args),
        data_root=resolve_data_root(args.data_dir),
    )
    paths = write_claims(results, profile, out, titles=bool(getattr(args, "titles", False)))
    print(f"{len(results)} claims; {totals(results)}")
    return paths
