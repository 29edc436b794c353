"""What a claim's test came to, in the words every output uses.

A claim whose verdict after correction holds or is reversed is decided. One that is not decided is
one of three things, and the outputs say which (:func:`open_outcome`):

* ``ruled out``: its interval (the 95 % t interval, or the confidence sequence) lies inside
  ``(-E, +E)``, ``E`` the smallest difference the user cares about (``--effect``): a difference that
  large is excluded on either side, evidence against the claim;
* ``not enough seeds`` (only where seeds are added until decided, ``harness grid --until-decided``):
  the grid cannot reach a verdict on a difference of ``E`` at this noise within the seeds it may
  still give (``--max-seeds``, or the budget when it ended the grid): no evidence either way.
  Judged by :func:`harness.stats.sequential.cannot_reach`, on a lower confidence bound of the
  paired sd so that a noisy first estimate does not stop a claim the seeds could decide;
* ``undecided``: still running (seeds may decide it).

With a fixed number of seeds nothing is "still running": a claim neither decided nor ruled out is
``inconclusive``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.stats.paired import Summary

RULED_OUT = "ruled out"
NOT_ENOUGH_SEEDS = "not enough seeds"
UNDECIDED = "undecided"
INCONCLUSIVE = "inconclusive"
DECIDED = ("holds", "reversed")
DEFAULT_EFFECT = "50%"


@dataclass(frozen=True)
class Effect:
    """The smallest difference worth deciding: ``points`` (score points) for every claim, or
    ``share`` of each claim's paper delta.

    Raises:
        ConfigError: ``points`` not a finite number > 0, or (without points) ``share`` not in
            (0, 10], i.e. 0 to 1000 % (the one rule; :func:`parse_effect` reads ``--effect`` into it).
    """

    points: float | None = None
    share: float | None = 0.5

    def __post_init__(self) -> None:
        if self.points is not None:
            ok = math.isfinite(self.points) and self.points > 0
        else:
            ok = self.share is not None and math.isfinite(self.share) and 0 < self.share <= 10
        if not ok:
            raise ConfigError(
                "--effect must be a difference in score points > 0 (e.g. 0.3) or a share of each claim's "
                f"paper delta (e.g. 50%), got {self.argument!r}"
            )

    def of(self, paper_delta: float) -> float:
        """The effect for a claim with this paper delta (>= 0; > 0 where the delta is not 0)."""
        if self.points is not None:
            return self.points
        return abs(paper_delta) * (self.share or 0.0)

    @property
    def text(self) -> str:
        if self.points is not None:
            return f"{self.points:g} points"
        return f"{100 * (self.share or 0.0):g}% of the paper's delta"

    @property
    def argument(self) -> str:
        """The ``--effect`` value that gives this effect back (``0.3``, ``50%``)."""
        if self.points is not None:
            return f"{self.points:g}"
        return f"{100 * (self.share or 0.0):g}%"


def parse_effect(text: str | None) -> Effect:
    """``--effect``: ``0.3`` (score points) or ``50%`` (of each claim's paper delta); also the
    :attr:`Effect.text` form a runs folder's ``sequential.json`` recorded (``50% of the paper's
    delta``, ``0.3 points``).

    Raises:
        ConfigError: not a number > 0 or a percentage in (0, 1000] (:class:`Effect`'s rule), naming
            the text as given.
    """
    value = (text or DEFAULT_EFFECT).strip()
    value = re.sub(r"\s*(of the paper's delta|points)$", "", value)
    share = re.fullmatch(r"([0-9.eE+-]+)\s*%", value)
    try:
        number = float(share.group(1) if share else value)
    except ValueError:
        number = math.nan
    try:
        return Effect(share=number / 100) if share else Effect(points=number, share=None)
    except ConfigError:
        raise ConfigError(
            f"--effect must be a difference in score points > 0 (e.g. 0.3) or a share of each claim's "
            f"paper delta (e.g. 50%), got {text!r}"
        ) from None


def ruled_out(summary: Summary, effect: float) -> bool:
    """The interval lies inside ``(-effect, +effect)`` (never for ``effect <= 0``: that interval is
    empty)."""
    low, high = summary.low, summary.high
    return low is not None and high is not None and -effect < low and high < effect


def open_outcome(
    summary: Summary,
    effect: float,
    max_seeds: int | None = None,
    mixture_c: float | None = None,
) -> str:
    """What a claim that is not decided is: ``ruled out``, and, where seeds are added until decided
    (``max_seeds`` and the sequence's ``mixture_c`` given), ``not enough seeds`` or ``undecided``;
    else ``inconclusive``. A claim without an interval keeps its verdict (``1 seed``, ``no data``,
    ``not run``)."""
    from harness.stats.sequential import MIXTURE_C, cannot_reach

    if summary.verdict not in (*DECIDED, INCONCLUSIVE):
        return summary.verdict
    if ruled_out(summary, effect):
        return RULED_OUT
    if max_seeds is None:
        return INCONCLUSIVE
    if cannot_reach(summary, effect, max_seeds, MIXTURE_C if mixture_c is None else mixture_c):
        return NOT_ENOUGH_SEEDS
    return UNDECIDED


def outcome(corrected_verdict: str, open_: str) -> str:
    """The outcome a reader sees: the corrected verdict where it holds or is reversed, else what the
    claim is without it (:func:`open_outcome`)."""
    return corrected_verdict if corrected_verdict in DECIDED else open_


__all__ = [
    "DECIDED",
    "DEFAULT_EFFECT",
    "INCONCLUSIVE",
    "NOT_ENOUGH_SEEDS",
    "RULED_OUT",
    "UNDECIDED",
    "Effect",
    "open_outcome",
    "outcome",
    "parse_effect",
    "ruled_out",
]
