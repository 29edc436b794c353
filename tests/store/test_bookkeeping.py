"""Records of runs that did not end by themselves: failed with a reason, or interrupted (a run left
waiting for a lost node included); a finished record is never touched, and a full disk leaves the
record as it was."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from harness.atomic import failed_write
from harness.store.bookkeeping import (
    ensure_failed_record,
    ensure_interrupted_record,
    mark_interrupted,
    short_error,
)
from harness.store.record import new_record
from harness.store.run_config import RunConfig
from harness.store.run_store import RunStore
from tests.helpers import SMOKE_SPEC, make_data_root, make_record, smoke_config


@pytest.fixture
def configs(corpus_root: Path) -> list[RunConfig]:
    return [smoke_config(corpus_root, seed=seed) for seed in (1, 2, 3)]


def test_a_run_without_a_record_or_still_running_gets_a_failed_one(
    configs: list[RunConfig], tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    missing, running = configs[:2]
    store.save(make_record(running, "running"))
    assert ensure_failed_record(store, missing, "the worker died") is True
    assert ensure_failed_record(store, running, "the worker died") is True
    for config in (missing, running):
        record = store.load(config.run_id())
        assert record is not None and record["status"] == "failed"
        assert record["error"] == "the worker died" and record["finished_at"]
        assert record["config"] == config.to_dict()


@pytest.mark.parametrize("status", ["failed", "finished"])
def test_a_failed_or_finished_record_is_left_alone(
    status: str, configs: list[RunConfig], tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    store.save(make_record(configs[0], status, error="its own reason"))
    before = store.load(configs[0].run_id())
    assert ensure_failed_record(store, configs[0], "the worker died") is False
    assert store.load(configs[0].run_id()) == before


def test_a_record_that_cannot_be_written_is_not_claimed_written(
    configs: list[RunConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "runs")
    store.save(make_record(configs[1], "running"))

    def full(record: Any) -> Path:
        raise failed_write(store.path(record["run_id"]), OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr(store, "save", full)
    assert ensure_failed_record(store, configs[0], "the worker died") is False
    assert mark_interrupted(store, configs, "stopped") == []
    assert store.load(configs[0].run_id()) is None
    assert (store.load(configs[1].run_id()) or {}).get("status") == "running"


def test_running_records_are_marked_interrupted_and_named(configs: list[RunConfig], tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    running, failed, absent = configs
    store.save(make_record(running, "running"))
    store.save(make_record(failed, "failed", error="boom"))
    assert mark_interrupted(store, configs, "the grid stopped") == [running.run_id()]
    record = store.load(running.run_id())
    assert record is not None and (record["status"], record["error"]) == ("interrupted", "the grid stopped")
    assert record["finished_at"]
    assert (store.load(failed.run_id()) or {}).get("error") == "boom"
    assert store.load(absent.run_id()) is None
    assert mark_interrupted(store, configs, "again") == []  # nothing left running


def test_a_running_attempt_beside_a_finished_record_is_marked_not_the_record(
    configs: list[RunConfig], tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    config = configs[0]
    finished = make_record(config, final={"sts": {"avg": 70.0}}, started_at="t0")
    store.save(finished)
    store.save(make_record(config, "running", started_at="t1"))  # a re-run: an attempt beside it
    assert mark_interrupted(store, [config], "stopped") == [config.run_id()]
    assert [(a["status"], a["error"]) for a in store.attempts(config.run_id())] == [
        ("interrupted", "stopped")
    ]
    assert (store.load(config.run_id()) or {}).get("status") == "finished"


def test_a_trials_error_is_one_line() -> None:
    traceback = "Traceback (most recent call last):\n  File 'x.py', line 1\nRuntimeError: boom\n\n"
    assert short_error(traceback) == "RuntimeError: boom"
    ray = (
        "The actor died unexpectedly before finishing this task.\n\tclass_name: ImplicitFunc\n"
        "\tpid: 4242\n Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits\n"
        " with a connection error code 2. End of file. Some common causes include: (1) OOM"
    )
    assert short_error(ray) == (
        "the trial's Ray worker (pid 4242) died: SYSTEM_ERROR: Worker unexpectedly exits with a "
        "connection error code 2. End of file. (Ray names as common causes the OOM killer, "
        "`ray stop --force`, or a crash such as SIGSEGV)"
    )
    assert (
        short_error(None) == short_error("  \n") == "the trial errored in its Ray worker (Ray gave no reason)"
    )


def test_a_waiting_run_without_a_record_gets_an_interrupted_one(tmp_path: Path, mini_data_root: Path) -> None:
    from harness.specs.cells import expand
    from harness.specs.parse import load_table_spec

    data = make_data_root(tmp_path / "data")
    config = expand([load_table_spec(SMOKE_SPEC)], "smoke", seeds=1, data_root=data).runs[0].config
    store = RunStore(tmp_path / "runs")
    assert ensure_interrupted_record(store, config, "no node")
    record = store.load(config.run_id())
    assert record is not None and record["status"] == "interrupted" and record["error"] == "no node"
    finished = dict(new_record(config), status="finished")
    store.save(finished)
    assert not ensure_interrupted_record(store, config, "no node")
