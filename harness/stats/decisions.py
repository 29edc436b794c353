"""The claims' side of ``harness grid --until-decided``, and the seeds a claim needs for 80 % power.

* the smallest difference the user cares about (``--effect``): score points, or a share of each
  claim's paper delta (:class:`~harness.stats.outcomes.Effect`, default half of it; docs/guide.md
  says why);
* :func:`power_lines`: per undecided claim, the seeds its test needs for 80 % power at the paper's
  delta and at the effect, from the observed paired sd (``harness claims``, ``harness grid
  --dry-run``);
* :func:`claim_states` / :func:`decider`: each distinct comparison's state after a round (decided
  after correction, ruled out, not enough seeds, undecided), the cells the undecided ones compare,
  most promising first, for :mod:`harness.grid.rounds`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.stats.correction import Analysis, hypothesis_of
from harness.stats.outcomes import NOT_ENOUGH_SEEDS, RULED_OUT, UNDECIDED, Effect
from harness.stats.paired import POWER, SEEDS_SEARCH_MAX, ClaimResult, seeds_for_power
from harness.stats.sequential import SD_BOUND, sd_lower_bound, seeds_within_reach, sequential_seeds_for_power

State = Literal["decided", "ruled out", "not enough seeds", "undecided"]
STATES: tuple[State, ...] = ("decided", "ruled out", "not enough seeds", "undecided")


CellKey = tuple[str, str]
"""``(spec, key)``: where one cell of a table stands (the cell itself: :class:`harness.specs.cells.Cell`)."""


@dataclass(frozen=True)
class ClaimNeed:
    """An undecided claim as the rounds see it.

    Attributes:
        cells: the cells it compares.
        seeds: the seeds it has now.
        seeds_needed: the seeds expected to decide it (80 % power at the effect that matters), None
            where unknown (fewer than two seeds).
        label: ``spec: text`` for the lines.
    """

    cells: tuple[CellKey, ...]
    seeds: int
    seeds_needed: int | None
    label: str = ""


@dataclass(frozen=True)
class Decision:
    """What the claims' statistics say after a round.

    Attributes:
        needs: the undecided claims, most promising first.
        lines: every claim's state, to print.
        counts: claims per state (``decided``, ``ruled out``, ``not enough seeds``, ``undecided``).
        claims: every claim's state as JSON (for :data:`SEQUENTIAL_FILE`).
    """

    needs: tuple[ClaimNeed, ...] = ()
    lines: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    claims: Sequence[Mapping[str, Any]] = ()


class Decide(Protocol):
    """The claims' statistics as the rounds call them: ``decide()`` after each round;
    ``decide(stopped=why)`` when the grid stops with claims undecided (its budget), which then have
    not enough seeds for that reason."""

    def __call__(self, stopped: str = "") -> Decision: ...


def _seeds(delta: float, sd: float, analysis: Analysis) -> int | None:
    if analysis.sequential:
        return sequential_seeds_for_power(delta, sd, c=analysis.mixture_c)
    return seeds_for_power(delta, sd)


def _seeds_text(seeds: int | None) -> str:
    return f"over {SEEDS_SEARCH_MAX:,} seeds" if seeds is None else f"{seeds} seeds"


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
        state: ``decided`` (after correction, in every family that repeats it), ``ruled out``,
            ``not enough seeds`` or ``undecided`` (:mod:`harness.stats.outcomes`).
        effect: the effect judged (the user's, or the measured mean where larger; the user's for a
            claim ruled out).
        seeds_needed: seeds for 80 % power at that effect at the observed sd (None: no spread yet,
            or over the search's maximum): the order in which undecided claims get seeds.
        detail: why it is not enough seeds (``has all 20 seeds``, ``needs 34 seeds ...``, the
            budget), else empty.
    """

    result: ClaimResult
    state: State
    effect: float
    seeds_needed: int | None
    detail: str = ""

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
            "detail": self.detail or None,
        }


def _not_enough(result: ClaimResult, effect: float, analysis: Analysis) -> str:
    """Why a claim that :func:`~harness.stats.correction.correct` found short of seeds is: it has
    ``max_seeds``, or its sequence cannot reach a verdict within them (see
    :func:`~harness.stats.sequential.cannot_reach`), or else the grid stopped (``analysis.stopped``)."""
    s, max_seeds = result.summary, int(analysis.max_seeds or 0)
    if s.n >= max_seeds:
        return f"has all {max_seeds} seeds"
    seeds = seeds_within_reach(s, effect, analysis.mixture_c)
    if s.sd is None or s.mean is None or (seeds is not None and seeds <= max_seeds):
        return analysis.stopped  # within reach: short of seeds only because the grid stopped
    judged = max(effect, abs(s.mean))
    bound = sd_lower_bound(s.sd, s.n)
    needs = f"over {SEEDS_SEARCH_MAX:,}" if seeds is None else str(seeds)
    return f"needs {needs} seeds at {judged:.2f} even at sd {bound:.2f} (its {SD_BOUND:.0%} lower bound)"


def claim_states(results: Sequence[ClaimResult], analysis: Analysis) -> list[ClaimState]:
    """Each distinct comparison's state (see :class:`ClaimState`); ``results`` are tested with the
    anytime-valid sequence and corrected under ``analysis`` (its effect, most seeds and, where the
    grid stopped, why), whose :attr:`~harness.stats.paired.ClaimResult.open_outcome` says what an
    open claim is. A comparison that rows of several tables repeat is decided when it is decided in
    every family it belongs to. A claim with no spread yet is undecided, and short of seeds for
    the grid's reason once it stopped."""
    open_somewhere = {hypothesis_of(r) for r in results if r.corrected_verdict not in ("holds", "reversed")}
    out = []
    for r in _distinct(results):
        s = r.summary
        at = analysis.effect.of(r.claim.paper_delta)
        judged = max(at, abs(s.mean or 0.0))
        needed = None if s.sd is None else sequential_seeds_for_power(judged, s.sd, c=analysis.mixture_c)
        state: State = "decided"
        detail = ""
        if hypothesis_of(r) in open_somewhere:
            state = "undecided"
            if r.open_outcome == RULED_OUT:
                state = "ruled out"
            elif r.open_outcome == NOT_ENOUGH_SEEDS:
                state, detail = "not enough seeds", _not_enough(r, at, analysis)
            elif analysis.stopped:
                state, detail = "not enough seeds", analysis.stopped
            judged = at if state == RULED_OUT else judged
        out.append(ClaimState(r, state, judged, needed, detail))
    return out


def _line(state: ClaimState) -> str:
    r = state.result
    s = r.summary
    interval = "--"
    if s.low is not None and s.high is not None:
        interval = f"[{s.low:+.2f}, {s.high:+.2f}]"
    mean = f"{s.mean:+.2f}" if s.mean is not None else "--"
    p = f"p adj. {r.adjusted:.3f}" if r.adjusted is not None else "no p"
    if state.state == RULED_OUT:
        needed = f", inside +-{state.effect:.2f}"
    elif state.state == NOT_ENOUGH_SEEDS:
        needed = f", {state.detail}"
    elif s.sd is None and state.state != "decided":
        needed = ", no spread yet"
    elif state.state != "decided":
        needed = f", ~{_seeds_text(state.seeds_needed)} at {state.effect:.2f}"
    else:
        needed = ""
    return (
        f"{state.state:16} {r.claim.spec}: {r.claim.text} ({r.claim.better} > {r.claim.worse}): "
        f"{mean} {interval}, {s.n} seeds, {p}{needed}"
    )


def decision_of(states: Sequence[ClaimState]) -> Decision:
    """The rounds' view of the states: the undecided ones' cells, fewest seeds needed first."""
    undecided = [s for s in states if s.state == UNDECIDED]
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
    counts: dict[str, int] = {word: sum(1 for s in states if s.state == word) for word in STATES}
    return Decision(needs, tuple(_line(s) for s in states), counts, [s.to_json() for s in states])


def decider(build: Callable[[Analysis], list[ClaimResult]], analysis: Analysis) -> Decide:
    """The :data:`~harness.grid.rounds.Decide` of a grid: ``build(analysis)`` evaluates its claims
    from the store as it is now (:func:`harness.reporting.claims.build_claims`) under the grid's
    ``analysis`` (sequential, its effect and most seeds), with why the grid stopped where it did."""

    def decide(stopped: str = "") -> Decision:
        now = dataclasses.replace(analysis, stopped=stopped)
        return decision_of(claim_states(build(now), now))

    return decide


__all__ = [
    "STATES",
    "ClaimState",
    "State",
    "claim_states",
    "decider",
    "decision_of",
    "power_lines",
]
