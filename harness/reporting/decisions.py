"""The claims' side of ``harness grid --until-decided``, and the seeds a claim needs for 80 % power.

* :class:`Effect`: the smallest difference the user cares about (``--effect``): score points, or a
  share of each claim's paper delta (default :data:`DEFAULT_EFFECT`, half of it: replications of
  published effects find about half the original effect on average, Open Science Collaboration 2015,
  Science 349, aac4716, so a claim is worth deciding down to half what its paper printed);
* :func:`power_lines`: per undecided claim, the seeds its test needs for 80 % power at the paper's
  delta and at the effect, from the observed paired sd (``harness claims``, ``harness grid
  --dry-run``);
* :func:`claim_states` / :func:`decider`: each distinct comparison's state after a round (decided
  after correction, futile, at the most seeds, undecided), the cells the undecided ones compare,
  most promising first, for :mod:`harness.grid.rounds`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.errors import ConfigError
from harness.grid.rounds import ClaimNeed, Decide, Decision
from harness.reporting.correction import Analysis, hypothesis_of
from harness.reporting.sequential import RULED_OUT, futility, sequential_seeds_for_power
from harness.reporting.statistics import POWER, ClaimResult, seeds_for_power

State = Literal["decided", "futile", "max seeds", "undecided"]
DEFAULT_EFFECT = "50%"


@dataclass(frozen=True)
class Effect:
    """The smallest difference worth deciding: ``points`` (score points) for every claim, or
    ``share`` of each claim's paper delta."""

    points: float | None = None
    share: float | None = 0.5

    def of(self, paper_delta: float) -> float:
        """The effect for a claim with this paper delta (always >= 0)."""
        if self.points is not None:
            return abs(self.points)
        return abs(paper_delta) * (self.share or 0.0)

    @property
    def text(self) -> str:
        if self.points is not None:
            return f"{self.points:g} points"
        return f"{100 * (self.share or 0.0):g}% of the paper's delta"


def parse_effect(text: str | None) -> Effect:
    """``--effect``: ``0.3`` (score points) or ``50%`` (of each claim's paper delta).

    Raises:
        ConfigError: not a number > 0 or a percentage in (0, 1000].
    """
    value = (text or DEFAULT_EFFECT).strip()
    share = re.fullmatch(r"([0-9.eE+-]+)\s*%", value)
    try:
        number = float(share.group(1) if share else value)
    except ValueError:
        number = math.nan
    if share and math.isfinite(number) and 0 < number <= 1000:
        return Effect(share=number / 100)
    if not share and math.isfinite(number) and number > 0:
        return Effect(points=number, share=None)
    raise ConfigError(
        f"--effect must be a difference in score points > 0 (e.g. 0.3) or a share of each claim's paper "
        f"delta (e.g. 50%), got {text!r}"
    )


def _seeds(delta: float, sd: float, analysis: Analysis) -> int | None:
    if analysis.sequential:
        return sequential_seeds_for_power(delta, sd, c=analysis.mixture_c)
    return seeds_for_power(delta, sd)


def _seeds_text(seeds: int | None) -> str:
    return "out of reach" if seeds is None else f"{seeds} seeds"


def _distinct(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The measured comparisons, each once (repeats and claims not run here left out)."""
    return [r for r in results if not r.same_as and r.summary.verdict != "not run"]


def power_lines(results: Sequence[ClaimResult], effect: Effect, analysis: Analysis) -> list[str]:
    """Per undecided claim (after correction), the seeds its test needs for 80 % power at the paper's
    delta and at the effect, from the observed paired sd."""
    test = "the anytime-valid sequence" if analysis.sequential else "the paired t-test"
    lines = []
    for r in _distinct(results):
        if r.corrected_verdict in ("holds", "reversed"):
            continue
        s = r.summary
        name = f"{r.claim.spec}: {r.claim.text} ({r.claim.better} > {r.claim.worse})"
        if s.sd is None:
            lines.append(f"  {name}: {s.n} seed(s), no spread yet")
            continue
        at = effect.of(r.claim.paper_delta)
        lines.append(
            f"  {name}: sd {s.sd:.2f} at {s.n} seeds; paper delta {r.claim.paper_delta:+.2f}: "
            f"{_seeds_text(_seeds(r.claim.paper_delta, s.sd, analysis))}; effect {at:.2f}: "
            f"{_seeds_text(_seeds(at, s.sd, analysis))}"
        )
    if not lines:
        return []
    head = (
        f"seeds for {POWER:.0%} power ({test}; claims undecided after {analysis.label}; "
        "from the observed paired sd):"
    )
    return [head, *lines]


@dataclass(frozen=True)
class ClaimState:
    """One distinct comparison's state after a round.

    Attributes:
        result: the claim, tested and corrected.
        state: ``decided`` (after correction), ``futile`` (the effect that matters is ruled out, or
            out of reach within the most seeds: :func:`~harness.reporting.sequential.futility`),
            ``max seeds`` (has them all) or ``undecided``.
        effect: the effect judged (the user's, or the measured mean where larger).
        seeds_needed: seeds for 80 % power at that effect (None: unknown or out of reach).
        why: the futility's reason (``ruled out``, ``out of reach``), else empty.
    """

    result: ClaimResult
    state: State
    effect: float
    seeds_needed: int | None
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "spec": r.claim.spec,
            "text": r.claim.text,
            "better": r.claim.better,
            "worse": r.claim.worse,
            "state": self.state,
            "n": r.summary.n,
            "mean": r.summary.mean,
            "sd": r.summary.sd,
            "p": r.summary.p,
            "p_adjusted": r.adjusted,
            "verdict": r.summary.verdict,
            "verdict_corrected": r.corrected_verdict,
            "effect": self.effect,
            "seeds_needed": self.seeds_needed,
            "futile_because": self.why or None,
        }


def claim_states(
    results: Sequence[ClaimResult], effect: Effect, max_seeds: int, analysis: Analysis
) -> list[ClaimState]:
    """Each distinct comparison's state (see :class:`ClaimState`); ``results`` are tested with the
    anytime-valid sequence and corrected. A comparison that rows of several tables repeat is decided
    when it is decided in every family it belongs to."""
    open_somewhere = {hypothesis_of(r) for r in results if r.corrected_verdict not in ("holds", "reversed")}
    out = []
    for r in _distinct(results):
        s = r.summary
        at = effect.of(r.claim.paper_delta)
        judged = max(at, abs(s.mean or 0.0))
        needed = None if s.sd is None else sequential_seeds_for_power(judged, s.sd, c=analysis.mixture_c)
        state: State = "undecided"
        why = ""
        if hypothesis_of(r) not in open_somewhere:
            state = "decided"
        elif s.n >= max_seeds:
            state = "max seeds"
        elif reason := futility(s, at, max_seeds, analysis.mixture_c):
            state, why = "futile", reason
            judged = at if reason == RULED_OUT else judged
        out.append(ClaimState(r, state, judged, needed, why))
    return out


def _line(state: ClaimState) -> str:
    r = state.result
    s = r.summary
    interval = "--"
    if s.low is not None and s.high is not None:
        interval = f"[{s.low:+.2f}, {s.high:+.2f}]"
    mean = f"{s.mean:+.2f}" if s.mean is not None else "--"
    p = f"p adj. {r.adjusted:.3f}" if r.adjusted is not None else "no p"
    if state.why == RULED_OUT:
        needed = f", inside +-{state.effect:.2f} (ruled out)"
    elif s.sd is None:
        needed = ", no spread yet"
    elif state.state != "decided":
        needed = f", ~{_seeds_text(state.seeds_needed)} at {state.effect:.2f}"
        needed += " (out of reach)" if state.why else ""
    else:
        needed = ""
    return (
        f"{state.state:10} {r.claim.spec}: {r.claim.text} ({r.claim.better} > {r.claim.worse}): "
        f"{mean} {interval}, {s.n} seeds, {p}{needed}"
    )


def decision_of(states: Sequence[ClaimState]) -> Decision:
    """The rounds' view of the states: the undecided ones' cells, fewest seeds needed first."""
    undecided = [s for s in states if s.state == "undecided"]
    undecided.sort(key=lambda s: (s.seeds_needed is None, s.seeds_needed or 0, s.result.summary.n))
    needs = tuple(
        ClaimNeed(
            cells=((s.result.claim.spec, s.result.claim.better), (s.result.claim.spec, s.result.claim.worse)),
            seeds=s.result.summary.n,
            seeds_needed=s.seeds_needed,
            label=f"{s.result.claim.spec}: {s.result.claim.text}",
        )
        for s in undecided
    )
    counts: dict[str, int] = {}
    for s in states:
        counts[s.state] = counts.get(s.state, 0) + 1
    return Decision(needs, tuple(_line(s) for s in states), counts, [s.to_json() for s in states])


def decider(
    build: Callable[[], list[ClaimResult]], effect: Effect, max_seeds: int, analysis: Analysis
) -> Decide:
    """The :data:`~harness.grid.rounds.Decide` of a grid: ``build()`` evaluates its claims from the
    store as it is now (:func:`harness.reporting.claims.build_claims` with ``analysis``)."""

    def decide() -> Decision:
        return decision_of(claim_states(build(), effect, max_seeds, analysis))

    return decide


__all__ = [
    "DEFAULT_EFFECT",
    "ClaimState",
    "Effect",
    "claim_states",
    "decider",
    "decision_of",
    "parse_effect",
    "power_lines",
]
