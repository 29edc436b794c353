"""The replication night's numbers in ``docs/night.md`` are what the committed run records give.

``docs/night`` holds the finished records of the night grid's parts that have been run
(``docs/night/runs``), the specs they cover (``manifest.json``) and the tables and claims rendered
from them. These tests render them again from the records and check that the committed files and
``docs/night.md`` (its claims table, its verdict counts, raw and corrected, and the STS averages it
quotes) say the same,
so a number on that page cannot drift from its records.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

from harness.cli import main
from harness.reporting.claims import HEADER as CLAIMS_HEADER
from harness.reporting.claims import build_claims
from harness.reporting.correction import Analysis
from harness.reporting.decisions import STATES, claim_states
from harness.reporting.outcomes import parse_effect
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore
from tests.doc_numbers import demo_averages
from tests.helpers import NIGHT, REPO_ROOT

PAGE = REPO_ROOT / "docs" / "night.md"


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

    page = PAGE.read_text(encoding="utf-8")
    marker = "\n## The claims\n"
    assert marker in page
    section = page.split(marker, 1)[1].split("\n## ", 1)[0]
    quoted = [  # the claims rows: a spec name first, claims.md's nine columns
        row
        for row in _table_rows(section)
        if re.match(r"^\| [a-z]+_[a-z0-9_]+ \|", row) and row.count(" | ") == len(CLAIMS_HEADER) - 1
    ]
    assert quoted, "docs/night.md's claims section quotes no claims rows"
    missing = [row for row in quoted if row not in claims]
    assert not missing, missing
    assert len(quoted) == len(_table_rows(claims))  # the page quotes every claim, not a selection


def test_the_night_pages_summary_numbers_are_the_committed_records() -> None:
    """The record count, the verdict counts and the STS averages that docs/night.md quotes in prose."""
    page = PAGE.read_text(encoding="utf-8")
    records = list((NIGHT / "runs" / "records").glob("*.json"))
    assert f"**All {len(records)} have run**" in page

    claims = json.loads((NIGHT / "claims" / "claims.json").read_text(encoding="utf-8"))["claims"]
    distinct = [c for c in claims if not c["same_as"]]
    verdicts = ("holds", "reversed", "inconclusive", "not run", "no data")
    count = {v: sum(c["verdict"] == v for c in distinct) for v in verdicts}
    assert sum(count.values()) == len(distinct)
    flat = " ".join(page.split())  # the prose as one line, whatever its line breaks
    waiting = f", {count['no data']} waiting for their re-run" if count["no data"] else ""  # superseded runs
    quoted = (
        f"({len(distinct)} distinct comparisons: {count['holds']} hold, {count['reversed']} reversed, "
        f"{count['inconclusive']} inconclusive, {count['not run']} not run at this encoder{waiting}; "
        f"{len(claims) - len(distinct)} more rows repeat the same runs and are not counted)"
    )
    assert quoted in flat, quoted

    averages = demo_averages((NIGHT / "tables" / "tables.md").read_text(encoding="utf-8"))
    quoted = ", ".join(f"{method} {mean} +- {sd}" for method, (_paper, mean, sd) in averages.items())
    assert f"(STS avg: {quoted})" in flat, quoted


def test_the_night_page_quotes_the_corrected_counts() -> None:
    data = json.loads((REPO_ROOT / "docs" / "night" / "claims" / "claims.json").read_text(encoding="utf-8"))
    distinct = [c for c in data["claims"] if not c["same_as"]]
    count = {
        v: sum(c["verdict_corrected"] == v for c in distinct) for v in ("holds", "reversed", "inconclusive")
    }
    page = " ".join((REPO_ROOT / "docs" / "night.md").read_text(encoding="utf-8").split())
    outcome = {v: sum(c["outcome"] == v for c in distinct) for v in ("ruled out", "inconclusive")}
    quoted = (
        f"{count['holds']} hold, {count['reversed']} are reversed and {count['inconclusive']} are not "
        f"decided: {outcome['ruled out']} ruled out"
    )
    assert quoted in page, quoted
    assert f"and {outcome['inconclusive']} inconclusive (the second verdict column" in page


def test_the_until_decided_slice_is_its_records_its_state_and_the_claims_they_give(
    data_root: Path, tmp_path: Path
) -> None:
    """docs/night/until-decided: the records a budgeted ``--until-decided`` grid added to the night's,
    its state (sequential.json), the claims rendered from both, and the counts docs/night.md quotes."""
    until = NIGHT / "until-decided"
    state = json.loads((until / "sequential.json").read_text(encoding="utf-8"))
    assert state["design"]["test"] == "sequential" and state["design"]["profile"] == "night"
    night = {p.name for p in (NIGHT / "runs" / "records").glob("*.json")}
    added = sorted((until / "records").glob("*.json"))
    assert added and not {p.name for p in added} & night  # only runs the 5-seed night did not have
    assert all(json.loads(p.read_text(encoding="utf-8"))["status"] == "finished" for p in added)
    assert all(json.loads(p.read_text(encoding="utf-8"))["config"]["seed"] >= 47 for p in added)

    store = tmp_path / "runs"
    (store / "records").mkdir(parents=True)
    for path in [*(NIGHT / "runs" / "records").glob("*.json"), *added]:
        shutil.copy(path, store / "records")
    shutil.copy(until / "sequential.json", store)
    manifest = json.loads((NIGHT / "manifest.json").read_text(encoding="utf-8"))
    overrides = [a for k, v in manifest["overrides"].items() for a in ("--override", f"{k}={v}")]
    args = ["claims", *manifest["specs"], "--profile", "night", *overrides, "--runs-dir", str(store)]
    assert main([*args, "--data-dir", str(data_root), "--out", str(tmp_path / "claims")]) == 0
    fresh = (tmp_path / "claims" / "claims.md").read_text(encoding="utf-8")
    assert fresh == (until / "claims" / "claims.md").read_text(encoding="utf-8")
    assert "95% CS" in fresh  # tested with the confidence sequence, not the fixed interval

    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    counts = state["counts"]  # as the grid wrote them, in the words of its day
    quoted = f"decided {counts['decided']}, futile {counts['futile']}, undecided {counts['undecided']}"
    assert f"after it: {quoted}" in page, quoted
    # the same records under today's rule (claims_cmd reads effect and most seeds from the state)
    design = state["design"]
    effect = parse_effect(design["effect"])
    analysis = Analysis(
        sequential=True, mixture_c=design["mixture_c"], effect=effect, max_seeds=design["max_seeds"]
    )
    specs = load_table_specs(manifest["specs"])
    results = build_claims(
        [s for s in specs if s.claims],
        RunStore(store),
        "night",
        overrides=manifest["overrides"],
        data_root=data_root,
        analysis=analysis,
    )
    now = Counter(s.state for s in claim_states(results, effect, design["max_seeds"], analysis))
    today = ", ".join(f"{word} {now[word]}" for word in STATES)
    assert f"the same records give: {today}" in page, today
