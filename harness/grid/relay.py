"""What a grid's trials hand back to the driver, and where their resume checkpoints are (no ray here).

A trial may run on any node of a Ray cluster, and the nodes need share no folder. So a trial writes
nothing into the driver's runs folder: every save of its run record travels to the driver inside one
of the trial's Ray Tune reports (:func:`encode_record`), and the driver alone writes the store, with
the store's own rules (attempts, a finished record never replaced). A record that arrives twice (a
retried report) is the same attempt saved twice: one record.

Resume checkpoints and ``--save-model`` weights go through Ray Tune's storage (``storage_path``: the
driver's ``<runs>/tune`` by default, or a shared folder / pyarrow URI). The driver notes the last
resume checkpoint of every unfinished run in ``<runs>/resume/<run_id>.json`` (its path and the
storage it lives in), so that a grid started again after its driver was killed hands it to the run's
new trial; the note and the checkpoint go when the run finishes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.atomic import strict_json, write_json

RESUME_DIR = "resume"


def encode_record(record: Mapping[str, Any]) -> str:
    """A run record as the JSON text a trial's report carries (the store's own strict JSON)."""
    return json.dumps(strict_json(record), allow_nan=False)


def decode_record(text: Any) -> dict[str, Any] | None:
    """The record a report carried, or None (no record in it, or not a record)."""
    if not isinstance(text, str):
        return None
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("run_id"), str):
            return data
    return None


def index_path(store_root: Path, run_id: str) -> Path:
    """The driver's note of ``run_id``'s last resume checkpoint."""
    return Path(store_root) / RESUME_DIR / f"{run_id}.json"


def remember_checkpoint(store_root: Path, run_id: str, path: str, storage: str, step: int) -> None:
    """Note (atomically) that ``run_id``'s last resume checkpoint is ``path`` in ``storage``."""
    write_json(index_path(store_root, run_id), {"path": path, "storage": storage, "step": step})


def earlier_checkpoint(store_root: Path, run_id: str) -> dict[str, Any] | None:
    """The note of ``run_id``'s last resume checkpoint (an earlier grid's), or None."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(index_path(store_root, run_id).read_text(encoding="utf-8"))
        if (
            isinstance(data, dict)
            and isinstance(data.get("path"), str)
            and isinstance(data.get("storage"), str)
        ):
            return data
    return None


def storage_filesystem(storage: str) -> Any:
    """The pyarrow filesystem of a storage path or URI (``s3://``, ``gs://``, a local folder)."""
    import pyarrow.fs

    if "://" in storage:
        return pyarrow.fs.FileSystem.from_uri(storage)[0]
    return pyarrow.fs.LocalFileSystem()


def drop_checkpoint(note: Mapping[str, Any] | None, keep_under: str | None = None) -> None:
    """Remove the noted checkpoint unless it lies under ``keep_under`` (the running grid's own
    folder, whose checkpoints Ray Tune keeps and prunes)."""
    if note is not None and not (keep_under and str(note["path"]).startswith(keep_under.rstrip("/") + "/")):
        with contextlib.suppress(Exception):  # gone already, or a storage this driver cannot reach
            storage_filesystem(str(note["storage"])).delete_dir(str(note["path"]))


def forget_checkpoint(store_root: Path, run_id: str, keep_under: str | None = None) -> None:
    """The run finished: remove its note and the noted checkpoint (:func:`drop_checkpoint`)."""
    drop_checkpoint(earlier_checkpoint(store_root, run_id), keep_under)
    with contextlib.suppress(FileNotFoundError):
        index_path(store_root, run_id).unlink()
    with contextlib.suppress(OSError):
        index_path(store_root, run_id).parent.rmdir()  # only when empty


__all__ = [
    "RESUME_DIR",
    "decode_record",
    "drop_checkpoint",
    "earlier_checkpoint",
    "encode_record",
    "forget_checkpoint",
    "index_path",
    "remember_checkpoint",
    "storage_filesystem",
]
