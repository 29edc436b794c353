"""The reporters' flags: the claims' analysis follows the runs folder's until-decided design where it
was made under the profile asked, else the flags."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.commands.report_flags import add_analysis_arguments, add_effect_argument, analysis_from_args
from harness.stats.outcomes import parse_effect


def _args(runs: Path, *flags: str) -> argparse.Namespace:
    """The analysis and effect flags as ``harness claims`` parses them, with ``--runs-dir runs``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs-dir")
    add_analysis_arguments(parser)
    add_effect_argument(parser)
    return parser.parse_args(["--runs-dir", str(runs), *flags])


def test_without_a_design_the_flags_decide(tmp_path: Path) -> None:
    analysis = analysis_from_args(_args(tmp_path, "--effect", "0.3", "--correction", "bh"), "night")
    assert not analysis.sequential and analysis.correction == "bh"
    assert analysis.effect == parse_effect("0.3") and analysis.max_seeds is None


def test_the_until_decided_design_of_the_profile_wins(tmp_path: Path) -> None:
    design = {"profile": "night", "test": "sequential", "mixture_c": 2, "effect": "25%", "max_seeds": 12}
    (tmp_path / "sequential.json").write_text(json.dumps({"design": design}), encoding="utf-8")
    analysis = analysis_from_args(_args(tmp_path, "--effect", "0.3"), "night")
    assert analysis.sequential and analysis.mixture_c == 2.0 and analysis.max_seeds == 12
    assert analysis.effect == parse_effect("25%")
    other = analysis_from_args(_args(tmp_path, "--effect", "0.3"), "demo")  # another profile's grid
    assert not other.sequential and other.effect == parse_effect("0.3")
