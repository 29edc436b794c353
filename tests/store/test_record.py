"""Run records: every schema key at the start, and records checked against the typed record as they
are read (a field of the wrong type is dropped alone and named)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.store.provenance import code_version
from harness.store.record import SCHEMA_VERSION, check_record, new_record
from tests.helpers import NIGHT_RECORDS


def test_new_record_has_every_schema_key(tmp_path: Path) -> None:
    from harness.store.run_config import resolve_config

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"s {i}" for i in range(20)) + "\n")
    config = resolve_config("simcse", profile="smoke", overrides={"corpus": str(corpus)})
    rec = new_record(config)
    from harness.store.record import RunRecord

    # every key the typed record declares (the NotRequired ones are written only when they apply)
    written_later = {
        "checkpoint",
        "resumed_from_step",
        "attempt",
        "final_time_s",
        "final_seconds",
        "first_step_s",
        "peak_rss_mb",
        "final_threads",
        "step0_probe_cached",
        "error_details",
    }
    assert set(rec) == set(RunRecord.__annotations__) - written_later
    assert rec["schema_version"] == SCHEMA_VERSION and rec["provenance"] is None and rec["method_notes"] == {}
    assert rec["run_id"] == config.run_id() and rec["status"] == "running"
    assert rec["config"] == config.to_dict()
    assert isinstance(code_version(), str) and code_version()


def night_record() -> dict[str, Any]:
    path = sorted(NIGHT_RECORDS.glob("*.json"))[0]
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_every_committed_record_is_valid_and_read_as_it_is() -> None:
    for path in sorted(NIGHT_RECORDS.glob("*.json")):
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
        ("config", None, "config (a null, not an object)"),
        ("best_stsb_dev", math.inf, "best_stsb_dev (inf, not a finite number)"),
    ],
)
def test_a_record_without_a_usable_status_or_config_is_skipped(field: str, value: Any, problem: str) -> None:
    data = night_record()
    data[field] = value
    assert check_record(data) == (None, [problem])


def test_a_record_without_a_config_is_not_read() -> None:
    data = night_record()
    del data["config"]
    assert check_record(data) == (None, ["config (missing: the record says nothing of the run it scores)"])


def test_a_nan_or_an_infinity_anywhere_refuses_the_record_naming_where() -> None:
    # Python's JSON reader takes NaN and Infinity; the store never writes them (they become null)
    text = json.dumps(night_record()).replace('"avg": 76.71285714285715', '"avg": NaN', 1)
    data = json.loads(text)
    assert "NaN" in text and check_record(data) == (None, ["final.sts.avg (nan, not a finite number)"])
    data = night_record()
    data["trajectory"][1]["loss"] = -math.inf
    assert check_record(data) == (None, ["trajectory[1].loss (-inf, not a finite number)"])
