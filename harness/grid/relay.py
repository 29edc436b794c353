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
new trial; the note and the checkpoint go when the run finishes. A note is a file anyone may have
copied or edited: the checkpoint it names is removed only when it lies in this grid's storage and is
a Tune checkpoint folder holding the run's resume file (:mod:`harness.removal`), else it is left
with one warning line.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.atomic import strict_json, write_json
from harness.removal import Shape, inside, left_alone, remove_owned

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


def checkpoint_shape(run_id: str) -> Shape:
    """A resume checkpoint as Tune stores it: ``checkpoint_<6 digits>/`` holding ``<run_id>.pt`` (and
    Tune's metadata file)."""
    pt = f"{run_id}.pt"
    return Shape(
        f"resume checkpoint of {run_id}",
        r"checkpoint_\d{6}",
        folder=True,
        holds=(re.escape(pt), re.escape(".metadata.json")),
        needs=(pt,),
    )


def drop_checkpoint(
    note: Mapping[str, Any] | None, run_id: str, storage: str, keep_under: str | None = None
) -> None:
    """Remove the noted checkpoint of ``run_id`` unless it lies under ``keep_under`` (the running
    grid's own folder, whose checkpoints Ray Tune keeps and prunes). Only a checkpoint of this grid's
    ``storage`` in the shape Tune stores it goes (:func:`checkpoint_shape`); anything else a note
    names is left with one warning line."""
    if note is None:
        return
    path = str(note["path"])
    if keep_under and path.startswith(keep_under.rstrip("/") + "/"):
        return
    shape = checkpoint_shape(run_id)
    if "://" not in storage and "://" not in str(note["storage"]):
        remove_owned(path, [storage], shape)
        return
    with contextlib.suppress(Exception):  # a storage this driver cannot reach: left as it is
        _drop_stored(path, str(note["storage"]), storage, shape)


def _drop_stored(path: str, noted: str, storage: str, shape: Shape) -> None:
    """:func:`drop_checkpoint` on a remote storage (a pyarrow URI), with the same rule."""
    import pyarrow.fs

    filesystem, base = pyarrow.fs.FileSystem.from_uri(storage)
    if noted != storage or not inside(path, [base]):
        left_alone(path, f"it is not inside this grid's storage {storage}")
        return
    info = filesystem.get_file_info(path)
    if info.type == pyarrow.fs.FileType.NotFound:
        return
    kind = "folder" if info.type == pyarrow.fs.FileType.Directory else "file"
    listed = filesystem.get_file_info(pyarrow.fs.FileSelector(path)) if kind == "folder" else []
    why = shape.problem(path.rstrip("/").rsplit("/", 1)[-1], kind, [e.base_name for e in listed])
    if why is not None:
        left_alone(path, why)
        return
    filesystem.delete_dir(path)


def forget_checkpoint(store_root: Path, run_id: str, storage: str, keep_under: str | None = None) -> None:
    """The run finished: remove its note and the noted checkpoint (:func:`drop_checkpoint`)."""
    drop_checkpoint(earlier_checkpoint(store_root, run_id), run_id, storage, keep_under)
    remove_owned(index_path(store_root, run_id), [Path(store_root) / RESUME_DIR], note_shape(run_id))
    remove_owned(Path(store_root) / RESUME_DIR, [store_root], RESUME_FOLDER)  # only when empty


def note_shape(run_id: str) -> Shape:
    """The driver's note of a run's last resume checkpoint: ``<run_id>.json``, a file."""
    return Shape(f"resume note of {run_id}", re.escape(f"{run_id}.json"))


RESUME_FOLDER = Shape("resume folder", re.escape(RESUME_DIR), folder=True, empty=True)
"""``<runs>/resume``: removed once it is empty (other runs' notes and checkpoints keep it)."""


__all__ = [
    "RESUME_DIR",
    "RESUME_FOLDER",
    "checkpoint_shape",
    "decode_record",
    "drop_checkpoint",
    "earlier_checkpoint",
    "encode_record",
    "forget_checkpoint",
    "index_path",
    "note_shape",
    "remember_checkpoint",
    "storage_filesystem",
]
