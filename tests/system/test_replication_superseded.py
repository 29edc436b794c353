"""The night's superseded records (``docs/night/superseded``): MoCoSE's and DCLR's runs from before
their released behaviour became the default. Each one's stored config resolves to another run id now,
so no grid, table or claim can take it for a run of today's method; the re-run's records (today's
method, 5 seeds each) fill those cells, under other ids."""

from __future__ import annotations

import json

from harness.store.run_config import RunConfig
from tests.helpers import NIGHT


def test_superseded_records_resolve_to_other_ids_and_no_current_record_replaces_them() -> None:
    superseded = [
        json.loads(p.read_text(encoding="utf-8")) for p in (NIGHT / "superseded" / "records").glob("*.json")
    ]
    assert sorted(r["config"]["method"] for r in superseded) == ["dclr"] * 5 + ["mocose"] * 5
    for record in superseded:
        assert record["status"] == "finished"
        assert RunConfig.from_dict(record["config"]).run_id() != record["run_id"]
    current = [
        json.loads(p.read_text(encoding="utf-8"))
        for p in (NIGHT / "runs" / "records").glob("*.json")
        if p.name.startswith(("mocose-", "dclr-"))
    ]
    assert sorted((r["config"]["method"], r["config"]["seed"]) for r in current) == sorted(
        (r["config"]["method"], r["config"]["seed"]) for r in superseded
    )  # the re-run: the same methods and seeds
    assert all(RunConfig.from_dict(r["config"]).run_id() == r["run_id"] for r in current)
    assert not {r["run_id"] for r in current} & {r["run_id"] for r in superseded}
