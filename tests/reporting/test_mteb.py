"""Run records in MTEB's result format (harness.reporting.mteb): one model folder per finished run with
STS scores, each STS task MTEB has as a TaskResult on MTEB's scale with its test split alone, the
code version as the revision. (``harness results --format mteb`` and MTEB's own
loader: tests/commands/test_results_cmd.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.evaluation.tasks import mteb_tasks
from harness.reporting.mteb import FORMAT_VERSION, model_meta, revision, task_results, write_mteb


def record(run_id: str, status: str = "finished", **sts: float) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "status": status,
        "code_version": "git:v0.1-3-gabc/def-dirty",
        "config": {"model": "random:tiny"},
        "best_stsb_dev": 81.5,
        "final": {"sts": {**sts, "avg": 70.0}, "transfer": {"MR": 80.0}},
    }


def test_each_sts_task_mteb_has_is_a_task_result_on_its_scale() -> None:
    names = mteb_tasks()
    results = task_results(record("r-1", STS12=61.25, STSBenchmark=75.5, SICKRelatedness=70.0))
    assert set(results) == {names["STS12"][0], names["STSBenchmark"][0], names["SICKRelatedness"][0]}
    stsb = results[names["STSBenchmark"][0]]
    assert stsb["dataset_revision"] == names["STSBenchmark"][1] and stsb["mteb_version"] == FORMAT_VERSION
    (test,) = stsb["scores"]["test"]
    assert test == {
        "cosine_spearman": 0.755,
        "main_score": 0.755,
        "hf_subset": "default",
        "languages": ["eng-Latn"],
    }
    # the dev score that chose the checkpoint stays in the record: MTEB's loader averages every split
    assert all(set(r["scores"]) == {"test"} for r in results.values())
    assert task_results({"final": {"sts": {"STS12": True, "STS13": None}}}) == {}  # no number, no task


def test_the_model_is_the_run_and_its_revision_the_code_version() -> None:
    rec = record("simcse-abc")
    assert revision(rec) == "v0.1-3-gabc_def-dirty"  # a folder name
    assert revision({}) == "no_revision_available"
    meta = model_meta(rec, "bert-base-uncased", 768)
    assert meta["name"] == "cse-harness/simcse-abc" and meta["revision"] == "v0.1-3-gabc_def-dirty"
    assert meta["adapted_from"] == "bert-base-uncased" and meta["embed_dim"] == 768
    assert meta["similarity_fn_name"] == "cosine"


def test_only_finished_runs_with_sts_scores_are_written(tmp_path: Path) -> None:
    records = [
        record("a-1", STSBenchmark=75.0),
        record("b-2", status="failed", STSBenchmark=75.0),
        {**record("c-3"), "final": {"sts": {"avg": 70.0}}},  # no task MTEB has
    ]
    written = write_mteb(records, tmp_path, base_model={"random:tiny": None}, embed_dim={"random:tiny": 32})
    folder = tmp_path / "results" / "cse-harness__a-1" / "v0.1-3-gabc_def-dirty"
    assert sorted(written) == sorted([folder / "model_meta.json", folder / "STSBenchmark.json"])
    assert json.loads((folder / "model_meta.json").read_text(encoding="utf-8"))["embed_dim"] == 32
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["cse-harness__a-1"]
