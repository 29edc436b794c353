"""Cells: stable ids, deduplication across specs, n/a cells, seeds, overrides, the final tasks of each run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.grid.plan.status import attach_status, complete_for
from harness.specs.cells import expand
from harness.specs.find import load_table_specs
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from methods.whitenedcse import WhitenedCSEParams
from tests.helpers import CORPUS_TEXT, FIXTURES, make_record, spec_text, write_spec


def test_ids_are_stable_and_shared_across_specs(corpus_root: Path) -> None:
    specs = load_table_specs(
        ["whitenedcse_table3", "whitenedcse_table4", "whitenedcse_table5", "simcsepp_table5"]
    )
    plan = expand(specs, "cpu", data_root=corpus_root)
    again = expand(list(reversed(specs)), "cpu", data_root=corpus_root)
    assert {r.run_id for r in plan.runs} == {r.run_id for r in again.runs}
    cells = [c for c in plan.cells if c.state == "run"]
    assert len(plan.runs) < len(cells)  # shared runs are run once
    sgw = plan.cell("whitenedcse_table3", "Shuffled-Group-whitening").configs[0].run_id()
    assert sgw == plan.cell("whitenedcse_table4", "STS-Avg. (shuffled) [num_groups=384]").configs[0].run_id()
    assert sgw == plan.cell("whitenedcse_table5", "STS-Avg. [num_positives=3]").configs[0].run_id()
    group = plan.cell("whitenedcse_table3", "Group-whitening").configs[0].run_id()
    assert group == plan.cell("whitenedcse_table4", "w/o shuffled [num_groups=384]").configs[0].run_id()
    centre = {
        plan.cell("simcsepp_table5", key).configs[0].run_id()
        for key in ("STS-B dev [m=0.9]", "STS-B dev [lambda_dcl=0.1]", "STS-B dev [tau_dcl=5]")
    }
    assert len(centre) == 1
    shared = next(r for r in plan.runs if r.run_id == sgw)
    assert len(shared.used_by) == 3


def test_sbert_base_rows_are_the_packaged_encoder_on_cpu(corpus_root: Path) -> None:
    """The packaged encoder is sentence-trained: under the CPU profiles SimCSE++ Table 3's SBERT-base
    cells run on it (the same runs as the BERT-base cells); under ``paper`` they start from SBERT."""
    spec = load_table_spec(Path("tables/simcsepp_table3.toml"))
    pairs = [("SimCSE-SBERT-base", "SimCSE-BERT-base"), ("SimCSE++-SBERT-base", "SimCSE++-BERT-base")]
    cpu = expand([spec], "cpu", data_root=corpus_root)
    for sbert, bert in pairs:
        assert cpu.cell(spec.name, sbert).config_id == cpu.cell(spec.name, bert).config_id
    assert cpu.cell(spec.name, "SimCSE-SBERT-large").state == "profile"
    paper = expand([spec], "paper", data_root=corpus_root, require_corpus=False)
    for sbert, bert in pairs:
        assert paper.cell(spec.name, sbert).configs[0].model.endswith("bert-base-nli-mean-tokens")
        assert paper.cell(spec.name, sbert).config_id != paper.cell(spec.name, bert).config_id


def test_invalid_cells_are_na_not_errors(corpus_root: Path, tmp_path: Path) -> None:
    body = (
        '[[sweeps]]\nlabel = "count"\nheader = "Groups"\nmethod = "whitenedcse"\n'
        'params = {group_scaling = "count"}\nvary = "num_groups"\nvalues = [128, 500]\npaper = [1.0, 2.0]\n'
    )
    spec_path = write_spec(tmp_path / "groups.toml", spec_text(body, cites="WhitenedCSE Table 4", title="t"))
    plan = expand([load_table_spec(spec_path)], "cpu", data_root=corpus_root)
    na = [c for c in plan.cells if c.state == "n/a"]
    assert [c.key for c in na] == ["count [num_groups=500]"]
    assert na[0].hidden_size == 384 and "num_groups=500 gives 500 groups" in na[0].reason
    assert len(plan.runs) == 1


def test_paper_group_counts_map_by_channels_per_group(corpus_root: Path) -> None:
    spec = load_table_spec(Path("tables/whitenedcse_table4.toml"))
    plan = expand([spec], "cpu", data_root=corpus_root)  # MiniLM, d = 384
    assert not [c for c in plan.cells if c.state != "run"] and len(plan.runs) == 16
    cell = plan.cell("whitenedcse_table4", "STS-Avg. (shuffled) [num_groups=384]")
    params = cell.configs[0].params
    assert isinstance(params, WhitenedCSEParams) and params.effective_groups(384) == 192  # 2 channels each
    smoke = expand([spec], "smoke", data_root=corpus_root)  # random:tiny, d = 64
    groups = sorted({_groups(c.configs[0].params, 64) for c in smoke.cells if c.state == "run"})
    assert groups == [3, 4, 5, 8, 11, 16, 21, 32]


def _groups(params: object, hidden: int) -> int:
    assert isinstance(params, WhitenedCSEParams)
    return params.effective_groups(hidden)


def test_runs_that_do_not_train_get_one_seed(corpus_root: Path) -> None:
    spec = load_table_spec(Path("tables/simcsepp_table3.toml"))
    plan = expand([spec], "cpu", seeds=3, data_root=corpus_root)
    untrained = [c for c in plan.cells if c.state == "run" and c.configs[0].max_steps == 0]
    trained = [c for c in plan.cells if c.state == "run" and c.configs[0].max_steps != 0]
    assert untrained and trained
    assert all(len(c.configs) == 1 for c in untrained)
    assert all([cfg.seed for cfg in c.configs] == [42, 43, 44] for c in trained)


def test_profile_only_rows_are_not_run(corpus_root: Path) -> None:
    plan = expand([load_table_spec(Path("tables/whitenedcse_table1.toml"))], "cpu", data_root=corpus_root)
    large = plan.cell("whitenedcse_table1", "SimCSE-BERT-large")
    assert large.state == "profile" and "paper" in large.reason
    assert all(c.configs[0].model == "minilm" for c in plan.cells if c.state == "run")


def test_seeds_share_a_group(corpus_root: Path) -> None:
    plan = expand(
        [load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", seeds=3, data_root=corpus_root
    )
    cell = plan.cell("smoke_grid", "SimCSE-BERT-base")
    assert [c.seed for c in cell.configs] == [42, 43, 44]
    assert len({c.config_id() for c in cell.configs}) == 1
    assert len({c.run_id() for c in cell.configs}) == 3
    assert len(plan.runs) == 6
    # the count is checked where it enters (check_seed_count: the grid's options); the Python API
    # still gets no plan without a seed
    with pytest.raises(ConfigError, match=r"^at least one seed is needed$"):
        expand(
            [load_table_spec(FIXTURES / "specs" / "smoke_grid.toml")], "smoke", seeds=0, data_root=corpus_root
        )


def test_row_overrides_win_over_command_line(corpus_root: Path) -> None:
    spec = load_table_spec(Path("tables/whitenedcse_table1.toml"))
    plan = expand([spec], "cpu", overrides={"max_steps": 7}, data_root=corpus_root)
    assert plan.cell(spec.name, "SimCSE-BERT-base").configs[0].max_steps == 7
    assert plan.cell(spec.name, "BERT-base (first-last avg.)").configs[0].max_steps == 0
    with pytest.raises(ConfigError, match="max_stepz"):
        expand([spec], "cpu", overrides={"max_stepz": 7}, data_root=corpus_root)
    with pytest.raises(ConfigError, match="--seeds"):
        expand([spec], "cpu", overrides={"seed": 7}, data_root=corpus_root)


def test_a_rows_own_steps_beyond_the_maximum_are_one_line_naming_the_row(
    corpus_root: Path, tmp_path: Path
) -> None:
    text = (FIXTURES / "specs" / "smoke_grid.toml").read_text()
    big = tmp_path / "big.toml"
    big.write_text(
        text.replace('method = "simcse"\n', f'method = "simcse"\noverrides = {{max_steps = {2**70}}}\n')
    )
    with pytest.raises(
        ConfigError, match=rf"^big: SimCSE-BERT-base: max_steps must be from 0 to 10000000 .*got {2**70}$"
    ):
        expand([load_table_spec(big)], "smoke", data_root=corpus_root, require_corpus=False)


def test_transfer_is_scored_only_for_runs_a_transfer_table_uses(corpus_root: Path) -> None:

    (corpus_root / "corpus" / "wiki1m_for_simcse.txt").write_text(CORPUS_TEXT, encoding="utf-8")
    specs = [load_table_spec(Path(f"tables/whitenedcse_table{i}.toml")) for i in (1, 2, 3)]
    plan = expand(specs, "paper", data_root=corpus_root)  # the paper profile scores "all" by default
    by_cell = {u: r for r in plan.runs for u in r.used_by}
    shared = by_cell["whitenedcse_table1: WhitenedCSE-BERT-base"]
    assert shared is by_cell["whitenedcse_table2: WhitenedCSE-BERT-base"]  # one run for both tables
    assert shared.config.final_tasks == "all"  # Table 2 needs transfer
    sts_only = by_cell["whitenedcse_table3: Group-whitening"]
    assert sts_only.config.final_tasks == "sts"  # no transfer table uses it
    # a run scored on STS only is not finished for a plan that needs transfer
    store = RunStore(corpus_root / "runs")
    record = make_record(shared.config.replace(final_tasks="sts"), final={"sts": {"avg": 70.0}})
    store.save(record)
    assert record["run_id"] == shared.run_id
    # a run only a dev-scored table uses (SimCSE++ Table 5's sweeps) skips the final pass; the
    # centre run, shared with Table 3's STS table, keeps it
    # (also when Table 5 is planned alone: Table 3, not named, would otherwise train it again)
    table5 = load_table_spec(Path("tables/simcsepp_table5.toml"))
    for pp_specs in ([table5, load_table_spec(Path("tables/simcsepp_table3.toml"))], [table5]):
        sweeps = expand(pp_specs, "paper", data_root=corpus_root)
        finals = {u.split(": ", 1)[1]: r.config.final_tasks for r in sweeps.runs for u in r.used_by}
        assert finals["STS-B dev [m=0.5]"] == "none" and finals["STS-B dev [tau_dcl=50]"] == "none"
        assert finals["STS-B dev [m=0.9]"] == "sts"
    # a final_tasks the user asked for is kept
    asked = expand([table5], "paper", data_root=corpus_root, overrides={"final_tasks": "sts"})
    assert {r.config.final_tasks for r in asked.runs} == {"sts"}
    attach_status(plan, store)
    assert shared.state == "missing"
    assert complete_for(record, "sts") and not complete_for(record, "all") and not complete_for(None, "sts")
    from harness.store.bookkeeping import mark_interrupted

    # the re-run with transfer is stopped: its attempt beside the finished record is marked
    # interrupted (the finished STS record stays), and it does not count as done for this plan
    store.save(make_record(shared.config, "running", started_at="2026-11-23T19:30:40+00:00"))
    assert [a["status"] for a in store.attempts(shared.run_id)] == ["running"]
    assert mark_interrupted(store, [shared.config], "interrupted (test)") == [shared.run_id]
    assert [(a["status"], a["error"]) for a in store.attempts(shared.run_id)] == [
        ("interrupted", "interrupted (test)")
    ]
    assert (store.load(shared.run_id) or {}).get("final") == {"sts": {"avg": 70.0}}
    assert mark_interrupted(store, [shared.config], "again") == []  # nothing left running
    record["final"] = {"sts": {"avg": 70.0}, "transfer": {"avg": 80.0}}
    store.save(record)
    assert attach_status(plan, store) and shared.state == "finished"
