"""The pre-flight read: every file the runs will read, read once with the runs' own readers before
anything trains (``harness check`` and the start of a grid), each problem one line."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

from harness.errors import DataError
from harness.evaluation.tasks import STS_REGISTRY, STSB_DEV_EVAL, TRANSFER_REGISTRY, sts_task

_READ_OK: set[tuple[str, str, tuple[tuple[str, int, int], ...]]] = set()
"""What :func:`data_problems` read without a problem, by task, part and its files' (path, size,
mtime): a second check in the same process does not read them again."""


def _stamp(paths: Sequence[Path]) -> tuple[tuple[str, int, int], ...] | None:
    try:
        stats = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths]
    except OSError:
        return None
    return tuple(stats)


def _read_checked(key: str, part: str, paths: Sequence[Path], read: Callable[[], object]) -> str | None:
    """``read()``; its DataError as one line, or None (remembered by the files' size and mtime)."""
    stamp = _stamp(paths)
    if stamp is not None and (key, part, stamp) in _READ_OK:
        return None
    try:
        read()
    except DataError as exc:
        return str(exc)
    if stamp is not None:
        _READ_OK.add((key, part, stamp))
    return None


def data_problems(senteval: Path, final_tasks: Iterable[str]) -> tuple[int, list[str]]:
    """Read every file the runs will read, with the readers the runs use (``harness check`` and
    the start of a grid, before anything trains).

    Args:
        senteval: the SentEval root.
        final_tasks: the runs' ``final_tasks`` values (``"sts"``, ``"transfer"``, ``"all"``,
            ``"none"``); the STS-B dev evaluation's file is read whatever they are.

    Returns:
        How many parts and tasks were read, and one line per problem (``file:line: ...``): a
        malformed line, a gold score that is not a finite number or is outside the task's range,
        files that do not pair up. A missing file is a problem of its own reader too.
    """
    groups = set(final_tasks)
    jobs: list[tuple[str, str, list[Path], Callable[[], object]]] = []
    dev_task, dev_split = STSB_DEV_EVAL
    sts_parts = {(dev_task, p.name): p for p in sts_task(dev_task).parts_for((dev_split,))}
    if groups & {"sts", "all"}:
        sts_parts.update({(t.name, p.name): p for t in STS_REGISTRY.values() for p in t.parts_for()})
    for (name, part_name), part in sts_parts.items():
        paths = [senteval / f for f in part.files]
        jobs.append((name, part_name, paths, partial(STS_REGISTRY[name].read_part, senteval, part)))
    if groups & {"transfer", "all"}:
        for transfer in TRANSFER_REGISTRY.values():
            jobs.append((transfer.name, "", transfer.paths(senteval), partial(transfer.read, senteval)))
    problems = [p for job in jobs if (p := _read_checked(*job)) is not None]
    return len(jobs), problems
