"""Record bookkeeping for runs that did not end by themselves (no Ray here).

A grid's trials write their own records through :func:`harness.run.training.train_run`; when a trial dies
outside it (an import error, a worker killed for memory) or the grid driver stops, these helpers
leave every run's record saying what happened: ``failed`` with a reason, or ``interrupted``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.atomic import WriteError
from harness.store.provenance import now_iso
from harness.store.record import new_record

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig
    from harness.store.run_store import RunStore


def ensure_failed_record(store: RunStore, config: RunConfig, error: str) -> bool:
    """Make sure the run has a ``failed`` record with a reason; return True if this wrote one.

    A record that already says ``failed`` (written by ``train_run``, with its own reason) or
    ``finished`` is left alone; a missing or ``running`` one becomes ``failed``. A record that cannot
    be written (a full disk) stays as it was (False): the grid's report still names the run.
    """
    record = store.load(config.run_id())
    if record is not None and record.get("status") in ("failed", "finished"):
        return False
    if record is None:
        record = dict(new_record(config))
    record["status"] = "failed"
    record["error"] = error
    record["finished_at"] = now_iso()
    try:
        store.save(record)
    except WriteError:
        return False
    return True


def ensure_interrupted_record(store: RunStore, config: RunConfig, reason: str) -> bool:
    """Make sure a run the grid gave up waiting for says ``interrupted`` with ``reason`` (a new record
    when it has none, its ``running`` record marked); return True if this wrote one. Finished and
    failed records are left alone, and so is a record that cannot be written (a full disk)."""
    record = store.load(config.run_id())
    if record is not None and record.get("status") != "running":
        return False
    record = dict(new_record(config)) if record is None else record
    record.update(status="interrupted", error=reason, finished_at=now_iso())
    try:
        store.save(record)
    except WriteError:
        return False
    return True


def mark_interrupted(store: RunStore, configs: Sequence[RunConfig], reason: str) -> list[str]:
    """Mark the runs of ``configs`` whose record, or whose attempt beside a finished record (a run
    asked again for more final tasks), still says ``running`` as ``interrupted``.

    Returns the ids marked. Finished and failed records and attempts are left alone, and so is a
    record that cannot be written (a full disk).
    """
    marked = []
    for config in configs:
        run_id = config.run_id()
        record = store.load(run_id)
        if record is None:
            continue
        candidates = [record] if record.get("status") == "running" else []
        if record.get("status") == "finished":
            candidates = [a for a in store.attempts(run_id) if a.get("status") == "running"]
        saved = False
        for running in candidates:
            running.update(status="interrupted", error=reason, finished_at=now_iso())
            with contextlib.suppress(WriteError):
                store.save(running)
                saved = True
        if saved:
            marked.append(run_id)
    return marked


def short_error(text: str | None) -> str:
    """One line out of a trial's error: the exception line, or why Ray says the worker died."""
    body = (text or "").strip()
    died = re.search(
        r"Worker exit type: (\S+)\s+Worker exit detail: (.*?)(?:\s+Some common causes|$)", body, re.S
    )
    if died:
        pid = re.search(r"\bpid: (\d+)", body)
        who = f" (pid {pid.group(1)})" if pid else ""
        detail = " ".join(died.group(2).split())
        return (
            f"the trial's Ray worker{who} died: {died.group(1)}: {detail} (Ray names as common causes "
            "the OOM killer, `ray stop --force`, or a crash such as SIGSEGV)"
        )
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    return lines[-1] if lines else "the trial errored in its Ray worker (Ray gave no reason)"


__all__ = ["ensure_failed_record", "ensure_interrupted_record", "mark_interrupted", "short_error"]
