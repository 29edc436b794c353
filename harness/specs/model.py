"""Declarative table and plot specs: loading and validation.

A table spec (``tables/<name>.toml``) names the paper table it cites, its columns and its rows. A row
is either *quoted* (the paper's numbers only, e.g. GloVe or flow, which live outside this harness)
or a *run*: a method, its parameters and optional :class:`~harness.store.run_config.RunConfig` overrides,
together with the numbers the paper reports for it. Hyper-parameter tables use *sweeps*, a compact
form that varies one method parameter over a list of values (one run per value)::

    cites = "WhitenedCSE Table 5"            # must name a section of PAPER_TABLES.md
    title = "Number of positives"
    scores = "sts"                           # sts | transfer | stsb_dev
    columns = ["avg"]                        # score keys (see SCORE_KEYS)
    sts_aggregate = "all"                    # optional, scores = "sts": STS12-16 as all | mean | wmean
    column_labels = ["STS-Avg."]             # optional; defaults from COLUMN_LABELS

    [[rows]]                                 # a run row
    label = "SimCSE-BERT-base"
    method = "simcse"
    params = {temperature = 0.05}
    overrides = {max_steps = 0}              # RunConfig field names
    only_profiles = ["paper"]                # optional: elsewhere the row is shown quoted-only
    profile_overrides = {paper = {model = "bert-large-uncased"}}
    paper = [76.25]

    [[rows]]                                 # a quoted row
    label = "GloVe embeddings (avg.)"
    quoted = true
    paper = [61.32]

    [[sweeps]]                               # the compact form: one run per value
    label = "STS-Avg."
    header = "Positive Number"
    method = "whitenedcse"
    vary = "num_positives"
    values = [2, 3, 4, 5]
    paper = [77.81, 78.78, 78.65, 78.74]

Rows and sweeps also accept ``section`` (rows of one section are ranked together for bold and
underline, and sections are separated by a rule), ``ours = true`` (the paper's own method, marked
with ``*`` as the paper does) and ``note``; a row may also cite another paper table than the spec's
(``cites``), so a demo table can mix rows of several papers.

A plot spec (``plots/<name>.toml``) has ``title``, ``kind`` (``trajectory``: alignment and
uniformity against the training step; ``joint``: alignment on x, uniformity on y) and ``[[series]]``
entries shaped like run rows (``label``, ``method``, ``params``, ``overrides``).

Every mistake (an unknown key, an unknown method or parameter, a paper row of the wrong length)
raises :class:`~harness.errors.ConfigError` naming the spec file and the key, before anything runs.
Whether a parameter value suits a profile's encoder (a group count must divide the hidden size) is
checked later, per profile, by :mod:`harness.specs.cells`: such cells render as ``n/a``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from methods import build_params

if TYPE_CHECKING:
    from harness.specs.claim import Claim
    from methods.params import MethodParams


STS_AGGREGATES: tuple[str, ...] = ("all", "mean", "wmean")
"""SentEval's STS12-16 aggregates a table can show (records: ``final.sts_aggregates``)."""


@dataclass(frozen=True)
class RunSpec:
    """What one cell of a table needs run (before a profile and a seed are chosen).

    Attributes:
        method: registered method name.
        params: method parameters (only the ones the spec sets; the rest keep their defaults).
        overrides: RunConfig overrides that apply under every profile.
        only_profiles: profiles under which the row runs at all (None = every profile).
        profile_overrides: extra overrides per profile name (e.g. a larger model under ``paper``).
        typed: the method's typed parameters (a :class:`~methods.params.MethodParams`), built from
            ``params`` and validated for every encoder (``validate(None)``) once, when the spec is
            made; the grid uses them as they are.
            ``built`` passes one made already from the same ``params`` (the spec loader's).

    Raises:
        ConfigError: an unknown method or parameter, or a value wrong under every encoder.
    """

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)
    only_profiles: tuple[str, ...] | None = None
    profile_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    typed: MethodParams = field(init=False, repr=False, compare=False)
    built: InitVar[MethodParams | None] = None

    def __post_init__(self, built: MethodParams | None) -> None:
        object.__setattr__(
            self, "typed", built if built is not None else typed_params(self.method, self.params)
        )

    def runs_under(self, profile: str) -> bool:
        """Whether this row is run under ``profile`` (otherwise it is shown quoted-only)."""
        return self.only_profiles is None or profile in self.only_profiles

    def overrides_for(self, profile: str) -> dict[str, Any]:
        """The row's RunConfig overrides under ``profile`` (profile-specific ones win)."""
        out = dict(self.overrides)
        out.update(self.profile_overrides.get(profile, {}))
        return out

    def with_param(self, key: str, value: Any, built: MethodParams | None = None) -> RunSpec:
        """A copy with one method parameter set (how a sweep makes its cells), typed anew."""
        return dataclasses.replace(self, params={**self.params, key: value}, built=built)


def typed_params(method: str, params: Mapping[str, Any]) -> MethodParams:
    """``params`` as the method's typed parameters, checked for what is wrong under every encoder."""

    typed = build_params(method, dict(params))
    typed.validate(None)
    return typed


@dataclass(frozen=True)
class Row:
    """One row of a table: quoted (``run is None``) or a run, with the paper's numbers."""

    label: str
    paper: tuple[float, ...]
    run: RunSpec | None = None
    section: str = ""
    ours: bool = False
    note: str = ""
    cites: str = ""

    @property
    def quoted(self) -> bool:
        return self.run is None


@dataclass(frozen=True)
class Sweep:
    """The compact form: one run per value of one method parameter, on a single metric."""

    label: str
    header: str
    vary: str
    values: tuple[Any, ...]
    paper: tuple[float, ...]
    run: RunSpec
    section: str = ""
    ours: bool = False
    note: str = ""
    runs: tuple[RunSpec, ...] = ()
    """One run per value (with its record), made once; empty = made from ``run`` and ``values``."""

    def __post_init__(self) -> None:
        if not self.runs:
            object.__setattr__(self, "runs", tuple(self.run.with_param(self.vary, v) for v in self.values))

    def cells(self) -> list[tuple[Any, RunSpec]]:
        """``(value, run)`` for every value of the sweep."""
        return list(zip(self.values, self.runs, strict=True))


@dataclass(frozen=True)
class TableSpec:
    """A validated table spec."""

    name: str
    path: Path
    cites: str
    title: str
    scores: str
    columns: tuple[str, ...]
    column_labels: tuple[str, ...]
    rows: tuple[Row, ...] = ()
    sweeps: tuple[Sweep, ...] = ()
    notes: tuple[str, ...] = ()
    claims: tuple[Claim, ...] = ()
    sts_aggregate: str = "all"

    def run_cells(self) -> list[tuple[str, RunSpec]]:
        """Every ``(cell key, run)`` of the table, in display order; keys are unique per table."""
        out: list[tuple[str, RunSpec]] = [(r.label, r.run) for r in self.rows if r.run is not None]
        for s in self.sweeps:
            out.extend((sweep_cell_key(s, v), run) for v, run in s.cells())
        return out


@dataclass(frozen=True)
class Series:
    """One line of a plot: a run (same shape as a table's run row)."""

    label: str
    run: RunSpec


@dataclass(frozen=True)
class PlotSpec:
    """A validated plot spec."""

    name: str
    path: Path
    title: str
    kind: str
    series: tuple[Series, ...]
    notes: tuple[str, ...] = ()


def sweep_cell_key(sweep: Sweep, value: Any) -> str:
    """The cell key of one sweep value (``label [vary=value]``)."""
    return f"{sweep.label} [{sweep.vary}={format_value(value)}]"


def metric_name(scores: str, column: str, label: str) -> str:
    """The score a claim compares, in words: ``STS avg``, ``transfer avg``, ``STS-B dev``, or the
    column's label (``STS-B``, ``MR``)."""
    if scores == "stsb_dev":
        return "STS-B dev"
    if column == "avg":
        return f"{'STS' if scores == 'sts' else scores} avg"
    return label


def _cell_parts(spec: TableSpec, key: str) -> tuple[str, str, str] | None:
    """``(sweep label, header, value)`` of a sweep cell key, None for a row label."""
    for sweep in spec.sweeps:
        for value in sweep.values:
            if sweep_cell_key(sweep, value) == key:
                return sweep.label, sweep.header, format_value(value)
    return None


def pair_name(spec: TableSpec, better: str, worse: str) -> str:
    """Two cells as a reader names them: row labels as they are; sweep cells by their header and
    value (``m = 0.9 > m = 0.5`` within one sweep; ``shuffled > w/o shuffled at Group size = 32``
    for two sweeps at one value; else ``label (header = value)`` on each side)."""
    b, w = _cell_parts(spec, better), _cell_parts(spec, worse)
    if b is None or w is None:
        named = [
            key if part is None else f"{part[0]} ({part[1]} = {part[2]})"
            for key, part in ((better, b), (worse, w))
        ]
        return " > ".join(named)
    if b[:2] == w[:2]:
        return f"{b[1]} = {b[2]} > {w[1]} = {w[2]}"
    if b[1:] == w[1:]:
        return f"{b[0]} > {w[0]} at {b[1]} = {b[2]}"
    return f"{b[0]} ({b[1]} = {b[2]}) > {w[0]} ({w[1]} = {w[2]})"


def format_value(value: Any) -> str:
    """A parameter value as the papers print it (``1`` not ``1.0``, ``0.02`` not ``2e-02``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def paper_value(spec: TableSpec, key: str, column: str) -> float:
    """The paper's number for a cell key (row label or sweep cell key) in ``column``."""
    col = spec.columns.index(column)
    for row in spec.rows:
        if row.label == key:
            return row.paper[col]
    for sweep in spec.sweeps:
        for value, number in zip(sweep.values, sweep.paper, strict=True):
            if sweep_cell_key(sweep, value) == key:
                return number
    raise KeyError(key)
