"""The pre-flight check of a Ray cluster: reachable, its resources, and every alive node visited."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness.errors import HarnessError
from harness.grid.capacity import trial_fit_problems, trial_request
from harness.grid.options import ClusterOptions, decide_trial_gpus
from harness.grid.preflight.machine import Report, check_data, check_model, longest_lengths
from harness.run.data import read_corpus
from harness.store.provenance import code_version


def check_ray(
    cluster: ClusterOptions, report: Report, needs: NodeNeeds | None = None
) -> dict[str, float] | None:
    """The cluster at ``address``: reachable and its head answering (the one check of the address a
    grid makes), each trial's request against its nodes
    (:func:`~harness.grid.capacity.trial_fit_problems`), and every alive node visited
    (:func:`node_facts`): its data, models and versions against this one's. Returns the cluster's
    resources (None: it could not be reached)."""

    address = str(cluster.address)
    try:
        from harness.grid.tune.cluster import check_address, visit_nodes

        check_address(address)
        resources, visits = visit_nodes(address, node_facts, needs or NodeNeeds())
    except HarnessError as exc:
        report.problem(str(exc))
        return None
    have_cpu, have_gpu = float(resources.get("CPU", 0)), float(resources.get("GPU", 0))
    report.ok(f"Ray at {address}: {have_cpu:g} CPU(s), {have_gpu:g} GPU(s), {len(visits)} node(s)")
    request = trial_request(cluster.cpus, decide_trial_gpus(cluster, have_gpu), cluster.trial_resources)
    for problem in trial_fit_problems(resources, request, [v["resources"] for v in visits] or None):
        report.problem(problem)
    mine = node_facts(NodeNeeds())  # this machine's versions
    for visit in visits:
        _report_node(visit, mine, report)
    return resources


@dataclass(frozen=True)
class NodeNeeds:
    """What every node must have for the grid: the data root as the trials get it (the driver's
    path), the planned runs (their corpora, batch sizes, final tasks) and their encoders."""

    data_root: str | None = None
    configs: tuple[Any, ...] = ()
    models: tuple[str, ...] = ()

    @classmethod
    def of(cls, data_root: Path | None, configs: Sequence[Any]) -> NodeNeeds:
        """A grid's needs: its data root as the driver resolves it, its runs, and every encoder they
        load (the runs' own and their methods' second ones, :func:`longest_lengths`)."""
        root = str(data_root.resolve()) if data_root is not None else None
        return cls(data_root=root, configs=tuple(configs), models=tuple(sorted(longest_lengths(configs))))


def node_facts(needs: NodeNeeds) -> dict[str, Any]:
    """Run on one Ray node (a task pinned to it): what that node lacks of ``needs`` (the same checks
    and readers as the driver's own check) and what it runs: torch, the harness, GPUs, memory."""

    import torch

    report = Report()
    if needs.data_root is not None:
        root = Path(needs.data_root)
        if root.is_dir():
            check_data(root, list(needs.configs), report, read_corpus)
        else:
            report.problem(f"data root not found: {root}")
    lengths = longest_lengths(needs.configs)
    for model in needs.models:
        check_model(model, report, lengths.get(model))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    return {
        "problems": report.problems,
        "torch": torch.__version__,
        "harness": f"{harness.__version__} ({code_version()})",
        "cuda_gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "memory_bytes": int(memory),
        "cpus": os.cpu_count() or 0,
    }


def _report_node(visit: dict[str, Any], mine: dict[str, Any], report: Report) -> None:
    """One node's lines: its resources, then each thing it lacks or runs differently."""
    name = f"node {visit['ip']} ({str(visit['node_id'])[:8]})"
    if "error" in visit:
        report.problem(f"{name}: the check could not run there: {visit['error']}")
        return
    facts, res = visit["result"], visit["resources"]
    report.ok(
        f"{name}: Ray gives {res.get('CPU', 0):g} CPU(s), {res.get('GPU', 0):g} GPU(s), "
        f"{res.get('memory', 0) / 2**30:.1f} GB; the machine has {facts['cpus']} CPU(s), "
        f"{facts['cuda_gpus']} CUDA GPU(s), {facts['memory_bytes'] / 2**30:.1f} GB; torch {facts['torch']}"
    )
    for text in facts["problems"]:
        report.problem(f"{name}: {text}")
    for key in ("torch", "harness"):
        if facts[key] != mine[key]:
            report.problem(f"{name}: {key} {facts[key]} differs from this machine's {mine[key]}")
