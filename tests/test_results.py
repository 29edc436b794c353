"""``harness.results``: run records as a tidy DataFrame whose (spec, paper_row) groups are the tables' cells;
importing the harness does not load it (nor pandas). (``harness results``:
tests/commands/test_results_cmd.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.errors import ConfigError
from tests.doc_numbers import demo_averages
from tests.helpers import NIGHT, REPO_ROOT

OVERRIDES = {"precision": "bf16", "eval_precision": "bf16"}


def test_the_dataframe_groups_into_the_tables_cells(data_root: Path) -> None:
    results = harness.results  # loaded on first use
    df = results.load(
        NIGHT / "runs", specs=["cpu_demo"], profile="night", overrides=OVERRIDES, data_dir=data_root
    )
    assert tuple(df.columns) == results.COLUMNS
    assert set(df["spec"]) == {"cpu_demo"} and df["seed"].notna().all()
    avg = (
        df[(df.group == "sts") & (df.task == "avg")].groupby("paper_row").score.agg(["mean", "std", "count"])
    )
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
    assert df.groupby("paper_row")["parameters"].nunique().max() == 1
    assert set(df["measured"]) == {"all-MiniLM-L6-v2"}  # what ran, where the paper's rows say BERT-base
    dev = df[df.group == "dev"]
    assert set(dev.task) == {results.DEV_TASK} and len(dev) == 15


def test_a_run_two_tables_show_is_a_line_for_each(data_root: Path) -> None:
    df = harness.results.load(
        NIGHT / "runs", ["cpu_demo", "simcsepp_table3"], "night", overrides=OVERRIDES, data_dir=data_root
    )
    shared = df[(df.method == "simcse") & (df.task == "avg") & (df.group == "sts")]
    assert set(zip(shared.spec, shared.paper_row, strict=True)) >= {
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
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert out.stdout.split() == ["False", "False"]
