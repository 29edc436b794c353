"""The replication night's numbers in ``docs/replication.md`` are what the committed run records give.

``docs/night`` holds the finished records of the night grid's parts that have been run
(``docs/night/runs``), the specs they cover (``manifest.json``) and the tables and claims rendered
from them. These tests render them again from the records and check that the committed files and
``docs/replication.md`` (its claims table, its verdict counts, raw and corrected, and the STS averages it
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
from harness.grid.rounds import stop_reason
from harness.reporting.claims import HEADER as CLAIMS_HEADER
from harness.reporting.claims import build_claims
from harness.specs.find import load_table_specs
from harness.stats.correction import Analysis
from harness.stats.decisions import STATES, claim_states
from harness.stats.outcomes import parse_effect
from harness.store.run_store import RunStore
from tests.doc_numbers import demo_averages
from tests.helpers import NIGHT, REPO_ROOT, manifest_of, override_args

PAGE = REPO_ROOT / "docs" / "replication.md"


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| table ")]


def test_the_committed_night_tables_and_claims_come_from_its_records(data_root: Path, tmp_path: Path) -> None:
    manifest = manifest_of(NIGHT)
    # pinned, so that the run ids do not depend on whether this CPU has native bf16 ("auto")
    assert manifest["overrides"] == {"precision": "bf16", "eval_precision": "bf16"}
    overrides = override_args(manifest["overrides"])
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
    assert quoted, "docs/replication.md's claims section quotes no claims rows"
    missing = [row for row in quoted if row not in claims]
    assert not missing, missing
    assert len(quoted) == len(_table_rows(claims))  # the page quotes every claim, not a selection


def test_the_night_pages_summary_numbers_are_the_committed_records() -> None:
    """The record count, the verdict counts and the STS averages that docs/replication.md quotes in prose."""
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
    page = " ".join((REPO_ROOT / "docs" / "replication.md").read_text(encoding="utf-8").split())
    outcome = {v: sum(c["outcome"] == v for c in distinct) for v in ("ruled out", "inconclusive")}
    quoted = (
        f"{count['holds']} hold, {count['reversed']} are reversed and {count['inconclusive']} are not "
        f"decided: {outcome['ruled out']} ruled out"
    )
    assert quoted in page, quoted
    assert f"and {outcome['inconclusive']} inconclusive (the second verdict column" in page


def _states(store: Path, state: dict, data_root: Path) -> Counter[str]:
    """Each claim's state under today's rule, from the records in ``store`` and ``state``'s design."""
    manifest = manifest_of(NIGHT)
    design = state["design"]
    effect = parse_effect(design["effect"])
    stopped = stop_reason(state)
    analysis = Analysis(
        sequential=True,
        mixture_c=design["mixture_c"],
        effect=effect,
        max_seeds=design["max_seeds"],
        stopped=stopped,
    )
    specs = [s for s in load_table_specs(manifest["specs"]) if s.claims]
    results = build_claims(
        specs,
        RunStore(store),
        "night",
        overrides=manifest["overrides"],
        data_root=data_root,
        analysis=analysis,
    )
    return Counter(s.state for s in claim_states(results, analysis))


def _store(tmp: Path, folders: list[Path], state: Path) -> Path:
    (tmp / "records").mkdir(parents=True)
    for folder in folders:
        for path in folder.glob("*.json"):
            shutil.copy(path, tmp / "records")
    shutil.copy(state, tmp / "sequential.json")
    return tmp


ORDINALS = {4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth"}


def _slices(until: Path) -> dict[int, tuple[Path, Path]]:
    """Each slice from the fourth on: its records folder and its state (the latest's is sequential.json)."""
    numbers = sorted(int(f.name.removeprefix("records-slice")) for f in until.glob("records-slice*"))
    return {
        n: (
            until / f"records-slice{n}",
            until / ("sequential.json" if n == numbers[-1] else f"sequential-slice{n}.json"),
        )
        for n in numbers
    }


def test_the_until_decided_slices_are_their_records_their_states_and_the_claims_they_give(
    data_root: Path, tmp_path: Path
) -> None:
    """docs/night/until-decided: the records the budgeted ``--until-decided`` grids added to the
    night's (the first three slices' in ``records/``, each later slice's in its own folder), each
    slice's state, the claims rendered from all of them, and the counts docs/replication.md quotes."""
    until = NIGHT / "until-decided"
    slices = _slices(until)
    assert min(slices) == 4 and sorted(slices) == list(range(4, 4 + len(slices)))
    third = json.loads((until / "sequential-slice3.json").read_text(encoding="utf-8"))
    states = {n: json.loads(state.read_text(encoding="utf-8")) for n, (_, state) in slices.items()}
    for state in (third, *states.values()):
        assert state["design"]["test"] == "sequential" and state["design"]["profile"] == "night"
    seen = {p.name for p in (NIGHT / "runs" / "records").glob("*.json")}
    folders = [NIGHT / "runs" / "records"]
    for folder in [until / "records", *(records for records, _ in slices.values())]:
        added = sorted(folder.glob("*.json"))
        assert added and not {p.name for p in added} & seen, folder  # runs no earlier part had
        for path in added:
            record = json.loads(path.read_text(encoding="utf-8"))
            assert record["status"] == "finished" and record["config"]["seed"] >= 47
        seen |= {p.name for p in added}
        folders.append(folder)
    for n, (records, _) in slices.items():
        assert sum(r["finished"] for r in states[n]["rounds"]) == len(list(records.glob("*.json"))), n

    latest = max(slices)
    store = _store(tmp_path / "all", folders, slices[latest][1])
    manifest = manifest_of(NIGHT)
    overrides = override_args(manifest["overrides"])
    args = ["claims", *manifest["specs"], "--profile", "night", *overrides, "--runs-dir", str(store)]
    assert main([*args, "--data-dir", str(data_root), "--out", str(tmp_path / "claims")]) == 0
    fresh = (tmp_path / "claims" / "claims.md").read_text(encoding="utf-8")
    assert fresh == (until / "claims" / "claims.md").read_text(encoding="utf-8")
    assert "95% CS" in fresh  # tested with the confidence sequence, not the fixed interval

    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    counts = third["counts"]  # as the third slice's grid wrote them, in the words of its day
    quoted = f"decided {counts['decided']}, futile {counts['futile']}, undecided {counts['undecided']}"
    assert f"after it: {quoted}" in page, quoted
    # the third slice's records under today's rule (claims_cmd reads effect and most seeds from the state)
    store3 = _store(tmp_path / "three", folders[:2], until / "sequential-slice3.json")
    then = _ordered(_states(store3, third, data_root))
    assert f"the same records give: {then}" in page, then
    # the later slices' grids wrote today's words, and the reporter agrees with each on its records
    for n, (_, state) in slices.items():  # folders: the night's, slices 1-3's, then slice 4's, 5's, ...
        here = store if n == latest else _store(tmp_path / str(n), folders[: n - 1], state)
        now = _states(here, states[n], data_root)
        assert dict(now) == {k: v for k, v in states[n]["counts"].items() if v}, n
        assert f"after the {ORDINALS[n]} slice: {_ordered(now)}" in page, _ordered(now)
    # the claims rendered from every slice, raw and after Holm, as the page quotes them
    claims = json.loads((until / "claims" / "claims.json").read_text(encoding="utf-8"))["claims"]
    distinct = [c for c in claims if not c["same_as"]]
    raw, held = Counter(c["verdict"] for c in distinct), Counter(c["outcome"] for c in distinct)
    quoted = (
        f"of the {len(distinct)} distinct comparisons, with the confidence sequence, raw: "
        + ", ".join(f"{v} {raw[v]}" for v in ("holds", "reversed", "inconclusive"))
        + "; after Holm: "
        + ", ".join(f"{v} {held[v]}" for v in ("holds", "reversed", *STATES[1:]) if held[v])
        + f"; {raw['not run']} not run at this encoder"
    )
    assert quoted in page, quoted


def _ordered(counts: Counter[str]) -> str:
    return ", ".join(f"{word} {counts[word]}" for word in STATES)
