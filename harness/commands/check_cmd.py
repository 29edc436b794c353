"""``harness check``: a pre-flight check of everything a grid needs, in seconds, before the night.

For the runs that ``harness grid SPEC... --profile P`` would plan: the data root, every SentEval file
the runs' probe and final tasks read (read with the runs' own readers: every malformed line, gold
score that is not a finite number or lies outside the task's range, or gold file that does not pair
up with its input is listed as ``file:line``), the corpora (read and validated as training reads them), the
encoders (packaged, random, a local folder, or a hub name found in the local Hugging Face cache:
never downloaded, never waited on when offline) with their hidden sizes, the runs folder (writable,
not held by another grid), free disk, GPUs, and with ``--address`` the Ray cluster (reachable, its
CPUs and GPUs against the per-trial request) and every alive node of it, visited by a task pinned to
it (:func:`node_facts`): the same data and model checks on that node, at the data root's path the
trials will get (the driver's), its CPUs, GPUs and memory, and its torch and harness versions against
this machine's. Every problem goes into one list; the exit status is 1 when there is any, else 0.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.commands.common import add_override_arguments
from harness.commands.grid_cmd import add_common_report_arguments

HELP = "pre-flight check of a grid: data, corpora, models, runs folder, disk, GPUs, Ray (seconds)"

MIN_FREE_BYTES = 2 * 1024**3
"""Less free disk than this under the runs folder is a problem (checkpoints of one bert-base run are
about 2 GB)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="table spec(s), as for harness grid")
    add_common_report_arguments(parser)
    parser.add_argument("--seeds", type=int, default=1, help="seeds per run (default 1)")
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster address to check (HOST:PORT); every node's data, models and versions too",
    )
    parser.add_argument("--gpus-per-trial", type=float, default=None, help="GPUs per trial to check")
    parser.add_argument("--cpus-per-trial", type=int, default=1, help="CPUs per trial to check")
    add_override_arguments(parser)


@dataclass
class Report:
    """``ok`` lines and ``problems``, printed in order."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def ok(self, text: str) -> None:
        self.lines.append(f"  ok       {text}")

    def note(self, text: str) -> None:
        self.lines.append(f"  note     {text}")

    def problem(self, text: str) -> None:
        self.lines.append(f"  PROBLEM  {text}")
        self.problems.append(text)


def transfer_files(senteval: Path, tasks: list[str] | None = None) -> list[Path]:
    """The data files the transfer readers open (the task registry lists them)."""
    from harness.evaluation.tasks import transfer_files as files

    return files(senteval, tasks)


def needed_data_files(senteval: Path, final_tasks: set[str]) -> list[Path]:
    """Every SentEval file the runs read: the STS-B dev probe, then the final tasks'."""
    from harness.evaluation.tasks import sts_files, stsb_dev_file

    files = [stsb_dev_file(senteval)]
    if final_tasks & {"sts", "all"}:
        files += sts_files(senteval)
    if final_tasks & {"transfer", "all"}:
        files += transfer_files(senteval)
    seen: dict[Path, None] = {}
    for path in files:
        seen.setdefault(path, None)
    return list(seen)


def check_model(name: str, report: Report) -> None:
    """Packaged, random, local or cached: never a download, never a wait when offline."""
    from harness.encoder import DEFAULT_MODEL, hidden_size_of, hub_offline, packaged_model_dir
    from harness.errors import HarnessError

    try:
        if name == DEFAULT_MODEL:
            where = f"packaged ({packaged_model_dir()})"
        elif name.startswith("random:"):
            where = "random weights (tests only)"
        elif Path(name).expanduser().exists():
            local = Path(name).expanduser()
            if not (local / "config.json").is_file():
                report.problem(f"model {name}: local folder without config.json")
                return
            where = f"local folder {local}"
        else:
            cached = _hub_cache_files(name)
            if not cached:
                offline = hub_offline()
                text = (
                    f"model {name}: not in the local Hugging Face cache"
                    + (" and the hub is offline or unreachable" if offline else "")
                    + '; download it once where the hub is reachable (e.g. `python -c "from '
                    f"transformers import AutoModel; AutoModel.from_pretrained('{name}')\"`)"
                )
                report.problem(text)
                return
            where = f"cached ({', '.join(cached)})"
        report.ok(f"model {name}: {where}, hidden size {hidden_size_of(name)}")
    except HarnessError as exc:
        report.problem(f"model {name}: {exc}")


def _hub_cache_files(name: str) -> list[str]:
    """Which of the config and weight files of hub model ``name`` the local cache holds (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings it
        return []
    found = []
    config = try_to_load_from_cache(name, "config.json")
    if not isinstance(config, str):
        return []
    found.append("config.json")
    for weights in ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json"):
        if isinstance(try_to_load_from_cache(name, weights), str):
            found.append(weights)
            break
    return found if len(found) == 2 else []


def check_disk(path: Path, report: Report) -> None:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    text = f"free disk under {path}: {free / 1024**3:.1f} GiB"
    if free < MIN_FREE_BYTES:
        report.problem(f"{text} (less than {MIN_FREE_BYTES / 1024**3:.0f} GiB: checkpoints need room)")
    else:
        report.ok(text)


def check_gpus(gpus_per_trial: float | None, report: Report) -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count:
        names = sorted({torch.cuda.get_device_name(i) for i in range(count)})
        report.ok(f"GPUs here: {count} ({', '.join(names)})")
    elif gpus_per_trial:
        report.problem(f"--gpus-per-trial {gpus_per_trial:g} but this machine has no CUDA GPU")
    else:
        report.note("no CUDA GPU here: trials run on the CPU")


def check_ray(
    address: str, cpus: int, gpus: float | None, report: Report, needs: NodeNeeds | None = None
) -> None:
    """The cluster at ``address``: reachable, its CPUs and GPUs against the per-trial request, and
    every alive node visited (:func:`node_facts`): its data, models and versions against this one's."""
    from harness.errors import HarnessError

    try:
        from harness.tune import check_address, visit_nodes

        check_address(address)
        resources, visits = visit_nodes(address, node_facts, needs or NodeNeeds())
    except HarnessError as exc:
        report.problem(str(exc))
        return
    have_cpu, have_gpu = float(resources.get("CPU", 0)), float(resources.get("GPU", 0))
    report.ok(f"Ray at {address}: {have_cpu:g} CPU(s), {have_gpu:g} GPU(s), {len(visits)} node(s)")
    if cpus > have_cpu:
        report.problem(f"--cpus-per-trial {cpus} is more than the cluster's {have_cpu:g} CPU(s)")
    if gpus is not None and gpus > have_gpu:
        report.problem(f"--gpus-per-trial {gpus:g} is more than the cluster's {have_gpu:g} GPU(s)")
    mine = node_facts(NodeNeeds())  # this machine's versions
    for visit in visits:
        _report_node(visit, mine, report)


@dataclass(frozen=True)
class NodeNeeds:
    """What every node must have for the grid: the data root as the trials get it (the driver's
    path), the planned runs (their corpora, batch sizes, final tasks) and their encoders."""

    data_root: str | None = None
    configs: tuple[Any, ...] = ()
    models: tuple[str, ...] = ()


def node_facts(needs: NodeNeeds) -> dict[str, Any]:
    """Run on one Ray node (a task pinned to it): what that node lacks of ``needs`` (the same checks
    and readers as the driver's own check) and what it runs: torch, the harness, GPUs, memory."""
    import os

    import torch

    import harness
    from harness.provenance import code_version
    from harness.train import read_corpus

    report = Report()
    if needs.data_root is not None:
        root = Path(needs.data_root)
        if root.is_dir():
            _check_data(root, list(needs.configs), report, read_corpus)
        else:
            report.problem(f"data root not found: {root}")
    for model in needs.models:
        check_model(model, report)
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


def run(args: argparse.Namespace) -> int:
    """Plan the grid as ``harness grid`` would, check what its runs need, print one list."""
    from harness.commands.common import check_spec_paths, overrides_from_args
    from harness.commands.grid_cmd import check_options
    from harness.specs import load_table_specs
    from harness.store import RunStore

    report = Report()
    profile = args.profile or "cpu"
    overrides = overrides_from_args(args)
    check_options(args, overrides)  # as grid does: seeds, CPUs/GPUs per trial, threads, HARNESS_*
    check_spec_paths(args.specs)
    specs = load_table_specs(args.specs)  # a bad spec is one error line (exit 2), as for grid
    data_root = _data_root(args.data_dir, report)
    print(f"harness check: {', '.join(s.name for s in specs)} under profile {profile}")
    plan = _plan(args, specs, profile, overrides, data_root, report)
    store = RunStore(args.runs_dir)
    configs: list[Any] = []
    if plan is not None:
        configs = _check_plan(plan, store, data_root, report)
    _check_runs_folder(store, report)
    check_disk(Path(args.runs_dir), report)
    check_gpus(args.gpus_per_trial, report)
    if args.address:
        needs = NodeNeeds(
            data_root=str(data_root.resolve()) if data_root is not None else None,
            configs=tuple(configs),
            models=tuple(sorted({str(c.model) for c in configs})),
        )
        check_ray(args.address, args.cpus_per_trial, args.gpus_per_trial, report, needs)
    return _print_report(report)


def _data_root(data_dir: str | None, report: Report) -> Path | None:
    from harness.errors import HarnessError
    from harness.paths import resolve_data_root

    try:
        data_root = resolve_data_root(data_dir)
    except HarnessError as exc:
        report.problem(str(exc))
        return None
    report.ok(f"data root {data_root}")
    return data_root


def _plan(
    args: argparse.Namespace,
    specs: list[Any],
    profile: str,
    overrides: dict[str, Any],
    data_root: Path | None,
    report: Report,
) -> Any:
    """The grid's plan (corpus not required); when it cannot be made, a problem, the profile's own
    inputs checked, and None."""
    from harness.errors import HarnessError
    from harness.grid import expand
    from harness.specs import load_plot_specs
    from harness.train import read_corpus

    extra = []
    if "all" in args.specs:
        extra = [(p.name, s.label, s.run) for p in load_plot_specs() for s in p.series]
    try:
        return expand(
            specs,
            profile,
            seeds=args.seeds,
            overrides=overrides,
            data_root=data_root,
            extra=extra,
            require_corpus=False,  # a missing corpus is reported below, and the runs still planned
        )
    except HarnessError as exc:
        report.problem(f"planning the runs: {exc}")
        _check_profile_inputs(profile, overrides, data_root, report, read_corpus)
        return None


def _check_plan(plan: Any, store: Any, data_root: Path | None, report: Report) -> list[Any]:
    """The plan's state in the store, its unresolved cells, and the data and models its runs use;
    returns the configs it checked (what every node of a cluster must also have)."""
    from harness.commands.grid_cmd import distrust_scoreless
    from harness.grid import attach_status
    from harness.train import read_corpus

    attach_status(plan, store)
    for line in distrust_scoreless(plan, store):
        report.note(line.removeprefix("warning: "))
    counts = plan.counts()
    pending = plan.pending(True)
    na = sum(1 for c in plan.cells if c.state == "n/a")
    report.ok(
        f"planned: {len(plan.runs)} distinct run(s): {counts['finished']} finished, {len(pending)} to "
        f"run ({counts['missing']} new, {counts['running']} interrupted, {counts['failed']} failed); "
        f"{na} n/a cell(s)"
    )
    for cell in plan.cells:
        if cell.state == "unresolved":
            report.problem(f"{cell.spec}: {cell.key}: {cell.reason}")
    # no planned runs (e.g. every cell's encoder unresolved): still check the profile's inputs
    configs = [r.config for r in pending] or [r.config for r in plan.runs] or [plan.settings]
    if data_root is not None:
        sizes = _check_data(data_root, configs, report, read_corpus)
        if pending:
            _estimate(pending, sizes, report)
    for model in sorted({str(c.model) for c in configs}):
        check_model(model, report)
    return list(configs)


def _print_report(report: Report) -> int:
    """Print the report; 1 when it holds a problem, else 0."""
    print("\n".join(report.lines))
    if report.problems:
        print(f"{len(report.problems)} problem(s): fix them before starting the grid")
        return 1
    print("everything the grid needs is here")
    return 0


def _check_profile_inputs(
    profile: str, overrides: dict[str, Any], data_root: Path | None, report: Report, read_corpus: Any
) -> None:
    """When the runs cannot be planned (e.g. the corpus is missing), still check what the profile uses."""
    from types import SimpleNamespace

    from harness.config import PROFILES

    settings = {**PROFILES.get(profile, {}), **overrides}
    corpus = Path(str(settings.get("corpus", "corpus/nli-sentences.txt")))
    if data_root is not None and not corpus.is_absolute():
        corpus = data_root / corpus
    config = SimpleNamespace(
        corpus=corpus,
        batch_size=int(settings.get("batch_size", 1)),
        final_tasks=str(settings.get("final_tasks", "sts")),
        model=str(settings.get("model", "minilm")),
    )
    if data_root is not None:
        _check_data(data_root, [config], report, read_corpus)
    check_model(config.model, report)


def _estimate(pending: list[Any], sizes: dict[str, int], report: Report) -> None:
    """The work the pending runs are: optimiser steps and dev probes, in all and per model."""
    per_model: dict[str, list[int]] = {}
    for run in pending:
        c = run.config
        if c.max_steps is not None:
            steps = int(c.max_steps)
        elif str(c.corpus) in sizes:
            steps = sizes[str(c.corpus)] // int(c.batch_size)
        else:
            continue  # unreadable corpus: already a problem
        probes = 1 + (steps // int(c.eval_every) if c.eval_every else 0)
        totals = per_model.setdefault(str(c.model), [0, 0, 0])
        totals[0] += 1
        totals[1] += steps
        totals[2] += probes
    for model, (runs, steps, probes) in sorted(per_model.items()):
        report.ok(
            f"cost on {model}: {runs} run(s), {steps} optimiser step(s) and {probes} STS-B dev probe(s) in "
            "all, plus each run's final tasks"
        )


def _check_data(data_root: Path, configs: list[Any], report: Report, read_corpus: Any) -> dict[str, int]:
    from harness.errors import HarnessError

    senteval = data_root / "senteval"
    tasks = {str(c.final_tasks) for c in configs}
    files = needed_data_files(senteval, tasks)
    missing = [p for p in files if not p.is_file()]
    empty = [p for p in files if p.is_file() and p.stat().st_size == 0]
    for path in missing:
        report.problem(f"SentEval file missing: {path}")
    for path in empty:
        report.problem(f"SentEval file empty: {path}")
    from harness.evaluation.tasks import data_problems

    read, problems = data_problems(senteval, tasks)
    absent = [str(p) for p in (*missing, *empty)]
    problems = [p for p in problems if not any(a in p for a in absent)]  # already reported above
    for text in problems:
        report.problem(text)
    if not missing and not empty and not problems:
        report.ok(
            f"{len(files)} SentEval file(s) for the probe and final tasks ({', '.join(sorted(tasks))}): "
            f"{read} task part(s) read as the runs read them"
        )
    need: dict[str, int] = {}
    for config in configs:
        need[str(config.corpus)] = max(need.get(str(config.corpus), 0), int(config.batch_size))
    sizes: dict[str, int] = {}
    for corpus, batch in sorted(need.items()):
        if not Path(corpus).exists():  # planned without it (run ids provisional)
            report.problem(f"corpus file not found: {corpus}")
            continue
        try:
            sizes[corpus] = len(read_corpus(Path(corpus), min_sentences=batch))
            report.ok(f"corpus {corpus}: {sizes[corpus]} sentences")
        except HarnessError as exc:
            report.problem(str(exc))
    return sizes


def _check_runs_folder(store: Any, report: Report) -> None:
    """Writable (proved with a temporary file; a folder created for that is removed) and not locked."""
    from harness.commands.common import check_writable_dir
    from harness.errors import HarnessError

    root = Path(store.root)
    created = [p for p in (root, *root.parents) if not p.exists()]
    try:
        check_writable_dir(root, "runs folder")
    except HarnessError as exc:
        report.problem(str(exc))
        return
    finally:
        for folder in created:  # innermost first: a check leaves nothing behind
            with contextlib.suppress(OSError):
                folder.rmdir()
    lock = store.lock()
    if lock.path.exists() and not lock.path.is_file():
        report.problem(f"the grid lock {lock.path} is a folder, not a file: remove it")
        return
    if lock.is_held():
        report.problem(f"runs folder {root} is in use by {lock.describe()}")
        return
    if lock.holder():
        report.note(f"a stale grid lock ({lock.describe()}) will be taken over by the grid")
    report.ok(f"runs folder {root}: writable, no grid running on it")
