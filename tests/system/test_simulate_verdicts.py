"""benchmarks/simulate_verdicts.py: the procedure's power and the shape check's flag rates that
docs/guide.md quotes are what the script gives, to within what a small run's sampling error allows."""

from __future__ import annotations

import math
import re
import sys

from tests.helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import simulate_verdicts

GUIDE = REPO_ROOT / "docs" / "guide.md"


def _quoted_rows(header_start: str) -> list[list[str]]:
    """The cells of the guide's table whose header begins with ``header_start``."""
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _share(cell: str) -> float:
    match = re.fullmatch(r"([0-9.]+)%", cell)
    assert match, cell
    return float(match.group(1)) / 100


def _close(small: float, quoted: float, draws: int) -> bool:
    """Within 4.5 binomial sds of the small run (plus the quoted number's rounding)."""
    sd = math.sqrt(max(quoted * (1 - quoted), 0.01) / draws)
    return abs(small - quoted) <= 4.5 * sd + 0.0005


def test_the_guides_power_table_is_the_procedures() -> None:
    rows = {(r[0], r[1]): r for r in _quoted_rows("| true difference (paired sd) |")}
    families = 60
    power = simulate_verdicts.simulate(1.0, 1.0, families, seed=1)
    quoted = rows[("1", "1")]
    draws = families * simulate_verdicts.CLAIMS_PER_TABLE
    assert _close(power.decided, _share(quoted[2]), draws), (power.decided, quoted[2])
    assert _close(power.not_enough, _share(quoted[5]), draws), (power.not_enough, quoted[5])
    assert _close(power.bare_decided, _share(quoted[8]), draws), (power.bare_decided, quoted[8])
    assert power.decided < power.bare_decided + 1e-9  # stopping rules and Holm only cost power
    null = simulate_verdicts.simulate(0.0, 1.0, 30, seed=2)
    assert null.wrong <= 0.05 and _share(rows[("0", "1")][3]) <= 0.05


def test_the_guides_shape_check_rates_are_the_checks() -> None:
    rows = {r[0]: r for r in _quoted_rows("| differences |")}
    draws = 1500
    for name, column in (("normal", 3), ("exponential (skewed)", 3)):  # 10 seeds
        rate = simulate_verdicts.flag_rate(name, 10, draws, seed=3)
        assert _close(rate, _share(rows[name][column]), draws), (name, rate, rows[name][column])
