"""The night's superseded records (``docs/night/superseded``): MoCoSE's and DCLR's runs from before
their released behaviour became the default. Each one's stored config resolves to another run id now,
so no grid, table or claim can take it for a run of today's method; the cells they filled read ``--``
until the re-run, and the night's current records hold no run of either method yet."""

from __future__ import annotations

import json
from pathlib import Path

from harness.config.run_config import RunConfig

NIGHT = Path(__file__).resolve().parents[1] / "docs" / "night"


def test_superseded_records_resolve_to_other_ids_and_no_current_record_replaces_them() -> None:
    superseded = [
        json.loads(p.read_text(encoding="utf-8")) for p in (NIGHT / "superseded" / "records").glob("*.json")
    ]
    assert sorted(r["config"]["method"] for r in superseded) == ["dclr"] * 5 + ["mocose"] * 5
    for record in superseded:
        assert record["status"] == "finished"
        assert RunConfig.from_dict(record["config"]).run_id() != record["run_id"]
    current = [p.name for p in (NIGHT / "runs" / "records").glob("*.json")]
    assert not [n for n in current if n.startswith(("mocose-", "dclr-"))]  # until the re-run adds them
