"""The README's replication-night numbers are what the committed run records give.

``docs/night`` holds the finished records of the night grid's parts that have been run
(``docs/night/runs``), the specs they cover (``manifest.json``) and the tables and claims rendered
from them. This test renders them again from the records and checks that the committed files and
the README's claims table say the same, so a number in the README cannot drift from its records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.cli import main
from harness.reporting.claims import HEADER as CLAIMS_HEADER

ROOT = Path(__file__).resolve().parents[1]
NIGHT = ROOT / "docs" / "night"


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| table ")]


def test_the_committed_night_tables_and_claims_come_from_its_records(data_root: Path, tmp_path: Path) -> None:
    manifest = json.loads((NIGHT / "manifest.json").read_text(encoding="utf-8"))
    # pinned, so that the run ids do not depend on whether this CPU has native bf16 ("auto")
    assert manifest["overrides"] == {"precision": "bf16", "eval_precision": "bf16"}
    overrides = [a for k, v in manifest["overrides"].items() for a in ("--override", f"{k}={v}")]
    records = [json.loads(p.read_text(encoding="utf-8")) for p in (NIGHT / "runs" / "records").glob("*.json")]
    assert all(r["status"] == "finished" for r in records)
    assert len(records) >= 5 * len(manifest["specs"])  # several seeds per spec, not a sample
    args = [
        "tables",
        *manifest["specs"],
        "--profile",
        manifest["profile"],
        *overrides,
        "--runs-dir",
        str(NIGHT / "runs"),
        "--data-dir",
        str(data_root),
        "--out",
        str(tmp_path / "tables"),
    ]
    assert main(args) == 0
    for part in ("tables/tables.md", "claims/claims.md"):
        fresh = (tmp_path / part).read_text(encoding="utf-8")
        assert fresh == (NIGHT / part).read_text(encoding="utf-8"), part
    claims = (tmp_path / "claims" / "claims.md").read_text(encoding="utf-8")
    measured = [row for row in _table_rows(claims) if row.split(" | ")[6] == "5"]
    assert len(measured) >= 10  # claims with 5 paired seeds behind them

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    marker = "**The replication night.**"
    assert marker in readme
    section = readme.split(marker, 1)[1].split("\n## ", 1)[0]
    quoted = [  # the claims rows: a spec name first, claims.md's nine columns
        row
        for row in _table_rows(section)
        if re.match(r"^\| [a-z]+_[a-z0-9_]+ \|", row) and row.count(" | ") == len(CLAIMS_HEADER) - 1
    ]
    assert quoted, "the README's night section quotes no claims rows"
    missing = [row for row in quoted if row not in claims]
    assert not missing, missing
