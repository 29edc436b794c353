"""The reporters' flags (``harness tables``, ``claims``, ``plots``, ``report``, and ``grid``'s claims):
where the records are, the error control across claims, the effect, titles in figures."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

from harness.commands.flags import add_data_dir, add_profile

if typing.TYPE_CHECKING:
    from harness.stats.correction import Analysis


def add_common_report_arguments(parser: argparse.ArgumentParser) -> None:
    """--profile, --runs-dir, --data-dir (grid, tables and plots)."""
    add_profile(parser)
    parser.add_argument("--runs-dir", default="runs", help="run store folder (default ./runs)")
    add_data_dir(parser)


def add_analysis_arguments(parser: argparse.ArgumentParser, *, as_written: bool = False) -> None:
    """``--family`` and ``--correction``: error control across claims (claims, tables, grid, report).

    With ``as_written`` (``harness report``) both default to what ``claims.json`` says."""
    from harness.stats.correction import DEFAULT_CORRECTION, DEFAULT_FAMILY, FAMILIES
    from harness.stats.paired import CORRECTIONS

    default = "as claims.json was written" if as_written else None
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        default=None if as_written else DEFAULT_FAMILY,
        help="the claims whose p-values are adjusted together: each table's, each paper's, or all "
        f"rendered (default {default or DEFAULT_FAMILY})",
    )
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default=None if as_written else DEFAULT_CORRECTION,
        help="error control across claims: Holm (family-wise error rate), Benjamini-Hochberg (false "
        "discovery rate) or none; every output shows both verdicts "
        f"(default {default or DEFAULT_CORRECTION})",
    )


def add_effect_argument(parser: argparse.ArgumentParser) -> None:
    """``--effect``: the smallest difference worth deciding (ruled out, not enough seeds, power lines)."""
    from harness.stats.outcomes import DEFAULT_EFFECT

    parser.add_argument(
        "--effect",
        default=DEFAULT_EFFECT,
        metavar="E",
        help="the smallest difference you care about: score points (0.3) or a share of each claim's "
        f"paper delta (50%%): a claim whose interval lies inside +-E is ruled out; with --until-decided "
        "also whether the seeds can reach a verdict (default "
        f"{DEFAULT_EFFECT.replace('%', '%%')})",
    )


def analysis_from_args(args: argparse.Namespace, profile: str) -> Analysis:
    """The claims' analysis the flags ask for; the anytime-valid test where the runs folder's
    ``sequential.json`` (written by ``harness grid --until-decided`` under this profile) says the
    seeds were added until decided, with that grid's ``c``, effect, most seeds and, where it stopped
    with claims open, why (so the claims say what the grid decided); else ``--effect``."""
    from harness.grid.rounds import SEQUENTIAL_FILE, read_sequential, stop_reason
    from harness.stats.correction import Analysis
    from harness.stats.outcomes import parse_effect
    from harness.stats.sequential import read_design

    effect = parse_effect(getattr(args, "effect", None))
    state = read_sequential(args.runs_dir) or {}
    design = state.get("design") or {}
    if design.get("profile") != profile or design.get("test") != "sequential":
        return Analysis(correction=args.correction, family=args.family, effect=effect)
    written = read_design(design, f"{Path(args.runs_dir) / SEQUENTIAL_FILE}: design")
    if isinstance(design.get("effect"), str):
        effect = parse_effect(design["effect"])
    return Analysis(
        correction=args.correction,
        family=args.family,
        sequential=True,
        effect=effect,
        max_seeds=written.max_seeds,
        stopped=stop_reason(state),
        mixture_c=written.mixture_c,
    )


def add_titles_argument(parser: argparse.ArgumentParser) -> None:
    """``--titles``: a title and caption inside each figure (off: a paper sets them in LaTeX)."""
    parser.add_argument(
        "--titles",
        action="store_true",
        help="draw each figure's title and caption inside it (default: none; the captions go to "
        "figures.tex / claims_figures.tex and the HTML report)",
    )
