"""The run store: one JSON record per run, written atomically.

Layout under the store root (``./runs`` by default)::

    records/<run_id>.json        the run record (schema below)
    records/<run_id>.attempts/   earlier or later attempts that must not replace a finished record:
        <n>.json                 attempt n (1, 2, ...), with ``"attempt": n``
    checkpoints/<run_id>/        the best encoder, when a run was asked to save it
    grid.lock                    held by the one grid that uses this folder
                                 (:class:`harness.grid.lock.GridLock`)

The record's typed shape and schema version live in :mod:`harness.store.record` (``RunRecord``).

Records are written to a temporary file in the same folder and moved into place with
:func:`os.replace`, so a reader (a table reporter, another Ray trial) never sees half a record.
Reading never crashes on a bad file: it is skipped with a warning; a record is validated against
:class:`~harness.store.record.RunRecord` as it is read (:func:`~harness.store.record.check_record`),
and a field of the wrong type is skipped with one warning line naming the file and the field. A run
is read from ``records/<run_id>.json`` alone: a copy beside it or a record under another name is
skipped with a warning (:meth:`RunStore.records`), so every reader counts a run once.

No finished result is ever lost: :meth:`RunStore.save` never replaces a ``finished`` record by one
that is not finished (a re-run that is running, failed or interrupted). That attempt is written to
``records/<run_id>.attempts/<n>.json`` instead and the finished record stays. A later attempt that
finishes becomes the record, and the finished record it replaces is kept as an attempt.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.atomic import WriteError, atomic_write, failed_write, strict_json
from harness.config.inputs import read_input_text
from harness.errors import ConfigError, HarnessError
from harness.removal import Shape, remove_owned
from harness.store.record import check_record

_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
ATTEMPT = Shape("run attempt", r"\d+\.json")
SAVED_ENCODER = Shape("saved encoder", _ID_PATTERN.pattern.strip("^$"), folder=True, needs=("config.json",))
"""``checkpoints/<run_id>/``: ``save_pretrained``'s folder, which a later save of the run replaces."""
"""An attempt file, ``records/<run_id>.attempts/<n>.json``: the only thing the store removes."""


class RunStore:
    """A folder of run records.

    Args:
        root: the store folder; created on the first write.

    Attributes:
        cache_root: where runs keep what they share (the step-0 dev evaluation cache): ``root``, except in a
            grid's trial, whose store is a relay (:mod:`harness.grid.tune`).
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.cache_root = self.root

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    def path(self, run_id: str) -> Path:
        """Where the record of ``run_id`` lives (whether or not it exists)."""
        if not _ID_PATTERN.match(run_id):
            raise ConfigError(f"invalid run id {run_id!r}")
        return self.records_dir / f"{run_id}.json"

    def checkpoint_dir(self, run_id: str) -> Path:
        """Where a run's best encoder is saved (``save_pretrained`` layout)."""
        self.path(run_id)  # validates the id
        return self.root / "checkpoints" / run_id

    def checkpoint_ref(self, run_id: str) -> str:
        """A record's ``checkpoint``: the saved encoder's folder relative to the runs folder, so that
        a record names no path of the machine that wrote it and the folder can move."""
        return self.checkpoint_dir(run_id).relative_to(self.root).as_posix()

    def attempts_dir(self, run_id: str) -> Path:
        """Where the attempts kept beside ``run_id``'s finished record live."""
        return self.records_dir / f"{run_id}.attempts"

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        """The attempts kept beside ``run_id``'s record, in attempt order (unreadable ones skipped)."""
        folder = self.attempts_dir(self.path(run_id).stem)
        if not folder.is_dir():
            return []
        paths = sorted((p for p in folder.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
        return [r for r in (_read(p) for p in paths) if r is not None]

    def save(self, record: Mapping[str, Any]) -> Path:
        """Write ``record`` atomically (temporary file + ``os.replace``); return its path.

        A ``finished`` record is never replaced by one that is not finished: such a record (a re-run
        that is running, failed or was interrupted) goes to ``records/<run_id>.attempts/<n>.json``
        with ``"attempt": n``; its later saves find that file again by its ``started_at`` and
        ``host``. An attempt that finishes becomes the record (its attempt file is removed) and the
        finished record it replaces is kept as another attempt. Returns where ``record`` was written;
        ``record`` itself is not modified.

        Raises:
            WriteError: the store cannot be written (a full disk, ...): every file is as it was.
        """
        run_id = record.get("run_id")
        if not isinstance(run_id, str):
            raise ConfigError("a run record needs a string 'run_id'")
        target = self.path(run_id)
        try:
            return self._save(target, run_id, record)
        except WriteError:
            raise
        except OSError as exc:  # a folder or an attempt number that could not be made
            raise failed_write(Path(exc.filename) if exc.filename else target, exc) from exc

    def _save(self, target: Path, run_id: str, record: Mapping[str, Any]) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        current = _read(target) if target.exists() else None
        if current is not None and current.get("status") == "finished":
            if record.get("status") != "finished":
                attempt = self._attempt_of(run_id, record)
                if attempt is not None:
                    return self._write({**record, "attempt": attempt}, self._attempt_path(run_id, attempt))
                return self._write_new_attempt(run_id, record)
            if not _same_attempt(current, record):
                self._write_new_attempt(run_id, current, mark=False)
        became = self._attempt_of(run_id, record) if record.get("status") == "finished" else None
        self._write(dict(record), target)
        if became is not None:  # the attempt is the record now
            remove_owned(self._attempt_path(run_id, became), [self.attempts_dir(run_id)], ATTEMPT)
        return target

    def _attempt_of(self, run_id: str, record: Mapping[str, Any]) -> int | None:
        """The number of the unfinished attempt file of the same attempt as ``record``, if any."""
        folder = self.attempts_dir(run_id)
        if not folder.is_dir():
            return None
        for path in folder.glob("*.json"):
            if not path.stem.isdigit():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8") or "null")
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and data.get("status") != "finished" and _same_attempt(data, record):
                return int(path.stem)
        return None

    def _next_attempt(self, run_id: str) -> int:
        folder = self.attempts_dir(run_id)
        folder.mkdir(parents=True, exist_ok=True)
        taken = [int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()]
        n = max(taken, default=0) + 1
        while True:  # reserve the number (two writers never share an attempt file)
            try:
                os.close(os.open(folder / f"{n}.json", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return n
            except FileExistsError:
                n += 1

    def _attempt_path(self, run_id: str, attempt: int) -> Path:
        return self.attempts_dir(run_id) / f"{attempt}.json"

    def _write_new_attempt(self, run_id: str, record: Mapping[str, Any], *, mark: bool = True) -> Path:
        """Write ``record`` as the next attempt (with ``"attempt": n`` when ``mark``); a failed write
        (a full disk) gives the reserved number back, so no empty attempt file is left behind."""
        attempt = self._next_attempt(run_id)
        path = self._attempt_path(run_id, attempt)
        try:
            return self._write({**record, "attempt": attempt} if mark else record, path)
        except BaseException:
            with contextlib.suppress(OSError):
                if path.stat().st_size == 0:
                    remove_owned(path, [self.attempts_dir(run_id)], ATTEMPT)
            raise

    def _write(self, record: Mapping[str, Any], target: Path) -> Path:
        text = json.dumps(strict_json(record), indent=2, sort_keys=False, allow_nan=False)
        with atomic_write(target) as handle:
            handle.write(text)
            handle.write("\n")
        return target

    def load(self, run_id: str) -> dict[str, Any] | None:
        """The record of ``run_id``, or None when there is none (or it is unreadable: warned)."""
        path = self.path(run_id)
        if not path.exists():
            return None
        return _read(path)

    def records(self) -> list[dict[str, Any]]:
        """Every readable record once, sorted by file name; unreadable files are skipped with a warning.

        A run's record is ``records/<run_id>.json`` and nothing else (what :meth:`load` reads): a file
        whose name is not the run id it holds (a backup copy beside the original, a renamed record)
        is skipped with one warning line naming it, so no reader counts a run twice or counts a
        record the grid cannot see.
        """
        if not self.records_dir.is_dir():
            return []
        out = []
        for path in sorted(self.records_dir.glob("*.json")):
            record = _read(path)
            if record is None:
                continue
            run_id = str(record["run_id"])
            problem = _misnamed(path, run_id, self.records_dir) if path.name != f"{run_id}.json" else None
            problem = problem or _edited(path, record)
            if problem:
                warnings.warn(problem, RuntimeWarning, stacklevel=2)
                continue
            out.append(record)
        return out

    def finished_ids(self) -> set[str]:
        """Ids of the runs whose record says ``finished``."""
        return {r["run_id"] for r in self.records() if r.get("status") == "finished"}


def _misnamed(path: Path, run_id: str, folder: Path) -> str:
    """The warning for a record file whose name is not its run id."""
    if not _ID_PATTERN.match(run_id):
        return f"skipping run record {path}: its run_id {run_id!r} is not a run id"
    own = folder / f"{run_id}.json"
    if own.is_file():
        return (
            f"skipping run record {path}: a copy of run {run_id}, whose record is {own} (a run is "
            "counted once: remove the copy or move it out of the records folder)"
        )
    return (
        f"skipping run record {path}: it holds run {run_id}, whose record must be {own} (rename it "
        "there to use it)"
    )


def _edited(path: Path, record: Mapping[str, Any]) -> str | None:
    """The warning for a record whose config no longer gives its run id or config id (a config edited by
    hand: its numbers would land in another run's cell), else None. A config that cannot be read
    back (an older schema, a removed method) is not judged here."""
    config = record.get("config")
    if not isinstance(config, dict):
        return None
    try:
        ids = _ids_of(json.dumps(config, sort_keys=True))
    except (TypeError, ValueError):
        return None
    if ids is None:
        return None
    run_id, config_id = ids
    if run_id != record.get("run_id") or config_id != record.get("group_id", config_id):
        return (
            f"skipping run record {path}: its config gives run {run_id} (config {config_id}), not the "
            f"run {record.get('run_id')} it names (edited by hand?): put the config back or remove the file"
        )
    return None


@functools.lru_cache(maxsize=65536)
def _ids_of(config_json: str) -> tuple[str, str] | None:
    """The run and config ids a stored config gives (None: it cannot be read back); kept per config,
    as every reader reads the same records again."""
    from harness.store.run_config import RunConfig

    try:
        resolved = RunConfig.from_dict(json.loads(config_json))
        return resolved.run_id(), resolved.config_id()
    except Exception:
        return None


def missing_scores(record: dict[str, Any]) -> str | None:
    """Why a ``finished`` record cannot be trusted (no final scores its config asked for), else None."""
    if record.get("status") != "finished":
        return None
    config = record.get("config")
    tasks = config.get("final_tasks") if isinstance(config, dict) else None
    if tasks in (None, "none"):
        return None
    final = record.get("final")
    parts = ("sts", "transfer") if tasks == "all" else (str(tasks),)
    for part in parts:
        scores = final.get(part) if isinstance(final, dict) else None
        if not isinstance(scores, dict) or not any(
            isinstance(v, int | float) and not isinstance(v, bool) for v in scores.values()
        ):
            return f"record says finished but has no final {part} scores"
    return None


def _same_attempt(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two saves of one attempt: same start time and host (a run writes its record many times)."""
    return all(a.get(k) == b.get(k) for k in ("started_at", "host"))


RECORD_MAX_BYTES = 64 << 20
"""A run record is tens of kilobytes; a larger file (or a FIFO, a device) is not read as one."""


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_input_text(path, "run record", RECORD_MAX_BYTES))
    except (HarnessError, json.JSONDecodeError) as exc:
        warnings.warn(f"skipping unreadable run record {path}: {exc}", RuntimeWarning, stacklevel=3)
        return None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        warnings.warn(
            f"skipping run record {path}: not a run record (no run_id)", RuntimeWarning, stacklevel=3
        )
        return None
    record, problems = check_record(data)
    if record is None:
        warnings.warn(f"skipping run record {path}: {problems[0]}", RuntimeWarning, stacklevel=3)
    elif problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        warnings.warn(
            f"run record {path}: skipping field(s) of the wrong type: {shown}", RuntimeWarning, stacklevel=3
        )
    return record
