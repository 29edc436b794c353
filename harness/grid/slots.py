"""Threads handed to the last runs of a grid: a node-local board of the trials running on a node.

Each trial of a CPU grid runs with the threads of its slot (one CPU under the CPU profiles). Once no
run waits to start, a slot whose trial ends stays idle until the grid ends; the last run of a
9-run grid on 2 slots runs alone for most of its time. So a trial asks the board, as its final
evaluation starts, how many threads it may use: when the driver says that no run waits, the node's
cores shared among the trials still running there (never fewer than its own).

Only the final evaluation takes the extra threads (inference; training keeps its slot's threads,
which are part of the run id). Its embeddings in bf16 were bit-identical with 1 and 2 threads on
this project's machines, in fp32 within 1e-6 (docs/speed.md); the record says how many threads its
final evaluation used (``final_threads``).

The board is a folder in the node's temporary directory, named after the grid: each trial puts a
file named by its process id there while it runs; the driver writes how many runs have not
started yet (``pending``). On a node without the driver's ``pending`` file (another node of a
cluster) a trial keeps its own threads. The driver removes the board at the end only in that shape
(:mod:`harness.removal`): a folder of that name holding anything else is left with a warning.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.atomic import write_text
from harness.removal import Shape, remove_owned

PENDING = "pending"
"""The board's file that the driver writes: the number of the grid's runs not started yet."""
PREFIX = "harness-slots-"
BOARD = Shape(
    "grid's slot board",
    rf"{PREFIX}[A-Za-z0-9_.+-]+",
    folder=True,
    holds=(PENDING, r"\d+", r"\.pending\..*\.tmp"),
)
"""The board as the grid writes it: the driver's count and one file per live trial (its pid)."""


class SlotBoard:
    """The trials of one grid on one node (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_grid(cls, name: str) -> SlotBoard:
        """The board of the grid named ``name`` (the Tune experiment's name) on this node."""
        safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
        return cls(Path(tempfile.gettempdir()) / f"{PREFIX}{safe}")

    # -- the driver's side ------------------------------------------------------------------------
    def set_pending(self, count: int) -> None:
        """Say how many runs have not started (written whole: a reader sees the old or the new)."""
        write_text(self.path / PENDING, str(max(0, count)))

    def remove(self) -> None:
        """The grid ended: its board goes (only in the board's shape, in the temporary folder)."""
        remove_owned(self.path, [tempfile.gettempdir()], BOARD)

    # -- a trial's side ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def joined(self) -> Iterator[None]:
        """This process is one of the board's live trials while the block runs."""
        self.path.mkdir(parents=True, exist_ok=True)
        mine = self.path / str(os.getpid())
        mine.touch()
        try:
            yield
        finally:
            mine.unlink(missing_ok=True)

    def pending(self) -> int | None:
        """The driver's count of runs not started (None on a node without the driver's file)."""
        try:
            return int((self.path / PENDING).read_text(encoding="ascii"))
        except (OSError, ValueError):
            return None

    def live(self) -> int:
        """Trials on this node whose process still runs (a killed trial's file is not counted)."""
        count = 0
        for entry in self.path.glob("[0-9]*"):
            with contextlib.suppress(ValueError):
                if _alive(int(entry.name)):
                    count += 1
        return count

    def threads(self, own: int, cores: int | None = None) -> int:
        """The threads a trial with ``own`` threads may use now: ``cores // live`` when no run waits
        to start, else ``own``."""
        if self.pending() != 0:
            return own
        cores = cores if cores is not None else len(os.sched_getaffinity(0))
        return max(own, cores // max(1, self.live()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that id: alive
        return True
    return True


__all__ = ["BOARD", "PENDING", "PREFIX", "SlotBoard"]
