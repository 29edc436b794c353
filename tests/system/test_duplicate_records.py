"""One run counts once: a copy of a record file, or a record under another name, is named in one
warning line and counted nowhere twice (tables, claims, plots, report, the dry run; the cost model's
own: tests/grid/plan/test_cost.py)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.specs.cells import records_by_cell
from harness.store.run_store import RunStore
from tests.helpers import SMOKE_SPEC, make_data_root, smoke_simcse_config, sts_record


def finished(config: Any, avg: float) -> dict[str, Any]:
    """:func:`~tests.helpers.sts_record` with a two-point trajectory, a device and the final tasks' time."""
    return sts_record(
        config,
        avg,
        best_step=4,
        trajectory=[{"step": s, "loss": 1.0, "stsb_dev": avg, "align": 0.2, "uniform": -1.0} for s in (0, 4)],
        provenance={"device": "cpu"},
        final_seconds={"sts": 1.0},
    )


@pytest.fixture
def one_run(tmp_path: Path) -> tuple[RunStore, Path, str]:
    """A store with one finished run of the smoke spec's SimCSE row, and its data root."""
    data = make_data_root(tmp_path / "data")
    config = smoke_simcse_config(data)
    store = RunStore(tmp_path / "runs")
    store.save(finished(config, 41.74))
    return store, data, config.run_id()


def warnings_of(fn: Any) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn()
    return value, [str(w.message) for w in caught]


def test_a_backup_copy_is_named_and_not_counted(one_run: tuple[RunStore, Path, str]) -> None:
    store, _, run_id = one_run
    copy = store.records_dir / f"{run_id} (copy).json"
    shutil.copy(store.path(run_id), copy)
    records, said = warnings_of(store.records)
    assert [r["run_id"] for r in records] == [run_id]
    assert len(said) == 1 and str(copy) in said[0] and f"a copy of run {run_id}" in said[0]
    (groups, _) = warnings_of(lambda: records_by_cell(store.records()))
    assert sum(len(v) for v in groups.values()) == 1


def test_a_record_under_another_name_is_named_and_not_used(one_run: tuple[RunStore, Path, str]) -> None:
    store, _, run_id = one_run
    renamed = store.records_dir / "renamed.json"
    store.path(run_id).rename(renamed)
    records, said = warnings_of(store.records)
    assert records == []
    assert len(said) == 1 and str(renamed) in said[0] and f"must be {store.path(run_id)}" in said[0]


def test_a_table_with_a_backup_copy_beside_the_record_shows_n_1(
    one_run: tuple[RunStore, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, data, run_id = one_run
    copy = store.records_dir / f"{run_id}.bak.json"
    shutil.copy(store.path(run_id), copy)
    common = ["--profile", "smoke", "--runs-dir", str(store.root), "--data-dir", str(data)]
    for argv in (
        ["tables", str(SMOKE_SPEC), *common, "--out", str(tmp_path / "tables")],
        ["claims", str(SMOKE_SPEC), *common, "--out", str(tmp_path / "claims")],
        ["plots", *common, "--out", str(tmp_path / "plots")],
        ["report", str(SMOKE_SPEC), *common, "--results", str(tmp_path)],
        ["grid", str(SMOKE_SPEC), *common, "--dry-run"],
    ):
        with pytest.warns(RuntimeWarning) as caught:
            assert main(argv) == 0, argv
        named = {str(w.message) for w in caught}
        assert len(named) == 1 and str(copy) in named.pop(), argv
    out = capsys.readouterr().out
    assert "1 finished, 1 to run" in out  # the dry run
    markdown = (tmp_path / "tables" / "tables.md").read_text(encoding="utf-8")
    assert "41.74" in markdown and "(n = 2)" not in markdown and "\u00b1" not in markdown
    assert run_id in (tmp_path / "report.html").read_text(encoding="utf-8")
