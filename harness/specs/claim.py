"""A claim of a table spec: one cell beats another on one column, by the paper's delta."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One directional claim of a table: ``better`` beats ``worse`` on ``column``.

    Attributes:
        spec: the table spec's name.
        better, worse: cell keys (row labels, or sweep cell keys ``label [vary=value]``).
        column: the score column compared (a key of the spec's columns).
        paper_delta: ``paper(better) - paper(worse)`` from the spec's quoted numbers.
        text: a one-line statement of the claim.
        paper: the paper whose claim it is: the paper its ``better`` cell cites (a row's own
            ``cites``, else the spec's), e.g. ``WhitenedCSE`` for cpu_demo's WhitenedCSE row; the
            ``--family paper`` of error control across claims.
        pair: the two cells as a reader names them (``m = 0.9 > m = 0.5``; ``STS-Avg. (shuffled) >
            w/o shuffled at Group size = 32``), see :func:`harness.specs.model.pair_name`.
        metric: the compared score in words (``STS avg``, ``transfer avg``, ``STS-B dev``, ``MR``).
        cites: the paper table the claim comes from (``WhitenedCSE Table 4``).
        title: the spec's title.
        paper_pair: the pair as the paper's rows name it, where :attr:`pair` names the encoder that
            was measured instead (:func:`harness.reporting.claims.build_claims`); else empty.
    """

    spec: str
    better: str
    worse: str
    column: str
    paper_delta: float
    text: str
    paper: str = ""
    pair: str = ""
    metric: str = ""
    cites: str = ""
    title: str = ""
    paper_pair: str = ""

    @property
    def label(self) -> str:
        """``<pair> on <metric>``: what names this claim's row wherever it is shown (unique within
        its spec, tested), the pair of cell keys where the spec gave no readable name."""
        pair = self.pair or f"{self.better} > {self.worse}"
        return f"{pair} on {self.metric}" if self.metric else pair


def paper_of(cites: str) -> str:
    """The paper a ``cites`` string names: ``"SimCSE++ Table 3"`` -> ``"SimCSE++"``."""
    return cites.split(" Table", 1)[0].strip()
