"""benchmarks/bench_record_precision.py: a bf16-scored record trained again with fp32 final
evaluation repeats its training bit for bit here, harness eval scores the saved encoder as the run
did, and the printed differences are bf16 minus fp32 on the same weights."""

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

import bench_record_precision


def test_a_bf16_scored_record_against_fp32(
    linked_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = resolve_config("simcse", None, "smoke", {"eval_precision": "bf16"}, data_root=linked_root)
    store = RunStore(tmp_path / "night")
    record = train_run(config, linked_root, store, log=None)
    argv = [str(store.root / "records"), record["run_id"], "--runs-dir", str(tmp_path / "fp32")]
    out = tmp_path / "precision.json"
    assert bench_record_precision.main([*argv, "--data-dir", str(linked_root), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["runs"]
    again = RunStore(tmp_path / "fp32").load(row["fp32_run_id"])
    assert again is not None and again["config"]["eval_precision"] == "fp32"
    assert row["training_bit_for_bit"] and row["eval_path_equals_run"]
    sts = row["tasks"]["sts/avg"]
    assert sts["fp32"] == again["final"]["sts"]["avg"] and sts["record_bf16"] == record["final"]["sts"]["avg"]
    assert sts["bf16"] == pytest.approx(
        record["final"]["sts"]["avg"], abs=1e-9
    )  # same weights, same precision
    assert sts["bf16_minus_fp32"] == sts["bf16"] - sts["fp32"] != 0
    assert "largest |bf16 - fp32| on the same weights" in capsys.readouterr().out
    # a record scored in fp32 has nothing to compare
    assert bench_record_precision.main([str(tmp_path / "fp32" / "records"), again["run_id"], *argv[2:]]) == 2
