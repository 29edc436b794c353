"""The reporters' flags: the claims' analysis follows the runs folder's until-decided design where it
was made under the profile asked, else the flags."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from harness.commands.report_flags import add_analysis_arguments, add_effect_argument, analysis_from_args
from harness.errors import DataError
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


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mixture_c", -1, "mixture_c must be a finite number > 0, got -1"),
        ("mixture_c", "0.5", "mixture_c must be a finite number > 0, got '0.5'"),
        ("max_seeds", 0, "max_seeds must be a whole number >= 1, got 0"),
        ("max_seeds", 2.5, "max_seeds must be a whole number >= 1, got 2.5"),
    ],
)
def test_a_design_value_out_of_its_rule_is_one_line_naming_the_file(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    """The one reader of a written design (:func:`~harness.stats.sequential.read_design`), for the
    claims, the report and the next until-decided grid: never a silent default, never a crash."""
    design = {"profile": "night", "test": "sequential", "mixture_c": 0.5, "max_seeds": 12, field: value}
    (tmp_path / "sequential.json").write_text(json.dumps({"design": design}), encoding="utf-8")
    with pytest.raises(DataError, match=f"^{re.escape(str(tmp_path / 'sequential.json'))}: design: "):
        analysis_from_args(_args(tmp_path), "night")
    with pytest.raises(DataError, match=re.escape(message)):
        analysis_from_args(_args(tmp_path), "night")
    assert not analysis_from_args(_args(tmp_path), "demo").sequential  # another profile's: not read
