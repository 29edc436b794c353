"""A grid's progress lines and its report (no Ray here; :mod:`harness.grid.tune` adapts them to Tune).

* :class:`GridProgress` prints one line per trial start and end, per evaluation point a trial
  reports and at least every 30 s while trials train (done / running / failed / remaining, with an
  ETA from the cost model) and, for a trial that failed outside ``train_run``, makes sure its
  record says ``failed`` with the reason;
* :class:`GridReport` says what a grid did and where its time went;
* :class:`GridStopped` and :class:`GridInterrupted` end a grid that Ray Tune gave up on or that
  Ctrl-C / SIGTERM stopped, carrying the report.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.atomic import write_text
from harness.errors import HarnessError
from harness.grid.plan.estimate import makespan
from harness.store.bookkeeping import ensure_failed_record

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig
    from harness.store.run_store import RunStore

Log = Callable[[str], None]
"""A progress sink (the run's :data:`harness.run.evaluation_point.Log`, not imported from there: that
module brings the run's evaluation, transformers and scipy, into a dry run)."""


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


HEARTBEAT_S = 30.0
"""A line at least this often while trials run, even between their evaluation points."""
POINT_GAP_S = 10.0
"""An evaluation point gets its own line unless the last line is younger than this."""
LAST_SHARE = 0.9
"""The share of a run its steps are taken to be when the cost model did not say (the final evaluation
is the rest)."""


@dataclass
class _Live:
    """A running trial as the driver sees it: when it started, how far its steps were at its last
    evaluation point and when that came, and the share it had done before it started (a run resumed
    from its checkpoint reports that point first)."""

    start: float
    steps_share: float = LAST_SHARE
    at: float = 0.0
    step: int = 0
    total_steps: int = 0
    stsb_dev: float | None = None
    resumed: float | None = None  # fraction() at the point it resumed from; None: from step 0

    def fraction(self) -> float:
        """The share of the run done at its last evaluation point: the steps' share of the run times
        the share of its steps taken (the final evaluation comes after the last step)."""
        return self.steps_share * min(1.0, self.step / self.total_steps) if self.total_steps > 0 else 0.0


class GridProgress:
    """Counts a grid's trials and prints a line per start and end, per evaluation point (at most one
    every :data:`POINT_GAP_S`) and at least every :data:`HEARTBEAT_S` while trials run.

    The ETA comes from the cost model's estimate of every planned run (``estimates``): what is left
    of each (a running run's share by its steps), scaled by how fast the grid has gone against the
    estimates so far, spread over ``slots`` (longest first). Without estimates it extrapolates from
    the ended trials.

    Args:
        total: trials in the grid.
        store: the run store (a trial that failed outside ``train_run`` gets its record here).
        log: where the lines go.
        estimates: the cost model's seconds per planned run, by run id.
        slots: trials that run at once.
        steps_shares: the share of each run's estimate that its steps and dev evaluations take (the rest
            is the final evaluation), by run id; default :data:`LAST_SHARE`.
        clock: seconds (tests pass their own).
    """

    def __init__(
        self,
        total: int,
        store: RunStore,
        log: Log,
        estimates: Mapping[str, float] | None = None,
        slots: int = 1,
        clock: Callable[[], float] = time.perf_counter,
        steps_shares: Mapping[str, float] | None = None,
    ) -> None:
        self.total = total
        self.store = store
        self.log: Log = log
        self.clock = clock
        self.start = clock()
        self.last_line = self.start
        self.running = 0
        self.done = 0
        self.failed: list[tuple[str, str]] = []
        self.estimates = dict(estimates or {})
        self.slots = max(1, slots)
        self.steps_shares = dict(steps_shares or {})
        self.live: dict[str, _Live] = {}
        self.work: dict[str, float] = {}  # ended runs' trial seconds
        self.resumed: dict[str, float] = {}  # the share an ended run had done before it started

    def eta_s(self) -> float | None:
        """Seconds until the grid ends, or None (nothing left, or nothing to go on yet)."""
        ended = self.done + len(self.failed)
        remaining = self.total - ended
        if remaining <= 0:
            return None
        now = self.clock()
        if not self.estimates:
            return (now - self.start) / ended * remaining if ended else None
        # the pace: seconds taken against seconds estimated, for ended runs and running runs' steps
        spent = predicted = 0.0
        for run_id, estimate in self.estimates.items():
            live = self.live.get(run_id)
            if run_id in self.work:
                spent += self.work[run_id]
                predicted += estimate * (1 - self.resumed.get(run_id, 0.0))
            elif live is not None and live.fraction() > (live.resumed or 0.0):
                spent += live.at - live.start
                predicted += estimate * (live.fraction() - (live.resumed or 0.0))
        scale = spent / predicted if predicted > 0 else 1.0
        # what is left: a running run's estimate at that pace less the time it has run (at least its
        # final evaluation), a waiting run's whole estimate
        left: list[float] = []
        failed = {run_id for run_id, _ in self.failed}
        for run_id, estimate in self.estimates.items():
            live = self.live.get(run_id)
            if run_id in self.work or run_id in failed:
                continue
            if live is None:
                left.append(estimate * scale)
            else:
                final = estimate * scale * (1 - min(live.steps_share, LAST_SHARE))  # after the last step
                rest = estimate * scale * (1 - (live.resumed or 0.0))  # a resumed run's rest
                left.append(max(rest - (now - live.start), min(final, rest)))
        return makespan(left, self.slots) if left else None

    def line(self, event: str) -> None:
        """Log the counts, the ETA and ``event``."""
        ended = self.done + len(self.failed)
        remaining = self.total - ended
        now = self.clock()
        eta_s = self.eta_s()
        eta = f", ETA {fmt_duration(eta_s)}" if eta_s is not None and remaining else ""
        self.last_line = now
        self.log(
            f"[{ended}/{self.total}] done {self.done}, running {self.running}, failed {len(self.failed)}, "
            f"remaining {remaining}{eta} ({fmt_duration(now - self.start)} elapsed) | {event}"
        )

    def trial_started(self, run_id: str | None) -> None:
        self.running += 1
        share = min(1.0, max(0.0, self.steps_shares.get(str(run_id), LAST_SHARE)))
        self.live[str(run_id)] = _Live(start=self.clock(), steps_share=share)
        self.line(f"started {run_id}")

    def trial_result(self, run_id: str | None, result: Mapping[str, Any]) -> None:
        """An evaluation point a trial reported (``step``, ``total_steps``, ``stsb_dev``, ...)."""
        live = self.live.get(str(run_id))
        step, total = result.get("step"), result.get("total_steps")
        if live is None or not isinstance(step, int) or not isinstance(total, int):
            return  # the trial's final report, or one from a trial this grid did not see start
        live.step, live.total_steps, live.at = step, total, self.clock()
        if isinstance(result.get("resumed_from_step"), int):  # the point a resumed run starts from
            live.resumed = live.fraction()
        dev = result.get("stsb_dev")
        live.stsb_dev = float(dev) if isinstance(dev, int | float) else None
        if self.clock() - self.last_line >= POINT_GAP_S:
            self.line(f"{run_id} {_where(live)}")

    def tick(self) -> None:
        """Called often while the grid runs: a line when none came for :data:`HEARTBEAT_S`."""
        if self.running and self.clock() - self.last_line >= HEARTBEAT_S:
            shown = [f"{run_id} {_where(live)}" for run_id, live in self.live.items()][:3]
            more = f" and {len(self.live) - 3} more" if len(self.live) > 3 else ""
            self.line(f"running: {'; '.join(shown)}{more}")

    def _ended(self, run_id: str, work_s: Any = None) -> None:
        live = self.live.pop(run_id, None)
        if live is not None and live.resumed:
            self.resumed[run_id] = live.resumed
        if isinstance(work_s, int | float):
            self.work[run_id] = float(work_s)
        elif live is not None:
            self.work[run_id] = self.clock() - live.start

    def trial_finished(self, run_id: str | None, result: Mapping[str, Any]) -> None:
        """A trial ended normally; ``result`` is what it reported (``best_stsb_dev``, ``work_s``)."""
        self.running = max(0, self.running - 1)
        self.done += 1
        work = result.get("work_s")
        self._ended(str(run_id), work)
        dev = result.get("best_stsb_dev")
        dev_text = f"STS-B dev {dev:.2f}, " if isinstance(dev, int | float) else ""
        work_text = f"{work:.1f} s" if isinstance(work, int | float) else "?"
        self.line(f"finished {run_id} ({dev_text}{work_text})")

    def trial_failed(self, config: RunConfig, reason: str, traceback_file: str | None = None) -> None:
        """A trial errored: its record says ``failed`` (its own reason, else ``reason``)."""
        self.running = max(0, self.running - 1)
        run_id = config.run_id()
        self.live.pop(run_id, None)  # a failed run's time says nothing about the others' pace
        where = f" (traceback: {traceback_file})" if traceback_file else ""
        ensure_failed_record(self.store, config, reason)
        record = self.store.load(run_id) or {}
        self.failed.append((run_id, str(record.get("error") or reason)))
        self.line(f"FAILED {run_id}: {self.failed[-1][1]}{where}")


def _where(live: _Live) -> str:
    """``step 20/40, STS-B dev 61.23`` (no STS-B dev before the first point; after the last step,
    ``, final evaluation``: the run scores its best state on the final tasks)."""
    dev = f", STS-B dev {live.stsb_dev:.2f}" if live.stsb_dev is not None else ""
    if not live.total_steps:
        return "starting"
    last = ", final evaluation" if live.step >= live.total_steps else ""
    return f"step {live.step}/{live.total_steps}{dev}{last}"


@dataclass
class GridReport:
    """What a grid did and where its time went.

    Attributes:
        total: trials started.
        finished: trials that ended with a finished record.
        failed: ``(run_id, reason)`` per failed trial.
        wall_s: wall time of :func:`harness.grid.tune.driver.run_trials` (Ray start-up included).
        ray_start_s: time to start or connect to Ray.
        fit_s: time inside ``Tuner.fit`` (scheduling and trials).
        work_s: sum over trials of the time spent inside the trial body (training and evaluation).
        slots: how many trials could run at once with the resources Ray saw.
        interrupted: runs the grid left ``running``, now marked ``interrupted``.
        tune_dir: Ray Tune's folder of this grid (TensorBoard, CSV and JSON per run), kept.
        watch: where else the grid was tracked (``--track``), one line each.
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
    tune_dir: Path | None = None
    watch: list[str] = field(default_factory=list)

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
        lines.extend(self.where_lines())
        return lines

    def where_lines(self) -> list[str]:
        """Where the runs' curves are: Tune's folder (TensorBoard, CSV, JSON) and the trackers."""
        lines = []
        if self.tune_dir is not None:
            lines.append(
                f"curves: {self.tune_dir} (Ray Tune's TensorBoard, CSV and JSON per run; "
                f"tensorboard --logdir {self.tune_dir})"
            )
        return lines + list(self.watch)


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


class CapacityLost(GridStopped):
    """No alive node could take the grid's waiting runs for the stated wait (``--lost-node-wait``);
    ``report.interrupted`` lists the runs marked ``interrupted`` (the next grid runs them again)."""

    def __init__(self, report: GridReport, reason: str) -> None:
        HarnessError.__init__(
            self,
            f"{reason}; finished runs are kept and the grid lock is released: the same command resumes "
            "the grid once such a node is back",
        )
        self.report = report


class GridInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`harness.grid.tune.driver.run_trials`; ``report`` says what was finished
    and what was interrupted."""

    def __init__(self, report: GridReport) -> None:
        super().__init__("interrupted")
        self.report = report


def save_traceback(folder: Path) -> Path | None:
    """Write the exception being handled to ``folder/grid-stopped-<time>.txt``; its path, or None."""

    path = folder / f"grid-stopped-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.txt"
    try:
        write_text(path, traceback.format_exc())
    except OSError:
        return None
    return path


__all__ = [
    "CapacityLost",
    "GridInterrupted",
    "GridProgress",
    "GridReport",
    "GridStopped",
    "fmt_duration",
    "print_line",
    "save_traceback",
]
