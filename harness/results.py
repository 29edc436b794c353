"""The Python API over run records: a tidy pandas DataFrame, and MTEB's result format.

    import harness.results
    df = harness.results.load("docs/night/runs", specs=["cpu_demo"], profile="night",
                              overrides={"precision": "bf16", "eval_precision": "bf16"})
    df.query("group == 'sts' and task == 'avg'").groupby(["spec", "paper_row"]).score.agg(["mean", "std"])

:func:`load` gives one line per score: which table and row a run belongs to (``spec``,
``paper_row``: the row label the tables print, the paper's name, or a sweep cell
``label [vary=value]``), the encoder it trained (``measured``: ``all-MiniLM-L6-v2`` where the paper's
row says BERT-base), what it ran (``method``, ``parameters``, ``seed``, ``profile``, ``model``,
``run_id``) and the score (``group``: ``sts``, ``transfer`` or ``dev``; ``task``: ``STS12`` ...
``avg``, ``MR`` ..., or ``STS-B dev``; ``score``: percent, unrounded). Grouped by
``(spec, paper_row)`` it gives the tables' cells; grouped by ``method`` alone it mixes every
configuration of a method, which is why the rows are named. A run that several tables show (a
shared baseline) is one line per table and row; without ``specs`` every finished record is listed
once, ``spec`` and ``paper_row`` empty.

:func:`write_mteb` writes the same records in MTEB's result format (:mod:`harness.reporting.mteb`).

Importing :mod:`harness` stays cheap: ``harness.results`` is loaded on first use, and pandas with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[str, ...] = (
    "spec",
    "paper_row",
    "measured",
    "method",
    "parameters",
    "seed",
    "group",
    "task",
    "score",
    "profile",
    "model",
    "run_id",
)
"""The columns of :func:`load`'s DataFrame, in order."""

DEV_TASK = "STS-B dev"
"""The ``task`` of a run's best STS-B dev score (``group`` ``dev``), the checkpoint it kept."""


def _measured(model: Any) -> str | None:
    """The encoder a run trained, as the outputs name it (``all-MiniLM-L6-v2``)."""
    from harness.reporting.tables.model import encoder_name

    return encoder_name(str(model)) if model else None


def _parameters(params: Mapping[str, Any]) -> str:
    """A run's method parameters as one sortable, groupable text: ``mlp=true, temperature=0.05``."""
    from harness.specs.model import format_value

    return ", ".join(f"{k}={format_value(v)}" for k, v in sorted(params.items()))


def _scores(record: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """``(group, task, score)`` of every number a finished record holds."""
    out: list[tuple[str, str, float]] = []
    final = record.get("final") or {}
    for group in ("sts", "transfer"):
        scores = final.get(group) if isinstance(final, Mapping) else None
        for task, value in (scores or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                out.append((group, str(task), float(value)))
    dev = record.get("best_stsb_dev")
    if isinstance(dev, int | float) and not isinstance(dev, bool):
        out.append(("dev", DEV_TASK, float(dev)))
    return out


def _finished(runs_dir: str | Path) -> list[dict[str, Any]]:
    from harness.config.inputs import check_runs_dir
    from harness.store.run_store import RunStore

    store = RunStore(check_runs_dir(runs_dir))
    return [dict(r) for r in store.records() if r.get("status") == "finished"]


def _profile(records: Sequence[Mapping[str, Any]], profile: str | None) -> str:
    """The profile asked, else the one every record shares."""
    if profile is not None:
        return profile
    found = sorted({str((r.get("config") or {}).get("profile")) for r in records})
    if len(found) != 1:
        raise ConfigError(f"the records are of {len(found)} profiles ({', '.join(found)}): pass profile=")
    return found[0]


def _membership(
    records: Sequence[Mapping[str, Any]],
    specs: str | Sequence[str],
    profile: str,
    overrides: Mapping[str, Any] | None,
    data_dir: str | Path | None,
) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(spec, row, record)`` for every finished record a cell of ``specs`` shows under ``profile``."""
    from harness.config.paths import resolve_data_root
    from harness.specs.cells import reading_plan, records_by_cell
    from harness.specs.find import load_table_specs

    names = [specs] if isinstance(specs, str) else list(specs)
    loaded = load_table_specs(names)
    plan = reading_plan(loaded, profile, overrides=overrides, data_root=resolve_data_root(data_dir))
    by_config = records_by_cell(records)
    return [
        (cell.spec, cell.key, record)
        for cell in plan.cells
        if cell.state == "run"
        for record in by_config.get(cell.config_id or "", [])
    ]


def load(
    runs_dir: str | Path = "runs",
    specs: str | Sequence[str] | None = None,
    profile: str | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_dir: str | Path | None = None,
) -> pd.DataFrame:
    """The finished run records of ``runs_dir`` as a tidy DataFrame (columns :data:`COLUMNS`).

    Args:
        runs_dir: a runs folder (``harness grid --runs-dir``), holding ``records/``.
        specs: table specs (names in ``tables/``, paths, or ``"all"``) whose rows name the runs;
            None: every finished record, unnamed.
        profile: the profile the specs are resolved under (default: the records' one profile).
        overrides: the run overrides the grid ran with (they are part of run ids), as for
            ``harness tables --override``.
        data_dir: the data root (the corpus's content is part of run ids); default as the CLI.

    Raises:
        ConfigError: a runs folder that does not exist, an unknown spec or profile, records of
            several profiles without ``profile``.
    """
    import pandas as pd

    records = _finished(runs_dir)
    if specs is None:
        members: list[tuple[str | None, str | None, Mapping[str, Any]]] = [(None, None, r) for r in records]
    elif not records:
        members = []
    else:
        members = list(_membership(records, specs, _profile(records, profile), overrides, data_dir))
    lines = []
    for spec, row, record in members:
        config = record.get("config") or {}
        common = {
            "spec": spec,
            "paper_row": row,
            "measured": _measured(config.get("model")),
            "method": config.get("method"),
            "parameters": _parameters(config.get("params") or {}),
            "seed": config.get("seed"),
            "profile": config.get("profile"),
            "model": config.get("model"),
            "run_id": record.get("run_id"),
        }
        lines += [{**common, "group": g, "task": t, "score": s} for g, t, s in _scores(record)]
    frame = pd.DataFrame(lines, columns=list(COLUMNS))
    return frame.astype({"seed": "Int64", "score": "float64"})


def write_mteb(
    runs_dir: str | Path,
    out_dir: str | Path,
    specs: str | Sequence[str] | None = None,
    profile: str | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_dir: str | Path | None = None,
) -> list[Path]:
    """Write the finished records (those ``specs`` show, or all) in MTEB's result format under
    ``out_dir`` (:mod:`harness.reporting.mteb`); return the files written."""
    from harness.config.models import hidden_size_of
    from harness.jobs.export import base_model
    from harness.reporting.mteb import write_mteb as write

    records: list[Mapping[str, Any]] = list(_finished(runs_dir))
    if specs is not None and records:
        chosen = {
            r["run_id"]: r
            for _s, _r, r in _membership(records, specs, _profile(records, profile), overrides, data_dir)
        }
        records = list(chosen.values())
    models = {str((r.get("config") or {}).get("model", "")) for r in records}
    dims: dict[str, int | None] = {}
    for model in models:
        try:
            dims[model] = hidden_size_of(model)
        except Exception:  # a model this machine cannot size (not cached, hub offline): left out
            dims[model] = None
    return write(records, Path(out_dir), base_model={m: base_model(m) for m in models}, embed_dim=dims)


__all__ = ["COLUMNS", "DEV_TASK", "load", "write_mteb"]
