"""Hand-edited or odd files in ``records/``: a record whose config no longer gives its run id (its
numbers would land in another cell, or count twice for one seed) is named and skipped; a FIFO or a
device named like a record is skipped, never waited on; the rest renders."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from harness.cli import main
from harness.store.run_store import RunStore
from tests.helpers import SMOKE_SPEC, make_data_root, smoke_simcse_config, sts_record

pytestmark = pytest.mark.usefixtures("no_hang")  # tests/system/conftest.py


@pytest.fixture
def two_seeds(tmp_path: Path) -> tuple[RunStore, Path, list[str]]:
    """Two finished seeds of the smoke spec's SimCSE row."""
    data = make_data_root(tmp_path / "data")
    config = smoke_simcse_config(data)
    store = RunStore(tmp_path / "runs")
    ids = []
    for i, avg in enumerate((40.0, 42.0)):
        seeded = config.replace(seed=config.seed + i)
        store.save(sts_record(seeded, avg))
        ids.append(seeded.run_id())
    return store, data, ids


def test_a_record_whose_config_was_edited_is_named_and_skipped(
    two_seeds: tuple[RunStore, Path, list[str]], tmp_path: Path
) -> None:
    store, data, ids = two_seeds
    edited = store.path(ids[1])
    record = json.loads(edited.read_text(encoding="utf-8"))
    record["config"]["seed"] = record["config"]["seed"] - 1  # now claims the first seed's config
    edited.write_text(json.dumps(record), encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [r["run_id"] for r in store.records()] == [ids[0]]
    (said,) = [str(w.message) for w in caught]
    assert said.startswith(f"skipping run record {edited}: its config gives run {ids[0]}")
    assert "(edited by hand?)" in said
    out = tmp_path / "tables"
    common = ["--profile", "smoke", "--runs-dir", str(store.root), "--data-dir", str(data)]
    with pytest.warns(RuntimeWarning, match="edited by hand"):
        assert main(["tables", str(SMOKE_SPEC), *common, "--out", str(out)]) == 0
    markdown = (out / "tables.md").read_text(encoding="utf-8")
    assert "40.00" in markdown and "(n = 2)" not in markdown


def test_a_fifo_among_the_records_is_skipped_not_waited_on(
    two_seeds: tuple[RunStore, Path, list[str]],
) -> None:
    store, _, ids = two_seeds
    os.mkfifo(store.records_dir / "stray.json")
    with pytest.warns(RuntimeWarning, match=r"stray.json: run record .* is not a regular file but a FIFO"):
        assert sorted(r["run_id"] for r in store.records()) == sorted(ids)
