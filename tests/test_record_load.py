"""Records are validated against the typed record as they are read: a field of the wrong type is
skipped with one warning line naming the file and the field, and everything else still renders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.store.record import check_record
from harness.store.run_store import RunStore

REPO_ROOT = Path(__file__).resolve().parents[1]
NIGHT = REPO_ROOT / "docs" / "night" / "runs" / "records"
NIGHT_FLAGS = ["--profile", "night", "--override", "precision=bf16", "--override", "eval_precision=bf16"]


def night_record() -> dict[str, Any]:
    path = sorted(NIGHT.glob("*.json"))[0]
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_every_committed_record_is_valid_and_read_as_it_is() -> None:
    for path in sorted(NIGHT.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        checked, problems = check_record(data)
        assert problems == [] and checked is data, (path, problems)


def test_a_field_of_the_wrong_type_is_dropped_alone_and_named() -> None:
    data = night_record()
    data["final"]["sts"] = "oops"
    data["final"]["sts_aggregates"]["STS12"]["all"] = [1]
    data["trajectory"][1]["loss"] = "x"
    data["trajectory"].append("not a point")
    data["best_stsb_dev"] = "high"
    data["method_notes"] = ["a", "list"]
    checked, problems = check_record(data)
    assert checked is not None and checked is not data
    assert problems == [
        "method_notes (a list, not object)",
        "trajectory[1].loss (a str, not a number)",
        f"trajectory[{len(data['trajectory']) - 1}] (not a point with an integer step)",
        "best_stsb_dev (a str, not number or null)",
        "final.sts (a str, not an object)",
        "final.sts_aggregates.STS12.all (a list, not a number)",
    ]
    assert "sts" not in checked["final"] and checked["method_notes"] == {} and "best_stsb_dev" not in checked
    assert "all" not in checked["final"]["sts_aggregates"]["STS12"]
    assert (
        checked["final"]["sts_aggregates"]["STS12"]["mean"]
        == data["final"]["sts_aggregates"]["STS12"]["mean"]
    )
    assert (
        "loss" not in checked["trajectory"][1] and len(checked["trajectory"]) == len(data["trajectory"]) - 1
    )
    assert data["final"]["sts"] == "oops"  # the record read is not changed


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("status", "done", "status ('done' is not one of running, finished, failed, interrupted)"),
        ("config", "minilm", "config (a str, not an object)"),
    ],
)
def test_a_record_without_a_usable_status_or_config_is_skipped(field: str, value: Any, problem: str) -> None:
    data = night_record()
    data[field] = value
    assert check_record(data) == (None, [problem])


def test_the_store_warns_once_per_file_naming_the_field(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    store.records_dir.mkdir(parents=True)
    for path in sorted(NIGHT.glob("*.json"))[:3]:
        shutil.copy(path, store.records_dir / path.name)
    bad = sorted(store.records_dir.glob("*.json"))[1]
    data = json.loads(bad.read_text(encoding="utf-8"))
    data["final"] = {"sts": "oops"}
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.warns(RuntimeWarning) as caught:
        records = store.records()
    assert len(records) == 3 and len(caught) == 1
    assert str(caught[0].message) == (
        f"run record {bad}: skipping field(s) of the wrong type: final.sts (a str, not an object)"
    )


def test_tables_claims_and_report_render_around_a_bad_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(NIGHT, runs / "records")
    manifest = json.loads((REPO_ROOT / "docs" / "night" / "manifest.json").read_text(encoding="utf-8"))
    assert "simcsepp_table3" in json.dumps(manifest)
    bad = sorted((runs / "records").glob("*.json"))[2]
    data = json.loads(bad.read_text(encoding="utf-8"))
    data["final"]["sts"] = "oops"
    bad.write_text(json.dumps(data), encoding="utf-8")
    common = ["simcsepp_table3", *NIGHT_FLAGS, "--runs-dir", str(runs)]
    line = f"run record {bad}: skipping field(s) of the wrong type: final.sts (a str, not an object)"
    for argv in (
        ["tables", *common, "--out", str(tmp_path / "tables")],
        ["claims", *common, "--out", str(tmp_path / "claims")],
        ["report", *common, "--results", str(tmp_path)],
    ):
        with pytest.warns(RuntimeWarning) as caught:
            assert main(argv) == 0
        assert {str(w.message) for w in caught} == {line}
    assert "Traceback" not in capsys.readouterr().err
    assert (tmp_path / "tables" / "simcsepp_table3.tex").is_file() and (tmp_path / "report.html").is_file()


def test_the_command_line_shows_a_warning_as_one_line_once() -> None:
    import warnings

    from harness import cli

    before = warnings.formatwarning
    text = "run record x.json: skipping field(s) of the wrong type: final"
    with cli._one_line_warnings():
        shown = [
            warnings.formatwarning(text, RuntimeWarning, "harness/store/run_store.py", 1) for _ in range(3)
        ]
        other = warnings.formatwarning("another", UserWarning, "x.py", 2, None)
    assert shown == [f"warning: {text}\n", "", ""] and other == "warning: another\n"
    assert warnings.formatwarning is before
