"""Cells: table specs x profile x seeds -> fully resolved run configs with stable ids.

The grid plans its runs from them and the reporters map records to them (:func:`expand`).

Every run cell of every spec is resolved with :func:`harness.store.run_config.resolve_config` under one
profile. Override precedence, lowest first: the profile, the command line's overrides (``--max-steps``
...), the row's own overrides, the row's per-profile overrides, then the seed. A row's own settings
win over the command line because they define the row (an untrained-encoder row keeps
``max_steps = 0`` whatever budget the grid is given).

A cell ends in one of three states:

* ``run``: one config per seed; tables read the records of its ``config_id`` (all seeds).
* ``profile``: the row runs under other profiles only (``only_profiles``); it is shown quoted.
* ``n/a``: its parameters do not suit this profile's encoder (e.g. 500 groups with
  ``group_scaling = "count"`` at d = 384). The cell renders as ``n/a (d=384)`` with a note giving
  the reason; the grid does not crash and does not run
  it. Mistakes that are wrong under every encoder were already rejected when the spec was loaded.
* ``unresolved``: the encoder's config cannot be read here (e.g. a hub model with no network); the
  grid reports it and goes on with the other cells.

Runs are deduplicated by run id across specs (tables that share a run share its record), in order
of first appearance. The grid marks each run with its record's status in a store
(:func:`harness.grid.plan.status.attach_status`); ``pending`` runs are those without a finished record:
missing, ``running`` (a leftover from a killed grid) and, by default, ``failed`` (retried; pass
``retry_failed=False`` to skip them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.config.settings import SEED_MAX, resolve_settings
from harness.errors import ConfigError, ModelLoadError
from harness.specs.find import load_table_specs
from harness.specs.model import RunSpec, TableSpec
from harness.store.run_config import resolve_run

if TYPE_CHECKING:
    from harness.config.settings import RunSettings
    from harness.store.run_config import RunConfig

CellState = Literal["run", "profile", "n/a", "unresolved"]
RunState = Literal["finished", "running", "failed", "missing"]


@dataclass(frozen=True)
class Cell:
    """One run cell of a spec under one profile.

    Attributes:
        spec: the spec's name.
        key: the row label (or sweep cell key) inside the spec.
        state: ``run``, ``profile`` (not run under this profile) or ``n/a`` (invalid here).
        configs: one resolved config per seed (``state == "run"`` only).
        reason: why the cell is not run (``profile`` / ``n/a``).
        hidden_size: the hidden size of the profile's encoder for this cell (for ``n/a (d=...)``).
    """

    spec: str
    key: str
    state: CellState
    configs: tuple[RunConfig, ...] = ()
    reason: str = ""
    hidden_size: int | None = None

    @property
    def config_id(self) -> str | None:
        """The seed-free id shared by this cell's runs (None when the cell is not run)."""
        return self.configs[0].config_id() if self.configs else None


@dataclass
class PlannedRun:
    """One distinct run of the grid and the cells that use it."""

    config: RunConfig
    run_id: str
    used_by: list[str] = field(default_factory=list)
    state: RunState = "missing"


@dataclass
class GridPlan:
    """The expansion of some specs under one profile."""

    profile: str
    seeds: tuple[int, ...]
    settings: RunSettings
    """The profile's run-level settings with the command line's overrides (model, corpus, budget)."""
    cells: list[Cell]
    runs: list[PlannedRun]

    def cell(self, spec: str, key: str) -> Cell:
        for c in self.cells:
            if c.spec == spec and c.key == key:
                return c
        raise KeyError(f"{spec}: {key}")

    def pending(self, retry_failed: bool = True) -> list[PlannedRun]:
        """Runs still to do: no finished record (failed ones only when ``retry_failed``)."""
        todo: tuple[str, ...] = ("missing", "running", "failed") if retry_failed else ("missing", "running")
        return [r for r in self.runs if r.state in todo]

    def counts(self) -> dict[str, int]:
        out = {"finished": 0, "running": 0, "failed": 0, "missing": 0}
        for r in self.runs:
            out[r.state] += 1
        return out


class _Resolver:
    """Resolves run specs under one profile through :func:`~harness.config.settings.resolve_settings` and
    :func:`~harness.store.run_config.resolve_run`: settings cached per set of overrides, the encoder's width
    looked up once per settings (a failed lookup too), and each cell's typed parameters (built
    when the spec was loaded) used as it is."""

    def __init__(
        self,
        profile: str,
        overrides: Mapping[str, Any] | None,
        data_root: Path | None,
        seeds: int | Sequence[int],
        require_corpus: bool = True,
    ) -> None:
        self.profile = profile
        self.require_corpus = require_corpus
        self.overrides = dict(overrides or {})
        if "seed" in self.overrides:
            raise ConfigError("set seeds with --seeds, not as an override")
        self.data_root = data_root
        self._settings: dict[str, RunSettings] = {}
        self._unresolved: dict[str, str] = {}  # model -> why its hidden size cannot be found
        self.base = self.settings(self.overrides)
        self.seeds = seed_list(seeds, self.base.seed) if isinstance(seeds, int) else tuple(seeds)
        if not self.seeds:
            raise ConfigError("at least one seed is needed")

    def settings(self, overrides: dict[str, Any]) -> RunSettings:
        key = repr(sorted((k, repr(v)) for k, v in overrides.items()))
        if key not in self._settings:
            self._settings[key] = resolve_settings(
                self.profile, overrides, self.data_root, require_corpus=self.require_corpus
            )
        return self._settings[key]

    def hidden_size(self, settings: RunSettings) -> int | str:
        """The width of the settings' encoder, or why it cannot be found (asked once per model)."""
        if settings.model in self._unresolved:
            return self._unresolved[settings.model]
        try:
            return settings.hidden_size
        except ModelLoadError as exc:
            self._unresolved[settings.model] = str(exc)
            return str(exc)

    def resolve(self, spec: str, key: str, run: RunSpec) -> Cell:
        if not run.runs_under(self.profile):
            only = ", ".join(run.only_profiles or ())
            return Cell(spec, key, "profile", reason=f"runs under profile {only} only")
        try:
            settings = self.settings({**self.overrides, **run.overrides_for(self.profile)})
        except ConfigError as exc:  # a row's own override out of range: say which row
            raise ConfigError(f"{spec}: {key}: {exc}") from None
        hidden = self.hidden_size(settings)
        if isinstance(hidden, str):
            return Cell(spec, key, "unresolved", reason=hidden)
        # Settings were checked by resolve_settings and the record when the spec was loaded, so a
        # ConfigError here means these parameter values do not suit this encoder.
        try:
            first = resolve_run(run.method, run.typed, settings, seed=self.seeds[0])
        except ConfigError as exc:
            return Cell(spec, key, "n/a", reason=str(exc), hidden_size=hidden)
        # A run that does not train is deterministic given the encoder: one seed is enough.
        seeds = self.seeds[:1] if settings.max_steps == 0 else self.seeds
        configs = (first, *(first.replace(seed=s) for s in seeds[1:]))
        return Cell(spec, key, "run", configs=configs, hidden_size=hidden)


SEEDS_MAX = 1000
"""The most seeds per run a grid plans: each seed is a whole run of every planned cell (the papers'
claims are tested on 5 to 20), and a plan is listed in full before anything runs."""


def seed_list(n: int, base: int) -> tuple[int, ...]:
    """``n`` consecutive seeds starting at ``base`` (the profile's seed); ``n`` was checked where it
    entered (:func:`check_seed_count`, in the grid's and the check's options): none below 1 here."""
    if base + n - 1 > SEED_MAX:
        raise ConfigError(f"--seeds {n} from seed {base} passes {SEED_MAX} (NumPy's largest seed)")
    return tuple(base + i for i in range(n))


def check_seed_count(n: int, flag: str = "--seeds") -> None:
    """A seed count (``--seeds``, ``--max-seeds``: ``flag``) must be in 1..:data:`SEEDS_MAX`
    (checked before anything is planned or printed)."""
    if n < 1:
        raise ConfigError(f"{flag} must be >= 1, got {n}")
    if n > SEEDS_MAX:
        raise ConfigError(
            f"{flag} must be at most {SEEDS_MAX}, got {n}: each seed is a whole run of every planned cell"
        )


def expand(
    specs: Sequence[TableSpec],
    profile: str,
    *,
    seeds: int | Sequence[int] = 1,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
    extra: Sequence[tuple[str, str, RunSpec]] = (),
    require_corpus: bool = True,
) -> GridPlan:
    """Resolve every run cell of ``specs`` under ``profile``; deduplicate runs by id.

    Args:
        specs: validated table specs.
        profile: profile name (``smoke``, ``cpu``, ``paper``).
        seeds: a number of seeds (consecutive from the profile's seed, after overrides; the caller
            checks it with :func:`check_seed_count`) or a list. Cells whose runs do not train
            (``max_steps = 0``) get the first seed only.
        overrides: run-level overrides from the command line (rows' own overrides win).
        data_root: data root, passed to :func:`~harness.config.settings.resolve_settings`.
        extra: more ``(owner, key, run)`` cells, e.g. plot series.
        require_corpus: False to plan without the corpus file (``--dry-run``, ``check``): run ids
            are then provisional, see :func:`~harness.config.settings.resolve_settings`.

    Returns:
        The plan; run states are ``missing`` until :func:`harness.grid.plan.status.attach_status` is called.
    """
    resolver = _Resolver(profile, overrides, data_root, seeds, require_corpus)
    cells: list[Cell] = []
    explicit: set[tuple[str, str]] = set()  # cells whose row sets final_tasks itself
    for spec in specs:
        for key, run in spec.run_cells():
            cells.append(resolver.resolve(spec.name, key, run))
            if "final_tasks" in run.overrides_for(profile):
                explicit.add((spec.name, key))
    for owner, key, run in extra:
        cells.append(resolver.resolve(owner, key, run))
    asked_everywhere = "final_tasks" in (overrides or {})
    runs, needs, keep = _distinct_runs(
        cells, {spec.name: spec.scores for spec in specs}, explicit, asked_everywhere
    )
    dev_only = {r for r, n in needs.items() if n <= {"stsb_dev"} and r not in keep}
    if dev_only:
        _add_catalog_needs(needs, dev_only, {spec.name for spec in specs}, resolver)
    for run_id, planned in runs.items():
        planned.config = _final_tasks_for(planned.config, needs.get(run_id, set()), run_id in keep)
    return GridPlan(profile, resolver.seeds, resolver.base, cells, list(runs.values()))


def _distinct_runs(
    cells: Sequence[Cell], scores: Mapping[str, str], explicit: set[tuple[str, str]], asked_everywhere: bool
) -> tuple[dict[str, PlannedRun], dict[str, set[str]], set[str]]:
    """The cells' runs deduplicated by run id (in order of first use), what each run's tables score
    (``needs``), and the runs whose final tasks someone chose (``keep``: never lowered to none)."""
    runs: dict[str, PlannedRun] = {}
    needs: dict[str, set[str]] = {}
    keep: set[str] = set()
    for cell in cells:
        for cfg in cell.configs:
            run_id = cfg.run_id()
            planned = runs.setdefault(run_id, PlannedRun(cfg, run_id))
            planned.used_by.append(f"{cell.spec}: {cell.key}")
            if cell.spec in scores:
                needs.setdefault(run_id, set()).add(scores[cell.spec])
            if asked_everywhere or (cell.spec, cell.key) in explicit:
                keep.add(run_id)
    return runs, needs, keep


def _add_catalog_needs(
    needs: dict[str, set[str]], run_ids: set[str], planned_specs: set[str], resolver: _Resolver
) -> None:
    """Add to ``needs`` what the catalog's other table specs (``tables/``) read from ``run_ids``.

    A run that only the planned dev-scored tables use would skip its final evaluation; if a table
    not named in this plan scores the same run on STS (SimCSE++ Table 5's centre run is Table 3's
    SimCSE++ row), it keeps it, or running that table later would train the run again.
    """

    for spec in load_table_specs():
        if spec.name in planned_specs:
            continue
        for key, run in spec.run_cells():
            cell = resolver.resolve(spec.name, key, run)
            for cfg in cell.configs:
                run_id = cfg.run_id()
                if run_id in run_ids:
                    needs[run_id].add(spec.scores)


def _final_tasks_for(config: RunConfig, needs: set[str], chosen: bool) -> RunConfig:
    """Score the final tasks only where a table reads them (transfer costs minutes of CPU per run,
    the final STS pass half a minute).

    ``final_tasks`` is not part of the run id, so one run serves every table that uses it: ``all``
    when a transfer table needs it, else ``sts`` where the profile said ``all``; ``none`` for a run
    only tables of the best checkpoint's STS-B dev score use (SimCSE++ Table 5: the dev score is
    measured during training, a final pass would be thrown away) unless ``chosen`` (the row or the
    command line set ``final_tasks``); a row's explicit ``none`` or ``transfer`` is kept unless a
    table needs more.
    """
    tasks = config.final_tasks
    if "transfer" in needs and tasks != "all":
        tasks = "all" if ("sts" in needs or tasks == "sts") else "transfer"
    elif needs and needs <= {"stsb_dev"} and tasks in ("all", "sts") and not chosen:
        tasks = "none"
    elif "transfer" not in needs and needs and tasks == "all":
        tasks = "sts"
    return config if tasks == config.final_tasks else config.replace(final_tasks=tasks)


def reading_plan(
    specs: Sequence[TableSpec],
    profile: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
    extra: Sequence[tuple[str, str, RunSpec]] = (),
) -> GridPlan:
    """The cells ``specs`` (and ``extra``) show under ``profile``, for mapping records to them: one
    seed is enough, as every seed of a cell shares its seed-free id (:attr:`Cell.config_id`)."""
    return expand(specs, profile, seeds=1, overrides=overrides, data_root=data_root, extra=extra)


def records_by_cell(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Finished records by the seed-free id of their cell (all seeds of one configuration together),
    one per run id, so that a cell never counts a run twice."""
    by_run = {str(r["run_id"]): r for r in records if r.get("status") == "finished"}
    out: dict[str, list[Mapping[str, Any]]] = {}
    for record in by_run.values():
        out.setdefault(str(record.get("group_id")), []).append(record)
    return out
