"""``harness export RUN_ID DIR``: a trained run's best checkpoint as a directory that transformers'
``AutoModel`` and sentence-transformers' ``SentenceTransformer`` load directly.

The run must have been trained with ``--save-model`` (its best encoder is then kept under
``RUNS/checkpoints/<run_id>``). The sentence-transformers modules reproduce the pooler the run was
evaluated with: ``cls_before_pooler`` -> CLS pooling; ``avg`` -> mean pooling; ``cls`` -> CLS pooling
followed by the trained head (``Dense`` with Tanh). ``avg_first_last`` and ``avg_top2`` read inner
layers, which sentence-transformers' pooling cannot: those runs are refused with a message. So are
runs whose method embeds sentences with its own head over token features (IS-BERT's CNN: the
checkpoint holds ``harness_sentence_head.pt``), which neither module list would reproduce.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import ConfigError, did_you_mean

HELP = "export a run's best checkpoint for transformers' AutoModel and sentence-transformers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run (see runs/records/)")
    parser.add_argument("out", metavar="DIR", help="where to write the model (must be new or empty)")
    parser.add_argument("--runs-dir", default="runs", help="run store folder (default ./runs)")


def run(args: argparse.Namespace) -> int:
    from harness.atomic import atomic_folder, write_json
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
    from harness.encoder.saved import check_encoder_only

    check_encoder_only(checkpoint, f"harness export {args.run_id}")
    out = _check_out(Path(args.out), checkpoint)
    from harness.config.models import check_model_inputs

    check_model_inputs(str(checkpoint))  # its tokenizer files, as eval and train check a folder
    pooler = str((record.get("config") or {}).get("eval_pooler", "cls_before_pooler"))
    about = {
        k: record.get(k) for k in ("run_id", "config", "best_step", "best_stsb_dev", "final", "provenance")
    }
    with atomic_folder(out) as building:  # a failed export leaves nothing behind
        export_model(checkpoint, building, pooler)
        write_json(building / "harness_run.json", about, indent=2)
    print(f"exported {args.run_id} (pooler {pooler}) to {out}")
    return 0


def _check_out(out: Path, checkpoint: Path) -> Path:
    """``DIR`` must be new or an empty folder, in a writable folder with room for the checkpoint."""
    from harness.atomic import FULL_DISK_BYTES, check_output_dir

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not an empty folder: choose a new one")
    size = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    parent = out.absolute().parent
    check_output_dir(parent, "the folder of DIR", need_bytes=size + FULL_DISK_BYTES)
    return out


def export_model(checkpoint: Path, out: Path, pooler: str) -> None:
    """Write ``checkpoint`` (a ``save_pretrained`` folder) as a sentence-transformers model folder."""
    modes = {"cls_before_pooler": "cls", "cls": "cls", "avg": "mean"}
    if pooler not in modes:
        raise ConfigError(
            f"pooler {pooler!r} reads inner layers, which sentence-transformers cannot pool; "
            "load the checkpoint with transformers instead: " + str(checkpoint)
        )
    try:
        from sentence_transformers import SentenceTransformer

        try:  # sentence-transformers >= 6 moved its modules
            from sentence_transformers.base.modules import Dense, Transformer
            from sentence_transformers.sentence_transformer.modules import Pooling
        except ImportError:
            from sentence_transformers.models import Dense, Pooling, Transformer  # type: ignore[no-redef]
    except ImportError as exc:
        raise ConfigError(
            f"harness export needs sentence-transformers (pip install -e '.[bench]'): {exc}"
        ) from None
    import torch

    word = Transformer(str(checkpoint))
    dim_fn = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    dim = int(dim_fn())
    modules = [word, Pooling(dim, pooling_mode=modes[pooler])]
    if pooler == "cls":
        dense = Dense(dim, dim, bias=True, activation_function=torch.nn.Tanh())
        head = word.auto_model.pooler.dense
        with torch.no_grad():
            dense.linear.weight.copy_(head.weight)
            dense.linear.bias.copy_(head.bias)
        modules.append(dense)
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
