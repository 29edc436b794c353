"""The checks the pre-flight makes on a machine (this one, or a Ray node): data files, corpora (and
what the runs ask of them), models, disk, GPUs, the arithmetic the trials' device can compute; each
adds an ``ok`` line or a problem to a :class:`Report`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.atomic import cause_of
from harness.config.hardware import arithmetic_problems
from harness.config.models import (
    DEFAULT_MODEL,
    hidden_size_of,
    hub_offline,
    model_problems,
    packaged_model_dir,
)
from harness.config.settings import RunSettings, corpus_problems
from harness.errors import HarnessError
from harness.evaluation.preread import data_problems
from harness.evaluation.tasks import sts_files, stsb_dev_file
from harness.evaluation.tasks import transfer_files as files
from harness.grid.capacity import trial_fit_problems
from harness.grid.options import ClusterOptions
from harness.grid.relay import index_path
from harness.run.checkpoint import checkpoint_path

CHECKPOINT_ROOM_BYTES = 2 * 1024**3
"""Less free disk than this under the runs folder is a problem (checkpoints of one bert-base run are
about 2 GB)."""


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

    return files(senteval, tasks)


def needed_data_files(senteval: Path, final_tasks: set[str]) -> list[Path]:
    """Every SentEval file the runs read: the STS-B dev evaluation's, then the final tasks'."""

    files = [stsb_dev_file(senteval)]
    if final_tasks & {"sts", "all"}:
        files += sts_files(senteval)
    if final_tasks & {"transfer", "all"}:
        files += transfer_files(senteval)
    seen: dict[Path, None] = {}
    for path in files:
        seen.setdefault(path, None)
    return list(seen)


def check_model(name: str, report: Report, max_length: int | None = None) -> None:
    """The encoder checked as every command checks it (:func:`~harness.config.models.model_problems`:
    a folder's config and tokenizer, vocabulary, positions against ``max_length``, the longest the
    runs ask of it, and the tokenizer's length); a hub name must be in the local cache: never a
    download, never a wait when offline."""

    try:
        problems = [str(p) for p in model_problems(name, max_length)]
        where = None if problems else _where(name)
        if not problems and where is None:
            offline = hub_offline()
            problems.append(
                f"model {name}: not in the local Hugging Face cache"
                + (" and the hub is offline or unreachable" if offline else "")
                + '; download it once where the hub is reachable (e.g. `python -c "from '
                f"transformers import AutoModel; AutoModel.from_pretrained('{name}')\"`)"
            )
        for text in problems:
            report.problem(text)
        if not problems:
            report.ok(f"model {name}: {where}, hidden size {hidden_size_of(name)}")
    except HarnessError as exc:
        report.problem(f"model {name}: {exc}")


def _where(name: str) -> str | None:
    """Where encoder ``name`` loads from, for the ok line (None: a hub name not in the cache)."""
    if name == DEFAULT_MODEL:
        return f"packaged ({packaged_model_dir()})"
    if name.startswith("random:"):
        return "random weights (tests only)"
    if Path(name).expanduser().exists():
        return f"local folder {Path(name).expanduser()}"
    cached = _hub_cache_files(name)
    return f"cached ({', '.join(cached)})" if cached else None


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
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    text = f"free disk under {path}: {free / 1024**3:.1f} GiB"
    if free < CHECKPOINT_ROOM_BYTES:
        report.problem(f"{text} (less than {CHECKPOINT_ROOM_BYTES / 1024**3:.0f} GiB: checkpoints need room)")
    else:
        report.ok(text)


def check_gpus(cluster: ClusterOptions, report: Report) -> None:
    """This machine's CUDA GPUs against ``--gpus-per-trial`` where the trials run here (no
    ``address``; on a cluster its nodes' GPUs are judged instead:
    :func:`~harness.grid.preflight.cluster.check_ray`)."""
    if cluster.address is not None:
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count:
        names = sorted({torch.cuda.get_device_name(i) for i in range(count)})
        report.ok(f"GPUs here: {count} ({', '.join(names)})")
    elif not cluster.gpus_per_trial:
        report.note("no CUDA GPU here: trials run on the CPU")
    gpus = {"GPU": float(cluster.gpus_per_trial or 0.0)}
    for problem in trial_fit_problems({"GPU": float(count)}, gpus, where="this machine's"):
        report.problem(problem)


def check_data(data_root: Path, configs: list[Any], report: Report, read_corpus: Any) -> dict[str, int]:
    senteval = data_root / "senteval"
    tasks = {str(c.final_tasks) for c in configs}
    files = needed_data_files(senteval, tasks)
    missing = [p for p in files if not p.exists()]  # a FIFO or a folder: its reader says what it is
    empty = [p for p in files if p.is_file() and p.stat().st_size == 0]
    for path in missing:
        report.problem(f"SentEval file missing: {path}")
    for path in empty:
        report.problem(f"SentEval file empty: {path}")

    read, problems = data_problems(senteval, tasks)
    absent = [str(p) for p in (*missing, *empty)]
    problems = [p for p in problems if not any(a in p for a in absent)]  # already reported above
    for text in problems:
        report.problem(text)
    if not missing and not empty and not problems:
        report.ok(
            f"{len(files)} SentEval file(s) for the dev evaluation and final tasks "
            f"({', '.join(sorted(tasks))}): {read} task part(s) read as the runs read them"
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
    for text in corpus_fit_problems(configs, sizes):
        report.problem(text)
    return sizes


def corpus_fit_problems(configs: Sequence[Any], sizes: dict[str, int]) -> list[str]:
    """What the runs ask of their corpora (of ``sizes``: path -> sentences) that these cannot give
    (:func:`~harness.config.settings.corpus_problems`: a warm-up longer than a one-epoch run, more
    post-processing sentences than the corpus or, for BERT-whitening, than the encoder's width); each
    distinct problem once."""
    problems: dict[str, None] = {}
    for config in configs:
        if not isinstance(config, RunSettings) or str(config.corpus) not in sizes:
            continue
        try:
            width: int | None = config.hidden_size if config.post_whiten in ("zca", "pca") else None
        except HarnessError:
            width = None  # an encoder whose config cannot be found: its own check says so
        for problem in corpus_problems(config, sizes[str(config.corpus)], width):
            problems.setdefault(str(problem))
    return list(problems)


def trial_device(cluster: Any) -> str | None:
    """The device this machine's trials train on: ``cuda`` with GPUs per trial (asked, or by default
    where torch sees a CUDA GPU and the grid is not ``--smoke``), else ``cpu``; None on a cluster
    (``--address``), whose nodes decide, and None where GPUs are asked of a machine without one (the
    GPU count's own line says so; there is no GPU whose arithmetic could be judged)."""
    import torch

    if cluster.address is not None:
        return None
    gpus = cluster.gpus_per_trial
    local = torch.cuda.is_available() and not cluster.smoke
    if (gpus or 0) > 0:
        return "cuda" if torch.cuda.is_available() else None
    return "cuda" if gpus is None and local else "cpu"


def trial_arithmetic_problems(configs: Sequence[Any], cluster: Any, compile: bool | None) -> list[str]:
    """What this machine's trials (:func:`trial_device`) cannot compute of the runs: bf16 on a CUDA GPU
    without it, a compiled step torch.compile cannot build here
    (:func:`~harness.config.hardware.arithmetic_problems`); none on a cluster."""
    device = trial_device(cluster)
    if device is None or not configs:
        return []
    names = ("precision", "eval_precision")
    precisions = {name: "bf16" for c in configs for name in names if getattr(c, name, None) == "bf16"}
    return [f"trials on {device}: {text}" for text in arithmetic_problems(device, precisions, compile)]


def runs_folder_problems(
    root: Path, run_ids: Sequence[str], *, storage: Path | None = None, save_model: bool = False
) -> list[str]:
    """What stands where a grid or a run will write under its runs folder (and Tune's storage), found
    before anything trains: one line each.

    The folders ``records/``, ``resume/``, ``checkpoints/`` (with ``save_model``) and Tune's storage
    (``storage``, a grid's: ``<runs>/tune`` unless ``--storage``; None for ``harness train``) must be
    folders that can be written, or not exist yet under a folder that can; each run's own entries
    (its record and attempts, its resume checkpoint and note, its saved encoder) must not be a file
    where a folder goes or a folder where a file goes.
    """
    if root.exists() and not root.is_dir():
        return []  # the runs folder itself: its own check says so (check_output_dir)
    folders = [("records folder", root / "records"), ("resume folder", root / "resume")]
    if storage is not None:
        folders.append(("Ray Tune's storage", storage))
    if save_model:
        folders.append(("saved encoders folder", root / "checkpoints"))
    problems = [p for what, folder in folders if (p := _folder_problem(folder, what)) is not None]
    for run_id in run_ids:
        files = [root / "records" / f"{run_id}.json", checkpoint_path(root, run_id), index_path(root, run_id)]
        dirs = [root / "records" / f"{run_id}.attempts"]
        if save_model:
            dirs.append(root / "checkpoints" / run_id)
        problems += [
            f"{p} is a folder where run {run_id} keeps a file: remove it" for p in files if p.is_dir()
        ]
        problems += [
            f"{p} is a file where run {run_id} keeps a folder: remove it"
            for p in dirs
            if p.exists() and not p.is_dir()
        ]
    return problems


def _folder_problem(folder: Path, what: str) -> str | None:
    """Why ``folder`` cannot hold what is written there, or None (a missing folder is judged by the
    folder it would be made in)."""
    parent = folder
    while not parent.is_dir():
        if parent.exists() or parent.is_symlink():
            return f"{what} {folder}: {parent} is a file, not a folder: remove it or choose another folder"
        if parent == parent.parent:
            return f"{what} {folder}: no folder to create it in"
        parent = parent.parent
    try:  # proved with a temporary file, as every output folder is
        fd, name = tempfile.mkstemp(prefix=".write-test-", dir=parent)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    except OSError as exc:
        return f"{what} {folder} cannot be written: {cause_of(exc)}"
    return None


def longest_lengths(configs: Sequence[Any]) -> dict[str, int | None]:
    """Each model the configs use (the run's and those its method loads besides,
    :meth:`~methods.params.MethodParams.models`), with the longest ``max_length`` any of them asks of it."""
    lengths: dict[str, list[int]] = {}
    for config in configs:
        length = getattr(config, "max_length", None)
        params = getattr(config, "params", None)
        for model in (str(config.model), *(params.models() if params is not None else ())):
            lengths.setdefault(model, []).extend([int(length)] if length is not None else [])
    return {model: max(values) if values else None for model, values in lengths.items()}
