"""harness.grid.rounds with harness.stats.decisions: ``harness grid --until-decided`` end to end
with a fast fake trainer (no Ray): rounds of seeds for undecided claims only, a claim with a true
difference decided, one without stopped as out of reach of the seeds, run ids that do not depend on
the round, a budget never exceeded, the dry run's plan, and the claims reporter reading the
sequential design."""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.cli import main
from harness.config.paths import resolve_data_root
from harness.grid.plan.cost import CostModel
from harness.grid.progress.report import GridReport
from harness.grid.rounds import SEQUENTIAL_FILE, next_seeds, schedule, stop_reason
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.stats.outcomes import parse_effect
from harness.store.record import new_record
from harness.store.run_store import RunStore
from tests.helpers import make_data_root, spec_text, write_spec

SPEC = spec_text(
    """
[[rows]]
label = "Base"
method = "simcse"
paper = [76.0]

[[rows]]
label = "Strong"
method = "simcsepp"
params = {off_dropout = false, m = 1.0}
paper = [78.0]

[[rows]]
label = "Null"
method = "simcse"
params = {temperature = 0.07}
paper = [76.5]

[[claims]]
better = "Strong"
worse = "Base"
text = "Strong beats Base"

[[claims]]
better = "Null"
worse = "Base"
text = "Null beats Base"
""",
    cites="SimCSE++ Table 3",
    title="Rounds",
    scores="stsb_dev",
    columns='["stsb_dev"]',
)
EFFECTS = {"Base": 0.0, "Strong": 0.5, "Null": 0.0}
"""The true difference of each cell from Base: the first claim is real, the second is not."""


@pytest.fixture()
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import harness.grid.tune.driver as tune_mod

    # the SentEval data is read before a round starts
    data = make_data_root(tmp_path / "data", resolve_data_root(None) / "senteval", link=True)
    spec = write_spec(tmp_path / "rounds.toml", SPEC)
    plan = expand([load_table_spec(spec)], "smoke", seeds=1, data_root=data)
    cell_of = {plan.cell("rounds", key).configs[0].config_id(): key for key in EFFECTS}
    started: list[list[str]] = []

    def fake_run_trials(configs: list[Any], data_root: Path, store: RunStore, request: Any) -> GridReport:
        """Every run finishes at once: a seed effect shared by every cell (pairing), the cell's true
        difference and a little noise of its own."""
        started.append([c.run_id() for c in configs])
        for config in configs:
            key = cell_of[config.config_id()]
            seed_rng = np.random.default_rng(config.seed)
            own = np.random.default_rng([config.seed, zlib.crc32(key.encode())])
            value = 80.0 + seed_rng.normal(0, 2.0) + EFFECTS[key] + own.normal(0, 0.2)
            record = dict(new_record(config))
            record.update(status="finished", best_stsb_dev=float(value), final={})
            store.save(record)
        return GridReport(total=len(configs), finished=len(configs))

    monkeypatch.setattr(tune_mod, "run_trials", fake_run_trials)
    runs = tmp_path / "runs"
    common = ["--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data)]
    return {
        "spec": str(spec),
        "runs": runs,
        "data": data,
        "args": [*common, "--override", "final_tasks=none"],
        "started": started,
        "cells": cell_of,
    }


def _seeds(store: RunStore, cells: dict[str, str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {key: [] for key in cells.values()}
    for record in store.records():
        out[cells[record["group_id"]]].append(record["config"]["seed"])
    return {k: sorted(v) for k, v in out.items()}


def test_rounds_decide_the_real_claim_and_stop_the_one_out_of_reach(
    setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["grid", setup["spec"], *setup["args"], "--until-decided", "--max-seeds", "12"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "claims before the first round: decided 0, ruled out 0, not enough seeds 0, undecided 2" in out
    assert "round 1: seeds up to 5 for 2 undecided claim(s): 15 run(s)" in out
    state = json.loads((setup["runs"] / SEQUENTIAL_FILE).read_text())
    assert state["design"]["test"] == "sequential" and state["design"]["correction"] == "holm"
    claims = {c["text"]: c for c in state["claims"]}
    assert claims["Strong beats Base"]["state"] == "decided"
    assert claims["Strong beats Base"]["verdict_corrected"] == "holds"
    assert claims["Null beats Base"]["state"] == "not enough seeds"
    assert "lower bound" in claims["Null beats Base"]["detail"]
    seeds = _seeds(RunStore(setup["runs"]), setup["cells"])
    # the claim the seeds cannot reach: its own cell stopped after the first round; the decided
    # claim's cells went on only until it was decided, and never past --max-seeds
    assert seeds["Null"] == list(range(42, 47))
    rounds = [r["seeds"] for r in state["rounds"]]
    assert rounds == schedule(5, 12)[: len(rounds)] and len(rounds) >= 2
    assert seeds["Strong"] == seeds["Base"] == list(range(42, 42 + rounds[-1]))
    assert claims["Strong beats Base"]["n"] == rounds[-1] <= 12
    # a seed's run id does not depend on the round that ran it: it is a fixed grid's id
    fixed = expand(
        [load_table_spec(Path(setup["spec"]))],
        "smoke",
        seeds=12,
        data_root=setup["data"],
        overrides={"final_tasks": "none"},
    )
    ids = {c.run_id() for cell in fixed.cells for c in cell.configs}
    assert {r["run_id"] for r in RunStore(setup["runs"]).records()} <= ids
    # the claims reporter tests these claims with the same sequence
    out_dir = setup["runs"].parent / "claims"
    assert main(["claims", setup["spec"], *setup["args"], "--out", str(out_dir)]) == 0
    text = capsys.readouterr().out
    assert "test: anytime-valid 95% confidence sequence" in text
    md = (out_dir / "claims.md").read_text()
    assert "| 95% CS |" in md
    data = json.loads((out_dir / "claims.json").read_text())
    assert data["analysis"]["test"] == "sequential"
    # a second grid finds nothing left to do
    assert main(args) == 0
    assert "no claim is left undecided" in capsys.readouterr().out


def test_the_budget_is_never_exceeded(setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_table_spec(Path(setup["spec"]))
    plan = expand([spec], "smoke", seeds=1, data_root=setup["data"], overrides={"final_tasks": "none"})
    one = CostModel([], "cpu").run_seconds(plan.cell("rounds", "Strong").configs[0])
    budget_h = 8.5 * one / 3600  # room for the first round's claim (10 runs) ... not even that
    args = ["grid", setup["spec"], *setup["args"], "--until-decided", "--max-seeds", "12"]
    assert main([*args, "--budget", f"{budget_h:.6f}"]) == 0
    out = capsys.readouterr().out
    assert "stopped: the budget" in out
    state = json.loads((setup["runs"] / SEQUENTIAL_FILE).read_text())
    open_ = [c for c in state["claims"] if c["state"] not in ("decided", "ruled out")]
    assert open_ and all(c["state"] == "not enough seeds" for c in open_)  # none left "undecided"
    assert any(str(c["detail"]).startswith("the budget (") for c in open_)
    assert state["counts"]["undecided"] == 0 and state["stopped"].startswith("the budget (")
    # the claims rendered from that store say what the grid said: not enough seeds, not undecided
    out_dir = setup["runs"].parent / "claims"
    assert main(["claims", setup["spec"], *setup["args"], "--out", str(out_dir)]) == 0
    rows = json.loads((out_dir / "claims.json").read_text())["claims"]
    pairs = {(c["spec"], c["better"], c["worse"]) for c in open_}
    shown = [r["outcome"] for r in rows if (r["spec"], r["better"], r["worse"]) in pairs]
    assert "not enough seeds" in shown and set(shown) <= {
        "not enough seeds",
        "no data",
    }  # nothing ran: no data
    assert not any(r["outcome"] == "undecided" for r in rows)
    # a state written before the "stopped" key: the reason its open claims carry
    old = {k: v for k, v in state.items() if k != "stopped"}
    assert stop_reason(old) == state["stopped"] and stop_reason({"claims": []}) == ""
    ran = [run for batch in setup["started"] for run in batch]
    configs = {
        c.run_id(): c
        for cell in expand(
            [spec], "smoke", seeds=12, data_root=setup["data"], overrides={"final_tasks": "none"}
        ).cells
        for c in cell.configs
    }
    model = CostModel([], "cpu")
    assert ran and sum(model.run_seconds(configs[r]) for r in ran) <= budget_h * 3600 + 1e-6
    assert len(ran) < 15  # the whole first round did not fit: fewer seeds, or one claim only


def test_the_dry_run_plans_rounds_and_power(
    setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["grid", setup["spec"], *setup["args"], "--until-decided", "--max-seeds", "12", "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "first round: seeds up to 5 for 2 undecided claim(s): 15 run(s)" in out
    assert "expected: each undecided claim to the seeds it needs" in out
    assert "at most: every undecided claim to 12 seeds: 36 run(s)" in out
    assert not setup["started"] and not (setup["runs"] / SEQUENTIAL_FILE).exists()  # nothing ran
    # with records: each undecided claim's seeds for 80 % power, for the plain grid's dry run too
    assert main(["grid", setup["spec"], *setup["args"], "--seeds", "3"]) == 0
    assert main(["grid", setup["spec"], *setup["args"], "--seeds", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "seeds for 80% power (the paired t-test" in out and "Null beats Base" in out


def test_until_decided_flags_are_checked(setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    base = ["grid", setup["spec"], *setup["args"]]
    for extra, message in [
        (["--until-decided"], "--until-decided needs --max-seeds"),
        (["--max-seeds", "9"], "--max-seeds and --budget go with --until-decided"),
        (["--until-decided", "--max-seeds", "9", "--budget", "0"], "--budget must be"),
        (["--until-decided", "--max-seeds", "3"], "below the first round's 5 seed(s)"),
        (["--until-decided", "--max-seeds", "0"], "--max-seeds must be >= 1, got 0"),
        (["--until-decided", "--max-seeds", "9", "--effect", "-1"], "--effect must be"),
    ]:
        assert main([*base, *extra, "--dry-run"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_the_schedule_and_the_effect() -> None:
    assert schedule(5, 20) == [5, 7, 9, 12, 15, 19, 20]
    assert schedule(1, 4) == [1, 2, 3, 4] and next_seeds(20, 20) == 20
    assert parse_effect("50%").of(-1.8) == pytest.approx(0.9)
    assert parse_effect("0.3").of(5.0) == pytest.approx(0.3) and parse_effect(None).share == 0.5
    assert math.isclose(parse_effect("12.5 %").of(2.0), 0.25)
