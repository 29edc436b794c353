"""Reading a table or plot spec file: every key checked, every error naming its file and place."""

from __future__ import annotations

import dataclasses
import itertools
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.config.inputs import SPEC_MAX_BYTES, read_input_text
from harness.config.profiles import PROFILES
from harness.config.settings import OVERRIDABLE
from harness.errors import ConfigError, did_you_mean
from harness.evaluation.tasks import COLUMN_LABELS, SCORE_KEYS, SCORE_RANGES
from harness.specs.claim import Claim, paper_of
from harness.specs.model import (
    STS_AGGREGATES,
    PlotSpec,
    Row,
    RunSpec,
    Series,
    Sweep,
    TableSpec,
    metric_name,
    pair_name,
    paper_value,
    sweep_cell_key,
    typed_params,
)

if TYPE_CHECKING:
    from harness.specs.claim import Claim
    from methods.params import MethodParams

# SCORE_KEYS (which record keys a table can show: ``final.sts.*``, ``final.transfer.*`` or
# ``best_stsb_dev``) and COLUMN_LABELS come from the task registry, kept current (imported above).
PLOT_KINDS: tuple[str, ...] = ("trajectory", "joint")


RESERVED_OVERRIDES: frozenset[str] = frozenset({"seed"})
"""RunConfig fields a spec may not override (beyond the ones no override may set): the grid sets seeds."""


_TABLE_KEYS = {
    "cites",
    "title",
    "scores",
    "columns",
    "column_labels",
    "notes",
    "rows",
    "sweeps",
    "sts_aggregate",
    "claims",
}


_CLAIM_KEYS = {"better", "worse", "order", "best", "each", "over", "column", "text"}


_RUN_KEYS = {"method", "params", "overrides", "only_profiles", "profile_overrides"}


_COMMON_ROW_KEYS = {"label", "paper", "section", "ours", "note"}


_ROW_KEYS = _COMMON_ROW_KEYS | _RUN_KEYS | {"quoted", "cites"}


_SWEEP_KEYS = _COMMON_ROW_KEYS | _RUN_KEYS | {"header", "vary", "values"}


_PLOT_KEYS = {"title", "kind", "series", "notes"}


_SERIES_KEYS = {"label"} | _RUN_KEYS


# -- validation helpers ------------------------------------------------------------------------------
class _Ctx:
    """Where we are in a spec file, for error messages."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {where}: {message}")

    def check_keys(self, table: Mapping[str, Any], allowed: set[str], where: str) -> None:
        for key in table:
            if key not in allowed:
                raise self.error(
                    f"{where}.{key}" if where else key,
                    f"unknown key {key!r}{did_you_mean(key, sorted(allowed))}; "
                    f"valid keys: {', '.join(sorted(allowed))}",
                )

    def require(self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if key not in table:
            raise self.error(f"{where}.{key}" if where else key, "missing required key")
        return self.typed(table[key], kind, f"{where}.{key}" if where else key)

    def typed(self, value: Any, kind: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(value, kind) or (kind in (int, float, (int, float)) and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.error(where, f"expected {names}, got {type(value).__name__} {value!r}")
        return value

    def numbers(self, value: Any, where: str, length: int, scores: str) -> tuple[float, ...]:
        """A paper's numbers: one per column, each finite and on the scale of ``scores``."""
        self.typed(value, list, where)
        out = tuple(float(self.typed(v, (int, float), f"{where}[{i}]")) for i, v in enumerate(value))
        low, high = SCORE_RANGES[scores]
        for i, number in enumerate(out):
            if not math.isfinite(number):  # TOML has nan and inf: a paper quotes neither
                raise self.error(f"{where}[{i}]", f"expected a finite number, got {number}")
            if not low <= number <= high:
                raise self.error(
                    f"{where}[{i}]",
                    f"{number:g} is outside {low:g} .. {high:g}, the range of {scores} scores",
                )
        if len(out) != length:
            raise self.error(where, f"expected {length} numbers (one per column), got {len(out)}")
        return out


def _runconfig_fields() -> set[str]:
    return set(OVERRIDABLE)


def _profiles() -> set[str]:
    return set(PROFILES)


def _record(ctx: _Ctx, method: str, params: Mapping[str, Any], where: str) -> MethodParams:
    """:func:`typed_params`: unknown methods, unknown parameter keys and values bad under every
    encoder raise here, located at ``where`` in the spec file."""
    try:
        return typed_params(method, params)
    except ConfigError as exc:
        raise ctx.error(where, str(exc)) from None


def _check_overrides(ctx: _Ctx, overrides: Mapping[str, Any], where: str) -> None:
    fields = _runconfig_fields() - RESERVED_OVERRIDES
    for key in overrides:
        if key not in fields:
            hint = did_you_mean(key, sorted(fields))
            raise ctx.error(f"{where}.{key}", f"unknown RunConfig override {key!r}{hint}")


def _parse_run(ctx: _Ctx, raw: Mapping[str, Any], where: str) -> RunSpec:
    method = ctx.require(raw, "method", str, where)
    params = dict(ctx.typed(raw.get("params", {}), dict, f"{where}.params"))
    overrides = dict(ctx.typed(raw.get("overrides", {}), dict, f"{where}.overrides"))
    record = _record(ctx, method, params, f"{where}.params")
    _check_overrides(ctx, overrides, f"{where}.overrides")
    profiles = _profiles()
    only: tuple[str, ...] | None = None
    if "only_profiles" in raw:
        values = ctx.typed(raw["only_profiles"], list, f"{where}.only_profiles")
        only = tuple(ctx.typed(v, str, f"{where}.only_profiles") for v in values)
        for p in only:
            if p not in profiles:
                raise ctx.error(f"{where}.only_profiles", f"unknown profile {p!r}; known: {sorted(profiles)}")
    per_profile = ctx.typed(raw.get("profile_overrides", {}), dict, f"{where}.profile_overrides")
    profile_overrides: dict[str, dict[str, Any]] = {}
    for p, ov in per_profile.items():
        if p not in profiles:
            raise ctx.error(
                f"{where}.profile_overrides.{p}", f"unknown profile {p!r}; known: {sorted(profiles)}"
            )
        profile_overrides[p] = dict(ctx.typed(ov, dict, f"{where}.profile_overrides.{p}"))
        _check_overrides(ctx, profile_overrides[p], f"{where}.profile_overrides.{p}")
    return RunSpec(method, params, overrides, only, profile_overrides, built=record)


def _common(ctx: _Ctx, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    return {
        "label": ctx.require(raw, "label", str, where),
        "section": ctx.typed(raw.get("section", ""), str, f"{where}.section"),
        "ours": ctx.typed(raw.get("ours", False), bool, f"{where}.ours"),
        "note": ctx.typed(raw.get("note", ""), str, f"{where}.note"),
    }


def _read_toml(path: Path, what: str) -> dict[str, Any]:
    """A spec file's TOML, read as every input file is (:func:`~harness.config.inputs.read_input_text`)."""
    text = read_input_text(path, what, SPEC_MAX_BYTES, ConfigError)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def load_table_spec(path: str | Path) -> TableSpec:
    """Load and validate one table spec; raise ConfigError naming the file and the key."""
    path = Path(path)
    raw = _read_toml(path, "table spec")
    ctx = _Ctx(path)
    ctx.check_keys(raw, _TABLE_KEYS, "")
    cites = ctx.require(raw, "cites", str, "")
    title = ctx.require(raw, "title", str, "")
    scores, columns, labels = _parse_columns(ctx, raw)
    notes = tuple(ctx.typed(n, str, "notes") for n in ctx.typed(raw.get("notes", []), list, "notes"))
    sts_aggregate = _parse_sts_aggregate(ctx, raw, scores)
    rows = _parse_rows(ctx, raw, len(columns), cites, scores)
    sweeps = _parse_sweeps(ctx, raw, len(columns), scores)
    if not rows and not sweeps:
        raise ctx.error("rows", "a table needs [[rows]] or [[sweeps]]")
    spec = TableSpec(
        name=path.stem,
        path=path,
        cites=cites,
        title=title,
        scores=scores,
        columns=columns,
        column_labels=labels,
        rows=rows,
        sweeps=sweeps,
        notes=notes,
        sts_aggregate=sts_aggregate,
    )
    keys = [k for k, _ in spec.run_cells()] + [r.label for r in spec.rows if r.quoted]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ctx.error("rows", f"duplicate row labels: {dupes}")
    claims = _parse_claims(ctx, spec, ctx.typed(raw.get("claims", []), list, "claims"))
    return dataclasses.replace(spec, claims=tuple(claims))


def _parse_columns(ctx: _Ctx, raw: Mapping[str, Any]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """``scores``, ``columns`` (score keys of that set) and their labels (given or the defaults)."""
    scores = ctx.require(raw, "scores", str, "")
    if scores not in SCORE_KEYS:
        raise ctx.error("scores", f"unknown score set {scores!r}; choose one of {', '.join(SCORE_KEYS)}")
    columns = tuple(ctx.typed(c, str, "columns") for c in ctx.require(raw, "columns", list, ""))
    if not columns:
        raise ctx.error("columns", "at least one column is needed")
    for c in columns:
        if c not in SCORE_KEYS[scores]:
            raise ctx.error(
                "columns",
                f"unknown column {c!r}{did_you_mean(c, SCORE_KEYS[scores])} for scores = {scores!r}; "
                f"valid: {SCORE_KEYS[scores]}",
            )
    if "column_labels" in raw:
        labels = tuple(
            ctx.typed(c, str, "column_labels") for c in ctx.typed(raw["column_labels"], list, "column_labels")
        )
        if len(labels) != len(columns):
            raise ctx.error("column_labels", f"expected {len(columns)} labels, got {len(labels)}")
    else:
        labels = tuple(COLUMN_LABELS.get(c, c) for c in columns)
    return scores, columns, labels


def _parse_sts_aggregate(ctx: _Ctx, raw: Mapping[str, Any], scores: str) -> str:
    sts_aggregate = ctx.typed(raw.get("sts_aggregate", "all"), str, "sts_aggregate")
    if sts_aggregate not in STS_AGGREGATES:
        raise ctx.error(
            "sts_aggregate", f"unknown aggregate {sts_aggregate!r}; choose one of {', '.join(STS_AGGREGATES)}"
        )
    if sts_aggregate != "all" and scores != "sts":
        raise ctx.error("sts_aggregate", f'only a scores = "sts" table has STS aggregates, not {scores!r}')
    return str(sts_aggregate)


def _parse_rows(
    ctx: _Ctx, raw: Mapping[str, Any], n_columns: int, cites: str, scores: str
) -> tuple[Row, ...]:
    """The ``[[rows]]``: quoted (numbers only) or runs; ``paper`` has one number per column."""
    rows: list[Row] = []
    for i, r in enumerate(ctx.typed(raw.get("rows", []), list, "rows")):
        where = f"rows[{i}]"
        ctx.typed(r, dict, where)
        ctx.check_keys(r, _ROW_KEYS, where)
        common = _common(ctx, r, where)
        paper = ctx.numbers(ctx.require(r, "paper", list, where), f"{where}.paper", n_columns, scores)
        quoted = ctx.typed(r.get("quoted", False), bool, f"{where}.quoted")
        common["cites"] = ctx.typed(r.get("cites", cites), str, f"{where}.cites")
        if quoted:
            extra = sorted(set(r) & _RUN_KEYS)
            if extra:
                raise ctx.error(f"{where}.{extra[0]}", "a quoted row takes no run keys")
            rows.append(Row(paper=paper, run=None, **common))
        else:
            if "method" not in r:
                raise ctx.error(f"{where}.method", "missing: a row is either quoted = true or names a method")
            rows.append(Row(paper=paper, run=_parse_run(ctx, r, where), **common))
    return tuple(rows)


def _parse_sweeps(ctx: _Ctx, raw: Mapping[str, Any], n_columns: int, scores: str) -> tuple[Sweep, ...]:
    """The ``[[sweeps]]``: one run per value, each value's typed parameters made (and checked) here."""
    sweeps: list[Sweep] = []
    if "sweeps" in raw and n_columns != 1:
        raise ctx.error("columns", "a table with sweeps shows one metric: give exactly one column")
    for i, s in enumerate(ctx.typed(raw.get("sweeps", []), list, "sweeps")):
        where = f"sweeps[{i}]"
        ctx.typed(s, dict, where)
        ctx.check_keys(s, _SWEEP_KEYS, where)
        common = _common(ctx, s, where)
        header = ctx.require(s, "header", str, where)
        vary = ctx.require(s, "vary", str, where)
        values = tuple(ctx.require(s, "values", list, where))
        if not values:
            raise ctx.error(f"{where}.values", "at least one value is needed")
        paper = ctx.numbers(ctx.require(s, "paper", list, where), f"{where}.paper", len(values), scores)
        run = _parse_run(ctx, s, where)
        if vary in run.params:
            raise ctx.error(f"{where}.vary", f"{vary!r} is both varied and fixed in params")
        runs = tuple(
            run.with_param(vary, v, _record(ctx, run.method, {**run.params, vary: v}, f"{where}.values[{j}]"))
            for j, v in enumerate(values)
        )
        sweeps.append(
            Sweep(header=header, vary=vary, values=values, paper=paper, run=run, runs=runs, **common)
        )
    return tuple(sweeps)


def _parse_claims(ctx: _Ctx, spec: TableSpec, raw: list[Any]) -> list[Claim]:
    """Expand the ``[[claims]]`` forms into pairwise claims (see :mod:`harness.stats.paired`).

    Forms: ``better``/``worse`` (one pair); ``order = [a, b, c]`` (a > b > c: consecutive pairs);
    ``best = key`` (the cell beats every other cell of its sweep); ``each``/``over`` (sweep ``each``
    beats sweep ``over`` at every value both have). ``column`` defaults to the spec's last column;
    ``text`` describes the claim.
    """

    run_keys = [k for k, _ in spec.run_cells()]
    out: list[Claim] = []
    for i, entry in enumerate(raw):
        where = f"claims[{i}]"
        ctx.typed(entry, dict, where)
        ctx.check_keys(entry, _CLAIM_KEYS, where)
        column = ctx.typed(entry.get("column", spec.columns[-1]), str, f"{where}.column")
        if column not in spec.columns:
            raise ctx.error(f"{where}.column", f"{column!r} is not a column of this table {spec.columns}")
        text = ctx.typed(entry.get("text", ""), str, f"{where}.text")
        for better, worse in _claim_pairs(ctx, spec, entry, where):
            for key in (better, worse):
                if key not in run_keys:
                    quoted = any(r.label == key and r.quoted for r in spec.rows)
                    why = (
                        "is a quoted row (no run to measure)" if quoted else "is not a run cell of this table"
                    )
                    raise ctx.error(where, f"{key!r} {why}{did_you_mean(key, run_keys)}")
            delta = paper_value(spec, better, column) - paper_value(spec, worse, column)
            row_cites = next((r.cites for r in spec.rows if r.label == better and r.cites), spec.cites)
            pair = pair_name(spec, better, worse)
            label = spec.column_labels[spec.columns.index(column)]
            out.append(
                Claim(
                    spec.name,
                    better,
                    worse,
                    column,
                    round(delta, 6),
                    text or pair,
                    paper=paper_of(row_cites),
                    pair=pair,
                    metric=metric_name(spec.scores, column, label),
                    cites=spec.cites,
                    title=spec.title,
                )
            )
    return out


def _claim_pairs(ctx: _Ctx, spec: TableSpec, entry: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """The ``(better, worse)`` cell pairs of one claim entry, whichever of the four forms it uses."""
    forms = [k for k in ("better", "order", "best", "each") if k in entry]
    if len(forms) != 1:
        raise ctx.error(where, "give exactly one of better/worse, order, best, or each/over")
    if "better" in entry:
        return [(ctx.require(entry, "better", str, where), ctx.require(entry, "worse", str, where))]
    if "order" in entry:
        listed = ctx.typed(entry["order"], list, f"{where}.order")
        order = [ctx.typed(k, str, f"{where}.order") for k in listed]
        if len(order) < 2:
            raise ctx.error(f"{where}.order", "an order needs at least two cells")
        return list(itertools.pairwise(order))
    if "best" in entry:
        best = ctx.typed(entry["best"], str, f"{where}.best")
        sweep = next((s for s in spec.sweeps if best in {sweep_cell_key(s, v) for v in s.values}), None)
        if sweep is None:
            raise ctx.error(f"{where}.best", f"{best!r} is not a sweep cell of this table")
        return [(best, sweep_cell_key(sweep, v)) for v in sweep.values if sweep_cell_key(sweep, v) != best]
    each = ctx.typed(entry["each"], str, f"{where}.each")
    over = ctx.require(entry, "over", str, where)
    by_label = {s.label: s for s in spec.sweeps}
    for name in (each, over):
        if name not in by_label:
            raise ctx.error(where, f"{name!r} is not a sweep label of this table")
    a, b = by_label[each], by_label[over]
    return [(sweep_cell_key(a, v), sweep_cell_key(b, v)) for v in a.values if v in b.values]


def load_plot_spec(path: str | Path) -> PlotSpec:
    """Load and validate one plot spec; raise ConfigError naming the file and the key."""
    path = Path(path)
    raw = _read_toml(path, "plot spec")
    ctx = _Ctx(path)
    ctx.check_keys(raw, _PLOT_KEYS, "")
    title = ctx.require(raw, "title", str, "")
    kind = ctx.require(raw, "kind", str, "")
    if kind not in PLOT_KINDS:
        raise ctx.error("kind", f"unknown plot kind {kind!r}; choose one of {', '.join(PLOT_KINDS)}")
    notes = tuple(ctx.typed(n, str, "notes") for n in ctx.typed(raw.get("notes", []), list, "notes"))
    series: list[Series] = []
    for i, s in enumerate(ctx.require(raw, "series", list, "")):
        where = f"series[{i}]"
        ctx.typed(s, dict, where)
        ctx.check_keys(s, _SERIES_KEYS, where)
        series.append(Series(ctx.require(s, "label", str, where), _parse_run(ctx, s, where)))
    if not series:
        raise ctx.error("series", "a plot needs at least one [[series]]")
    return PlotSpec(name=path.stem, path=path, title=title, kind=kind, series=tuple(series), notes=notes)
