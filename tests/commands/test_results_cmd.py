"""``harness results``: the records as a CSV, and ``--format mteb`` files that MTEB's result loader
reads."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

import harness
from harness.cli import main
from harness.evaluation.tasks import mteb_tasks
from tests.helpers import NIGHT, override_args

OVERRIDES = {"precision": "bf16", "eval_precision": "bf16"}


def test_harness_results_writes_a_csv_and_mteb_files(tmp_path: Path, data_root: Path) -> None:
    common = ["--profile", "night", "--runs-dir", str(NIGHT / "runs"), "--data-dir", str(data_root)]
    common += override_args(OVERRIDES)
    assert main(["results", str(tmp_path / "night.csv"), "--spec", "whitenedcse_table5", *common]) == 0
    header = (tmp_path / "night.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == ",".join(harness.results.COLUMNS)
    out = tmp_path / "mteb"
    assert main(["results", "--format", "mteb", str(out), "--spec", "cpu_demo", *common]) == 0
    models = sorted((out / "results").iterdir())
    assert len(models) == 15 and all(m.name.startswith("cse-harness__") for m in models)
    (revision,) = models[0].iterdir()
    files = sorted(p.name for p in revision.iterdir())
    assert files == sorted(["model_meta.json", *(f"{name}.json" for name, _rev in mteb_tasks().values())])
    run_id = models[0].name.removeprefix("cse-harness__")
    record = json.loads((NIGHT / "runs" / "records" / f"{run_id}.json").read_text(encoding="utf-8"))
    stsb = json.loads((revision / "STSBenchmark.json").read_text(encoding="utf-8"))
    assert stsb["task_name"] == "STSBenchmark" and stsb["dataset_revision"] == mteb_tasks()["STSBenchmark"][1]
    (test,) = stsb["scores"]["test"]
    assert test["main_score"] == pytest.approx(record["final"]["sts"]["STSBenchmark"] / 100)
    assert test["hf_subset"] == "default" and test["languages"] == ["eng-Latn"]
    assert set(stsb["scores"]) == {"test"}  # the dev score stays in the record: MTEB would average it in
    meta = json.loads((revision / "model_meta.json").read_text(encoding="utf-8"))
    assert meta["name"] == f"cse-harness/{run_id}" and meta["embed_dim"] == 384
    assert meta["adapted_from"] == "sentence-transformers/all-MiniLM-L6-v2"
    if importlib.util.find_spec("mteb") is None:
        pytest.skip("mteb is not installed: its loader's check is skipped (the files' shape was checked)")
    import mteb

    loaded = mteb.ResultCache(cache_path=out).load_results(include_remote=False, validate_and_filter=True)
    assert len(loaded.model_results) == 15
    ours = {name: task for task, (name, _rev) in mteb_tasks().items()}
    for model in loaded.model_results:  # the round trip: MTEB's score of each task is the record's
        assert {t.task_name for t in model.task_results} == set(ours)
        run = model.model_name.rsplit("/", 1)[-1]
        sts = json.loads((NIGHT / "runs" / "records" / f"{run}.json").read_text(encoding="utf-8"))["final"][
            "sts"
        ]
        for t in model.task_results:
            assert not math.isnan(t.get_score()) and t.get_score() == pytest.approx(
                sts[ours[t.task_name]] / 100
            )
