"""``harness export RUN_ID DIR``: a trained run's best checkpoint as a folder that transformers'
``AutoModel`` and sentence-transformers' ``SentenceTransformer`` load directly, embedding as the run
was scored (its pooler, head and post-whitening) and with a model card; what it refuses and why:
:mod:`harness.jobs.export`.

The run must have been trained with ``--save-model`` (its best encoder is then kept under
``RUNS/checkpoints/<run_id>``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, did_you_mean

HELP = "export a run's best checkpoint for transformers' AutoModel and sentence-transformers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run (see runs/records/)")
    parser.add_argument("out", metavar="DIR", help="where to write the model (must be new or empty)")
    parser.add_argument("--runs-dir", default="runs", help="run store folder (default ./runs)")


def run(args: argparse.Namespace) -> int:
    from harness.atomic import atomic_folder, write_json, write_text
    from harness.store.run_store import RunStore

    store = RunStore(args.runs_dir)
    record = store.load(args.run_id)
    if record is None:
        known = sorted(p.stem for p in store.records_dir.glob("*.json")) if store.records_dir.is_dir() else []
        hint = did_you_mean(args.run_id, known)
        raise ConfigError(f"no run {args.run_id!r} in {store.records_dir}{hint}")
    if record.get("status") != "finished":
        raise ConfigError(f"run {args.run_id} is {record.get('status')}, not finished: nothing to export")
    checkpoint = store.checkpoint_dir(args.run_id)
    if not (checkpoint / "config.json").is_file():
        raise ConfigError(
            f"run {args.run_id} kept no checkpoint ({checkpoint} is missing): train it again with "
            "--save-model (harness train ... --save-model, or harness grid ... --save-model)"
        )
    from harness.encoder.saved import check_encoder_only, load_post_whitening
    from harness.jobs.export import check_exportable, model_card, run_summary

    check_encoder_only(checkpoint, f"harness export {args.run_id}")
    whitening = load_post_whitening(checkpoint)
    pooler = check_exportable(record, whitening)
    out = _check_out(Path(args.out), checkpoint)
    from harness.config.models import check_model_inputs

    check_model_inputs(str(checkpoint))  # its tokenizer files, as eval and train check a folder
    card = model_card(record, _citation(record), pooler, whitening[0] if whitening else None)
    with atomic_folder(out) as building:  # a failed export leaves nothing behind
        export_model(checkpoint, building, pooler, whitening)
        write_text(building / "README.md", card)  # in place of sentence-transformers' blank card
        write_json(building / "harness_run.json", run_summary(record), indent=2)
    whitened = f", {whitening[0]} whitening" if whitening else ""
    print(f"exported {args.run_id} (pooler {pooler}{whitened}) to {out}")
    return 0


def _citation(record: dict[str, Any]) -> str:
    """The run's method's citation (the registry's), or its name when it is no longer registered."""
    from methods import REGISTRY

    method = str((record.get("config") or {}).get("method", "?"))
    cls = REGISTRY.get(method)
    return str(cls.citation) if cls is not None else method


def _check_out(out: Path, checkpoint: Path) -> Path:
    """``DIR`` must be new or an empty folder, in a writable folder with room for the checkpoint, and
    outside the runs' saved encoders (``RUNS/checkpoints/``: the export would land inside a run's own
    checkpoint, which a later grid replaces or removes)."""
    import os

    from harness.atomic import FULL_DISK_BYTES, check_output_dir

    saved = Path(os.path.realpath(checkpoint.parent))
    where = Path(os.path.realpath(out))
    if where == saved or saved in where.parents:
        raise ConfigError(
            f"{out} is inside {checkpoint.parent}, the runs' saved encoders: export to a folder outside it"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not an empty folder: choose a new one")
    size = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    parent = out.absolute().parent
    check_output_dir(parent, "the folder of DIR", need_bytes=size + FULL_DISK_BYTES)
    return out


def export_model(checkpoint: Path, out: Path, pooler: str, whitening: tuple[str, Any, Any] | None) -> None:
    """Write the sentence-transformers modules (:func:`harness.jobs.export.write_st_model`)."""
    from harness.jobs.export import write_st_model

    write_st_model(checkpoint, out, pooler, whitening)
