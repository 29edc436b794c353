"""A plan against its store: a resumed grid runs what is left, the claims-only cut, the dry-run listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.grid.plan.status import attach_status, claims_only, describe
from harness.specs.cells import expand
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore
from tests.helpers import fake_train, make_record


def test_resume_after_interrupted_grid(corpus_root: Path, tmp_path: Path) -> None:
    """Some runs finished, one left running by a kill, one failed: resuming finishes the rest."""
    specs = load_table_specs(["simcsepp_table1", "simcsepp_table2"])
    store = RunStore(tmp_path / "runs")
    plan = attach_status(expand(specs, "smoke", data_root=corpus_root), store)
    runs = plan.runs
    assert len(runs) >= 5
    for r in runs[:2]:
        fake_train(r.config, corpus_root, store, avg=50.0)
    store.save(make_record(runs[2].config, "running"))
    store.save(make_record(runs[3].config, "failed"))
    plan = attach_status(expand(specs, "smoke", data_root=corpus_root), store)
    assert plan.counts() == {"finished": 2, "running": 1, "failed": 1, "missing": len(runs) - 4}
    assert [r.run_id for r in plan.pending(retry_failed=False)] == [runs[2].run_id] + [
        r.run_id for r in runs[4:]
    ]
    pending = plan.pending()
    assert {r.run_id for r in pending} == {r.run_id for r in runs[2:]}
    text = "\n".join(describe(plan))
    assert "[done]" in text and "[todo]" in text and "1 interrupted, 1 failed" in text
    for r in pending:
        fake_train(r.config, corpus_root, store, avg=50.0)
    final = attach_status(expand(specs, "smoke", data_root=corpus_root), store)
    assert final.pending() == []
    records = store.records()
    assert len(records) == len(runs)
    assert sorted(r["run_id"] for r in records) == sorted(r.run_id for r in runs)
    assert all(r["status"] == "finished" for r in records)


def test_claims_only_keeps_the_runs_that_claims_compare(
    corpus_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = load_table_specs(["whitenedcse_table5", "whitenedcse_table6"])
    plan = expand(specs, "cpu", seeds=2, data_root=corpus_root)
    kept, left_out = claims_only(plan, specs)
    claimed = {(s.name, k) for s in specs for c in s.claims for k in (c.better, c.worse)}
    assert kept.runs and left_out and len(kept.runs) + len(left_out) == len(plan.runs)
    for run in kept.runs:
        assert any(tuple(u.split(": ", 1)) in claimed for u in run.used_by)
    for run in left_out:
        assert not any(tuple(u.split(": ", 1)) in claimed for u in run.used_by)
    # Table 5 claims only m = 3 over m = 2; m = 4 and 5 are rows no claim reads.
    for m in (4, 5):
        ids = {c.run_id() for c in plan.cell("whitenedcse_table5", f"STS-Avg. [num_positives={m}]").configs}
        assert ids <= {r.run_id for r in left_out}
    m3 = plan.cell("whitenedcse_table5", "STS-Avg. [num_positives=3]").configs[0].run_id()
    shared = next(r for r in kept.runs if r.run_id == m3)
    assert len(shared.used_by) > 1  # a kept run keeps every use (its tables still read it)
    args = [
        "grid",
        "whitenedcse_table5",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--data-dir",
        str(corpus_root),
    ]
    assert main([*args, "--dry-run", "--claims-only"]) == 0
    out = capsys.readouterr().out
    assert "claims only: 2 run(s) that the claims compare; 2 run(s) that no claim reads are left out" in out
    assert "2 distinct runs" in out and "0 finished, 2 to run" in out
