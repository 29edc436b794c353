"""A grid's progress lines and its report (no Ray here; :mod:`harness.tune` adapts them to Tune).

* :class:`GridProgress` prints one line per trial start and end (done / running / failed /
  remaining, with an ETA) and, for a trial that failed outside ``train_run``, makes sure its record
  says ``failed`` with the reason;
* :class:`GridReport` says what a grid did and where its time went;
* :class:`GridStopped` and :class:`GridInterrupted` end a grid that Ray Tune gave up on or that
  Ctrl-C / SIGTERM stopped, carrying the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_text
from harness.bookkeeping import ensure_failed_record
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.config import RunConfig
    from harness.store import RunStore

Log = Callable[[str], None]


def print_line(line: str) -> None:
    """The default progress sink (a module-level function, so Tune can pickle it by reference)."""
    print(line, flush=True)


def fmt_duration(seconds: float) -> str:
    """``42s``, ``3m07s`` or ``2h05m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class GridProgress:
    """Counts a grid's trials and prints one line per start and end.

    Args:
        total: trials in the grid.
        store: the run store (a trial that failed outside ``train_run`` gets its record here).
        log: where the lines go.
    """

    def __init__(self, total: int, store: RunStore, log: Log) -> None:
        self.total = total
        self.store = store
        self.log: Log = log
        self.start = time.perf_counter()
        self.running = 0
        self.done = 0
        self.failed: list[tuple[str, str]] = []

    def line(self, event: str) -> None:
        """Log the counts, the ETA and ``event``."""
        ended = self.done + len(self.failed)
        remaining = self.total - ended
        elapsed = time.perf_counter() - self.start
        eta = f", ETA {fmt_duration(elapsed / ended * remaining)}" if ended and remaining else ""
        self.log(
            f"[{ended}/{self.total}] done {self.done}, running {self.running}, failed {len(self.failed)}, "
            f"remaining {remaining}{eta} ({fmt_duration(elapsed)} elapsed) | {event}"
        )

    def trial_started(self, run_id: str | None) -> None:
        self.running += 1
        self.line(f"started {run_id}")

    def trial_finished(self, run_id: str | None, result: Mapping[str, Any]) -> None:
        """A trial ended normally; ``result`` is what it reported (``best_stsb_dev``, ``work_s``)."""
        self.running = max(0, self.running - 1)
        self.done += 1
        dev = result.get("best_stsb_dev")
        dev_text = f"STS-B dev {dev:.2f}, " if isinstance(dev, int | float) else ""
        work = result.get("work_s")
        work_text = f"{work:.1f} s" if isinstance(work, int | float) else "?"
        self.line(f"finished {run_id} ({dev_text}{work_text})")

    def trial_failed(self, config: RunConfig, reason: str, traceback_file: str | None = None) -> None:
        """A trial errored: its record says ``failed`` (its own reason, else ``reason``)."""
        self.running = max(0, self.running - 1)
        run_id = config.run_id()
        where = f" (traceback: {traceback_file})" if traceback_file else ""
        ensure_failed_record(self.store, config, reason)
        record = self.store.load(run_id) or {}
        self.failed.append((run_id, str(record.get("error") or reason)))
        self.line(f"FAILED {run_id}: {self.failed[-1][1]}{where}")


@dataclass
class GridReport:
    """What a grid did and where its time went.

    Attributes:
        total: trials started.
        finished: trials that ended with a finished record.
        failed: ``(run_id, reason)`` per failed trial.
        wall_s: wall time of :func:`harness.tune.run_trials` (Ray start-up included).
        ray_start_s: time to start or connect to Ray.
        fit_s: time inside ``Tuner.fit`` (scheduling and trials).
        work_s: sum over trials of the time spent inside the trial body (training and evaluation).
        slots: how many trials could run at once with the resources Ray saw.
        interrupted: runs the grid left ``running``, now marked ``interrupted``.
    """

    total: int = 0
    finished: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    ray_start_s: float = 0.0
    fit_s: float = 0.0
    work_s: float = 0.0
    slots: int = 1
    interrupted: list[str] = field(default_factory=list)

    def overhead_s(self) -> float:
        """Wall time not explained by trial work spread over the slots (start-up, scheduling)."""
        return max(0.0, self.wall_s - self.work_s / max(1, min(self.slots, max(1, self.total))))

    def summary(self) -> list[str]:
        lines = [
            f"grid: {self.finished} finished, {len(self.failed)} failed of {self.total} trials "
            f"in {self.wall_s:.1f} s",
            f"time: Ray start-up {self.ray_start_s:.1f} s; Tune fit {self.fit_s:.1f} s; trial work "
            f"{self.work_s:.1f} s summed over trials ({self.slots} slot(s) in parallel); start-up and "
            f"scheduling overhead about {self.overhead_s():.1f} s "
            f"({100 * self.overhead_s() / max(self.wall_s, 1e-9):.0f}% of the wall time)",
        ]
        lines.extend(f"failed: {run_id}: {reason}" for run_id, reason in self.failed)
        lines.extend(f"interrupted: {run_id} (the next grid runs it again)" for run_id in self.interrupted)
        return lines


class GridStopped(HarnessError):
    """Ray Tune stopped the grid with an error of its own; ``report.interrupted`` lists the runs it
    left ``running`` (now marked ``interrupted``: the next grid runs them again)."""

    def __init__(self, report: GridReport, reason: str, trace: Path | None = None) -> None:
        where = f" (traceback: {trace})" if trace is not None else ""
        super().__init__(
            f"Ray Tune stopped the grid: {reason}{where}. Finished runs are kept; "
            f"{len(report.interrupted)} run(s) it left running are marked interrupted; "
            "the same command resumes the grid"
        )
        self.report = report


class GridInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`harness.tune.run_trials`; ``report`` says what was finished and what was
    interrupted."""

    def __init__(self, report: GridReport) -> None:
        super().__init__("interrupted")
        self.report = report


def save_traceback(folder: Path) -> Path | None:
    """Write the exception being handled to ``folder/grid-stopped-<time>.txt``; its path, or None."""
    import traceback

    path = folder / f"grid-stopped-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}.txt"
    try:
        write_text(path, traceback.format_exc())
    except OSError:
        return None
    return path


__all__ = [
    "GridInterrupted",
    "GridProgress",
    "GridReport",
    "GridStopped",
    "fmt_duration",
    "print_line",
    "save_traceback",
]
