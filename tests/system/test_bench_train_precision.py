"""benchmarks/bench_train_precision.py: a bf16 record's run trained again in both arms on this
machine; the bf16 arm repeats the record's training, the fp32 arm is another run id, the printed
differences are fp32 minus bf16, a second call trains nothing, and bad inputs exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.run.training import train_run
from harness.store.run_config import resolve_config
from harness.store.run_store import RunStore
from tests.helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import bench_train_precision


def test_bf16_against_fp32_training(
    linked_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    night = RunStore(tmp_path / "night")
    records = [
        train_run(
            resolve_config(method, None, "smoke", {"precision": "bf16", "seed": seed}, data_root=linked_root),
            linked_root,
            night,
            log=None,
        )
        for method in ("simcse", "whitenedcse")
        for seed in (42, 43)
    ]
    out = tmp_path / "precision.json"
    argv = [
        str(night.records_dir),
        *(r["run_id"] for r in records),
        "--runs-dir",
        str(tmp_path / "both"),
        "--data-dir",
        str(linked_root),
        "--jobs",
        "2",
        "--json",
        str(out),
    ]
    assert bench_train_precision.main(argv) == 0
    result = json.loads(out.read_text())
    rows = {row["run_id"]: row for row in result["runs"]}
    assert set(rows) == {r["run_id"] for r in records}
    both = RunStore(tmp_path / "both")
    for record in records:
        row = rows[record["run_id"]]
        bf16, fp32 = (both.load(row["arm_run_ids"][arm]) for arm in ("bf16", "fp32"))
        assert bf16 is not None and fp32 is not None
        assert bf16["config"]["precision"] == "bf16" and fp32["config"]["precision"] == "fp32"
        assert bf16["config"]["final_tasks"] == fp32["config"]["final_tasks"] == "sts"
        assert (
            bf16["trajectory"][-1]["stsb_dev"] == record["trajectory"][-1]["stsb_dev"]
        )  # same run, same machine
        assert row["fp32_minus_bf16"]["sts_avg"] == fp32["final"]["sts"]["avg"] - bf16["final"]["sts"]["avg"]
    diffs = [row["fp32_minus_bf16"]["sts_avg"] for row in rows.values()]
    assert result["all_runs"]["mean"] == pytest.approx(sum(diffs) / 4, abs=1e-12)
    whitened = next(c for c in result["configs"].values() if c["method"] == "whitenedcse")
    assert whitened["seeds"] == [42, 43] and whitened["seed_sd_from"] == 2
    against = next(iter(result["against_simcse"].values()))
    by_seed = {row["seed"]: row for row in rows.values() if row["method"] == "simcse"}
    expected = (
        sum(
            row["sts_avg"]["fp32"] - by_seed[row["seed"]]["sts_avg"]["fp32"]
            for row in rows.values()
            if row["method"] == "whitenedcse"
        )
        / 2
    )
    assert against["fp32"]["mean"] == pytest.approx(expected, abs=1e-12)
    low, high = against["fp32"]["low"], against["fp32"]["high"]
    assert low is not None and high is not None and low < against["fp32"]["mean"] < high
    printed = capsys.readouterr().out
    assert "per configuration" in printed and "against SimCSE" in printed and "trained 8 arms" in printed
    # a second call finds every arm in its runs folder and trains nothing
    assert bench_train_precision.main(argv) == 0
    assert " arms in " not in capsys.readouterr().out
    # --report compares what is there and trains nothing: a run without its arms is left out
    extra = train_run(
        resolve_config("simcse", None, "smoke", {"precision": "bf16", "seed": 44}, data_root=linked_root),
        linked_root,
        night,
        log=None,
    )
    assert bench_train_precision.main([*argv[:5], extra["run_id"], *argv[5:], "--report"]) == 0
    assert len(json.loads(out.read_text())["runs"]) == 4 and " arms in " not in capsys.readouterr().out
    # a run that is not in the folder, or that did not train in bf16, exits 2 with one line
    assert bench_train_precision.main([*argv[:1], "simcse-000000000000", *argv[5:]]) == 2
    fp32_id = rows[records[0]["run_id"]]["arm_run_ids"]["fp32"]
    assert bench_train_precision.main([str(both.records_dir), fp32_id, *argv[5:]]) == 2
    assert bench_train_precision.main([*argv, "--jobs", "0"]) == 2
    assert capsys.readouterr().err.count("error:") == 3
