"""``harness.results``: run records as a tidy DataFrame whose (spec, row) groups are the tables' cells,
and ``harness results --format mteb`` files that MTEB's result loader reads."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from doc_numbers import demo_averages

import harness
from harness.cli import main
from harness.errors import ConfigError
from harness.evaluation.tasks import mteb_tasks

ROOT = Path(__file__).resolve().parents[1]
NIGHT = ROOT / "docs" / "night"
OVERRIDES = {"precision": "bf16", "eval_precision": "bf16"}


def test_the_dataframe_groups_into_the_tables_cells(data_root: Path) -> None:
    results = harness.results  # loaded on first use
    df = results.load(
        NIGHT / "runs", specs=["cpu_demo"], profile="night", overrides=OVERRIDES, data_dir=data_root
    )
    assert tuple(df.columns) == results.COLUMNS
    assert set(df["spec"]) == {"cpu_demo"} and df["seed"].notna().all()
    avg = df[(df.group == "sts") & (df.task == "avg")].groupby("row").score.agg(["mean", "std", "count"])
    rendered = demo_averages((NIGHT / "tables" / "tables.md").read_text(encoding="utf-8"))
    rows = {
        "SimCSE": "SimCSE-BERT-base",
        "WhitenedCSE": "WhitenedCSE-BERT-base",
        "SimCSE++": "SimCSE++-BERT-base",
    }
    for method, (_paper, mean, sd) in rendered.items():
        line = avg.loc[rows[method]]
        assert f"{line['mean']:.2f}" == mean and f"{line['std']:.2f}" == sd and line["count"] == 5
    # a method's configurations stay apart: its row and parameters say which one
    assert df.groupby("row")["parameters"].nunique().max() == 1
    dev = df[df.group == "dev"]
    assert set(dev.task) == {results.DEV_TASK} and len(dev) == 15


def test_a_run_two_tables_show_is_a_line_for_each(data_root: Path) -> None:
    df = harness.results.load(
        NIGHT / "runs", ["cpu_demo", "simcsepp_table3"], "night", overrides=OVERRIDES, data_dir=data_root
    )
    shared = df[(df.method == "simcse") & (df.task == "avg") & (df.group == "sts")]
    assert set(zip(shared.spec, shared.row, strict=True)) >= {
        ("cpu_demo", "SimCSE-BERT-base"),
        ("simcsepp_table3", "SimCSE-BERT-base"),
        ("simcsepp_table3", "SimCSE-SBERT-base"),
    }


def test_without_specs_every_finished_record_once() -> None:
    df = harness.results.load(NIGHT / "runs")
    records = list((NIGHT / "runs" / "records").glob("*.json"))
    assert df.run_id.nunique() == len(records) and df.spec.isna().all()
    with pytest.raises(ConfigError, match="does not exist"):
        harness.results.load(NIGHT / "no_such_runs")


def test_importing_the_harness_stays_cheap() -> None:
    code = (
        "import sys, harness.errors, harness; "
        "print('pandas' in sys.modules, 'harness.results' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


def test_harness_results_writes_a_csv_and_mteb_files(tmp_path: Path, data_root: Path) -> None:
    common = ["--profile", "night", "--runs-dir", str(NIGHT / "runs"), "--data-dir", str(data_root)]
    common += [a for k, v in OVERRIDES.items() for a in ("--override", f"{k}={v}")]
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
    assert stsb["scores"]["validation"][0]["main_score"] == pytest.approx(record["best_stsb_dev"] / 100)
    meta = json.loads((revision / "model_meta.json").read_text(encoding="utf-8"))
    assert meta["name"] == f"cse-harness/{run_id}" and meta["embed_dim"] == 384
    assert meta["adapted_from"] == "sentence-transformers/all-MiniLM-L6-v2"
    if importlib.util.find_spec("mteb") is None:
        pytest.skip("mteb is not installed: its loader's check is skipped (the files' shape was checked)")
    import mteb

    loaded = mteb.ResultCache(out).load_results(include_remote=False, validate_and_filter=True)
    assert len(loaded.model_results) == 15
    for model in loaded.model_results:
        assert {t.task_name for t in model.task_results} == {name for name, _rev in mteb_tasks().values()}
        assert all(0 < t.get_score() < 1 and not math.isnan(t.get_score()) for t in model.task_results)
