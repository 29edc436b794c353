"""Run records in MTEB's result format: what ``harness results --format mteb DIR`` writes.

MTEB keeps one folder per model and revision, a ``model_meta.json`` and one JSON file per task
(``TaskResult``: ``task_name``, ``dataset_revision``, ``mteb_version``, ``scores`` per split, each a
list of per-subset dicts with ``main_score``). Laid out as MTEB's own result cache
(``DIR/results/<model>/<revision>/<Task>.json``), so that MTEB's loader reads it as it reads its
own runs: ``mteb.ResultCache(cache_path=DIR).load_results(include_remote=False)``.

Each finished run is one model, named ``cse-harness/<run_id>`` (the run record says how it was
trained; ``adapted_from`` names its base model); its revision is the code version that produced it.
(``experiment_kwargs`` would make MTEB's loader treat the folder as an experiment variant and skip
it by default, so the training settings stay in the record.)
Only the STS tasks MTEB has are written (the registry's ``mteb`` names and revisions,
:func:`harness.evaluation.tasks.mteb_tasks`): SentEval's transfer tasks are no MTEB tasks. Scores are
MTEB's scale, a fraction (Spearman / 100): ``cosine_spearman`` is the main score (the harness scores
cosine similarity); STS12-16 are SentEval's "all" setting, one Spearman over every pair, as MTEB's
single ``default`` subset is. The numbers come from SentEval's files (``shared/data/senteval``), not
from MTEB's Hugging Face copies: ``dataset_revision`` names the MTEB dataset each task corresponds
to, for comparison, not the files scored. Each task has its ``test`` split alone: the STS-B dev
score that chose the run's checkpoint stays in the run record (MTEB's loader would average a
``validation`` split into the task's score).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import write_text
from harness.evaluation.tasks import mteb_tasks

FORMAT_VERSION = "2.0.0"
"""``mteb_version`` of the files: the result format they follow (MTEB 2's), not a run of MTEB."""

MODEL_PREFIX = "cse-harness"


def _subset(score: float) -> dict[str, Any]:
    fraction = round(float(score) / 100.0, 8)
    return {
        "cosine_spearman": fraction,
        "main_score": fraction,
        "hf_subset": "default",
        "languages": ["eng-Latn"],
    }


def task_results(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """MTEB task name -> its TaskResult JSON for one finished record (its STS tasks only)."""
    sts = (record.get("final") or {}).get("sts") or {}
    out: dict[str, dict[str, Any]] = {}
    for task, (name, revision) in mteb_tasks().items():
        score = sts.get(task)
        if not isinstance(score, int | float) or isinstance(score, bool):
            continue
        scores: dict[str, list[dict[str, Any]]] = {"test": [_subset(score)]}
        out[name] = {
            "dataset_revision": revision,
            "task_name": name,
            "mteb_version": FORMAT_VERSION,
            "scores": scores,
            "evaluation_time": None,
            "kg_co2_emissions": None,
        }
    return out


def model_name(record: Mapping[str, Any]) -> str:
    return f"{MODEL_PREFIX}/{record.get('run_id')}"


def revision(record: Mapping[str, Any]) -> str:
    """The code version that produced the run, as a folder name (``6a723639b3bf-dirty``)."""
    code = str(record.get("code_version") or "no_revision_available").removeprefix("git:")
    return re.sub(r"[^\w.-]", "_", code)


def model_meta(record: Mapping[str, Any], base_model: str | None, embed_dim: int | None) -> dict[str, Any]:
    """MTEB's ``model_meta.json`` for one run: the model it is and what it was adapted from."""
    return {
        "name": model_name(record),
        "revision": revision(record),
        "release_date": None,
        "languages": ["eng-Latn"],
        "n_parameters": None,
        "memory_usage_mb": None,
        "max_tokens": None,
        "embed_dim": embed_dim,
        "license": None,
        "open_weights": None,
        "public_training_code": None,
        "public_training_data": None,
        "framework": ["PyTorch", "Transformers"],
        "reference": None,
        "similarity_fn_name": "cosine",
        "use_instructions": False,
        "training_datasets": None,
        "adapted_from": base_model,
        "modalities": ["text"],
        "model_type": ["dense"],
    }


def write_mteb(
    records: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    base_model: Mapping[str, str | None] | None = None,
    embed_dim: Mapping[str, int | None] | None = None,
) -> list[Path]:
    """Write every finished record with STS scores as an MTEB model folder under
    ``out_dir/results``; return the files written. ``base_model`` and ``embed_dim`` map a record's
    ``config.model`` to its hub name and hidden size where known."""
    written: list[Path] = []
    for record in records:
        if record.get("status") != "finished":
            continue
        tasks = task_results(record)
        if not tasks:
            continue
        model = str((record.get("config") or {}).get("model", ""))
        folder = out_dir / "results" / model_name(record).replace("/", "__") / revision(record)
        meta = model_meta(record, (base_model or {}).get(model), (embed_dim or {}).get(model))
        written.append(write_text(folder / "model_meta.json", json.dumps(meta, indent=2) + "\n"))
        for name, result in tasks.items():
            written.append(write_text(folder / f"{name}.json", json.dumps(result, indent=2) + "\n"))
    return written


__all__ = ["FORMAT_VERSION", "model_meta", "task_results", "write_mteb"]
