"""Simulate ``harness grid --until-decided`` as run, and the shape check, through the harness's own functions.

Power of the procedure: families of claims (one table each, Holm within it) whose paired differences
are normal with a true mean of ``truth`` paired sds; the declared effect ``--effect`` is ``effect``
sds. Each round tests every claim with the anytime-valid sequence, corrects the family
(:func:`harness.stats.correction.correct`), and takes each claim's state from
:func:`harness.stats.decisions.claim_states` (decided, ruled out, not enough seeds, undecided);
only the undecided claims get the next round's seeds (:func:`harness.grid.rounds.schedule`, 5, 7, 9,
12, 15, 19, 20 up to ``--max-seeds``), as the grid runs them. Beside it, the bare sequence on the same
data: looked at the same rounds up to the maximum, no stopping rule, no correction.

Shape check: how often :func:`harness.stats.shape.shape_flag` flags normal differences (its
false-flag rate) and differences drawn from skewed distributions (its power), at several seed counts.

    .venv/bin/python benchmarks/simulate_verdicts.py              # the guide's table (a few minutes)
    .venv/bin/python benchmarks/simulate_verdicts.py --families 50 # a quick look

Prints Markdown tables; docs/guide.md quotes them, and ``tests/benchmarks/test_simulate_verdicts.py``
runs a small version against the numbers quoted there.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.grid.rounds import schedule
from harness.specs.claim import Claim
from harness.stats.correction import Analysis, correct
from harness.stats.decisions import claim_states
from harness.stats.paired import ClaimResult, pair_by_seed
from harness.stats.sequential import ALPHA, anytime_p, sequential_summary
from harness.stats.shape import shape_flag

CLAIMS_PER_TABLE = 4
FIRST = 5
MAX_SEEDS = 20


@dataclass(frozen=True)
class Power:
    """Shares of claims by their final state, and the bare sequence's decided share."""

    claims: int
    decided: float
    wrong: float
    ruled_out: float
    not_enough: float
    undecided: float
    first_look_not_enough: float
    mean_seeds: float
    bare_decided: float


def _result(index: int, diffs: np.ndarray, effect: float, analysis: Analysis) -> ClaimResult:
    values = [float(v) for v in diffs]
    paired = pair_by_seed(dict(enumerate(values)), dict.fromkeys(range(len(values)), 0.0))
    # paper delta twice the effect: the default --effect (50 %) then judges at ``effect``
    claim = Claim("table", f"a{index}", f"b{index}", "avg", 2 * effect, f"claim {index}", "paper")
    summary = sequential_summary(paired.diffs, analysis.mixture_c)
    return ClaimResult(claim, paired, summary, comparison=(f"claim {index}",))


def simulate(
    truth: float,
    effect: float,
    families: int,
    seed: int = 20261128,
    max_seeds: int = MAX_SEEDS,
    claims: int = CLAIMS_PER_TABLE,
) -> Power:
    """The procedure as run on ``families`` tables of ``claims`` claims (see the module notes)."""
    rng = np.random.default_rng(seed)
    analysis = Analysis(sequential=True, max_seeds=max_seeds)
    steps = schedule(FIRST, max_seeds)
    states: Counter[str] = Counter()
    wrong = first_look = seeds_used = bare = 0
    for _ in range(families):
        data = rng.normal(truth, 1.0, size=(claims, max_seeds))
        have = [steps[0]] * claims
        first = True
        while True:
            tested = [_result(i, data[i, : have[i]], effect, analysis) for i in range(claims)]
            results = correct(tested, analysis)
            now = claim_states(results, analysis)
            if first:
                first_look += sum(s.state == "not enough seeds" for s in now)
                first = False
            open_ = [i for i, s in enumerate(now) if s.state == "undecided"]
            if not open_:
                break
            for i in open_:
                have[i] = next(n for n in steps if n > have[i])
        for s in now:
            states[s.state] += 1
            expected = "reversed" if truth < 0 else "holds"
            wrong += s.state == "decided" and (truth == 0 or s.result.corrected_verdict != expected)
        seeds_used += sum(have)
        for row in data:
            bare += any((anytime_p(list(row[:n])) or 1.0) < ALPHA for n in steps)
    total = families * claims
    return Power(
        total,
        states["decided"] / total,
        wrong / total,
        states["ruled out"] / total,
        states["not enough seeds"] / total,
        states["undecided"] / total,
        first_look / total,
        seeds_used / total,
        bare / total,
    )


DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, tuple[int, int]], np.ndarray]] = {
    "normal": lambda rng, size: rng.normal(0.0, 1.0, size),
    "t, 3 df (heavy tails)": lambda rng, size: rng.standard_t(3, size),
    "exponential (skewed)": lambda rng, size: rng.exponential(1.0, size) - 1.0,
    "lognormal (skewed)": lambda rng, size: rng.lognormal(0.0, 1.0, size) - np.exp(0.5),
    "one seed off by 6 sd": lambda rng, size: rng.normal(0.0, 1.0, size) + 6.0 * (np.arange(size[1]) == 0),
}


def flag_rate(name: str, n: int, draws: int, seed: int = 7) -> float:
    """The share of ``draws`` samples of ``n`` differences from ``DISTRIBUTIONS[name]`` flagged."""
    rng = np.random.default_rng(seed)
    data = DISTRIBUTIONS[name](rng, (draws, n))
    seeds = list(range(n))
    return statistics.fmean(bool(shape_flag(seeds, list(row))) for row in data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--families", type=int, default=1000, help="tables of 4 claims per row")
    parser.add_argument("--draws", type=int, default=20000, help="samples per shape-check cell")
    parser.add_argument(
        "--first-rule",
        action="store_true",
        help="only the row of a true difference and effect of 1 sd, with 'not enough seeds' judged on the "
        "sample sd itself (the rule before the lower bound), for comparison",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.first_rule:
        from harness.stats import sequential

        sequential.sd_lower_bound = lambda sd, n, confidence=0.0: sd
        p = simulate(1.0, 1.0, args.families)
        print(
            f"first rule (sample sd), true difference 1, effect 1, {p.claims} claims: "
            f"decided {p.decided:.1%}, "
            f"not enough seeds {p.not_enough:.1%} ({p.first_look_not_enough:.1%} at the first look), "
            f"bare sequence {p.bare_decided:.1%}"
        )
        return 0
    print(
        f"## The procedure as run ({args.families} tables of {CLAIMS_PER_TABLE} claims, Holm per table, "
        f"rounds {schedule(FIRST, MAX_SEEDS)}, effect = the true difference unless said)\n"
    )
    print(
        "| true difference (paired sd) | effect | decided | wrong verdict | ruled out | not enough seeds "
        "| not enough at the first look | seeds a claim | bare sequence decided |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for truth, effect in ((0.0, 1.0), (0.5, 0.5), (0.5, 1.0), (0.75, 0.75), (1.0, 1.0), (1.5, 1.5)):
        p = simulate(truth, effect, args.families)
        print(
            f"| {truth:g} | {effect:g} | {p.decided:.1%} | {p.wrong:.1%} | {p.ruled_out:.1%} | "
            f"{p.not_enough:.1%} | {p.first_look_not_enough:.1%} | {p.mean_seeds:.1f} | "
            f"{p.bare_decided:.1%} |"
        )
        sys.stdout.flush()
    print(f"\n## The shape check: share flagged ({args.draws} samples a cell)\n")
    seeds = (5, 7, 10, 20)
    print("| differences | " + " | ".join(f"{n} seeds" for n in seeds) + " |")
    print("|---|" + "---|" * len(seeds))
    for name in DISTRIBUTIONS:
        print(f"| {name} | " + " | ".join(f"{flag_rate(name, n, args.draws):.1%}" for n in seeds) + " |")
        sys.stdout.flush()
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
