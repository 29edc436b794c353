"""The pre-flight check of a Ray cluster: an unreachable address is a problem, not a wait; each node's
report names what it lacks or runs differently."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import harness
from harness.cli import main
from harness.grid.options import ClusterOptions
from harness.grid.preflight.cluster import NodeNeeds, _report_node, check_ray, node_facts
from harness.grid.preflight.machine import Report
from tests.helpers import check_argv, smoke_config


def test_an_unreachable_ray_address_is_a_problem_not_a_wait(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(check_argv(copied_root, tmp_path / "runs", "--address", "127.0.0.1:1")) == 1
    assert "no Ray head reachable there" in capsys.readouterr().out


def test_a_node_that_lacks_data_or_runs_other_versions_is_named() -> None:
    mine = {"torch": "2.13.0", "harness": "0.1.0 (git:abc)"}
    facts = {"problems": ["corpus file not found: /data/c.txt"], "cuda_gpus": 0, "cpus": 8,
             "memory_bytes": 16 * 2**30, "torch": "2.12.0", "harness": "0.1.0 (git:abc)"}  # fmt: skip
    visit = {"ip": "10.0.0.2", "node_id": "0123456789abcdef", "resources": {"CPU": 8.0, "memory": 2**33},
             "result": facts}  # fmt: skip
    report = Report()
    _report_node(visit, mine, report)
    assert report.lines[0] == (
        "  ok       node 10.0.0.2 (01234567): Ray gives 8 CPU(s), 0 GPU(s), 8.0 GB; the machine has "
        "8 CPU(s), 0 CUDA GPU(s), 16.0 GB; torch 2.12.0"
    )
    assert report.problems == [
        "node 10.0.0.2 (01234567): corpus file not found: /data/c.txt",
        "node 10.0.0.2 (01234567): torch 2.12.0 differs from this machine's 2.13.0",
    ]
    broken = Report()
    _report_node({"ip": "10.0.0.3", "node_id": "fedcba98", "error": "ImportError: no harness"}, mine, broken)
    assert broken.problems == [
        "node 10.0.0.3 (fedcba98): the check could not run there: ImportError: no harness"
    ]


def test_this_machines_facts_name_what_it_lacks(copied_root: Path, tmp_path: Path) -> None:
    config = smoke_config(copied_root)
    facts = node_facts(NodeNeeds(str(copied_root), (config,), ("random:tiny",)))
    assert facts["problems"] == [] and facts["torch"] == torch.__version__ and facts["cpus"] >= 1
    assert facts["harness"].startswith(f"{harness.__version__} (")
    (copied_root / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv").unlink()
    lacking = node_facts(NodeNeeds(str(tmp_path / "elsewhere"), (config,), ("random:tiny",)))
    assert lacking["problems"] == [f"data root not found: {tmp_path / 'elsewhere'}"]
    missing = node_facts(NodeNeeds(str(copied_root), (config,)))
    assert any("SentEval file missing:" in p and "sts-dev.csv" in p for p in missing["problems"])


def test_a_grid_s_node_needs_name_every_encoder_its_runs_load(copied_root: Path) -> None:
    """A node is asked for DCLR's complementary encoder too, not only the runs' own model."""
    plain = smoke_config(copied_root)
    other = smoke_config(copied_root, "dclr", params={"complementary": "/no/such/model"})
    needs = NodeNeeds.of(copied_root, [plain, other])
    assert needs.data_root == str(copied_root.resolve()) and needs.configs == (plain, other)
    assert needs.models == ("/no/such/model", "random:tiny")
    assert any("/no/such/model" in p for p in node_facts(needs)["problems"])
    assert NodeNeeds.of(None, [plain]).data_root is None


def test_a_trial_larger_than_any_one_node_is_a_problem_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within the cluster's totals but beyond every node (two 8-CPU nodes, 12 CPUs a trial): the
    check says so, by the same rule as the driver, instead of the trial waiting for a node."""
    from harness.grid.tune import cluster as tune_cluster

    mine = node_facts(NodeNeeds())
    node = {"resources": {"CPU": 8.0, "memory": 2**33}, "result": mine}
    nodes = [{"ip": f"10.0.0.{i}", "node_id": f"{i}" * 16, **node} for i in (1, 2)]
    checked: list[str] = []
    monkeypatch.setattr(tune_cluster, "check_address", checked.append)
    monkeypatch.setattr(tune_cluster, "visit_nodes", lambda *_: ({"CPU": 16.0, "memory": 2**34}, nodes))
    report = Report()
    resources = check_ray(ClusterOptions(address="10.0.0.1:6379", cpus_per_trial=12), report)
    assert checked == ["10.0.0.1:6379"] and resources == {"CPU": 16.0, "memory": 2**34}
    assert report.problems == [
        "--cpus-per-trial 12 is more than any one Ray node offers (at most 8 CPU(s) on a node): a trial runs "
        "on one node"
    ]
    fits = Report()
    check_ray(ClusterOptions(address="10.0.0.1:6379", cpus_per_trial=8), fits)
    assert fits.problems == []
    more = Report()
    check_ray(ClusterOptions(address="10.0.0.1:6379", gpus_per_trial=1.0), more)
    assert more.problems == ["--gpus-per-trial 1 is more than the cluster's 0 GPU(s)"]
