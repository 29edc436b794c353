"""The Ray Tune adapter: the ONLY module of the harness that imports ``ray``.

:func:`~harness.grid.tune.driver.run_trials` runs one Tune trial per resolved
:class:`~harness.store.run_config.RunConfig`. Each trial is a function trainable that calls
:func:`harness.run.training.train_run` on whichever node Ray gives it.

* Records travel through Ray, not through a shared folder: the trial's store is a relay
  (:class:`TrialStore`) whose saves ride on the trial's Tune reports, and the driver alone writes
  the run store (``runs/records/<run_id>.json``, the only thing tables read) from its callback, with
  the store's own rules (attempts; a record sent twice is one record). See :mod:`harness.grid.relay`.
* Resume checkpoints and ``--save-model`` weights go through Tune's storage (``storage_dir``: a
  folder or a pyarrow URI; default ``<runs>/tune``): each resume checkpoint is reported with
  ``tune.report(..., checkpoint=...)``; a trial Tune retries (``max_failures``, e.g. after its node
  was lost) starts from ``tune.get_checkpoint()``, on any node that reaches the storage; a grid
  started again after its driver was killed hands each run the checkpoint the driver noted
  (``<runs>/resume/<run_id>.json``). A finished run's last checkpoint is its saved encoder (the driver
  fetches it into ``<runs>/checkpoints/<run_id>``) or a small marker, so Tune (``num_to_keep=1``)
  drops its resume checkpoint.

* Live curves: the real trial body reports every evaluation point through Tune (step, loss, STS-B
  dev, alignment, uniformity, elapsed), then once more at its end (status, best STS-B dev, work
  seconds). Tune's own folder of a grid, ``<runs>/tune/<grid name>-<time>/`` (TensorBoard event
  files, ``progress.csv`` and ``result.json`` per run, error files of failed trials), is kept:
  ``tensorboard --logdir`` on it shows every run's curves while the grid runs. ``--track mlflow`` /
  ``wandb`` add Ray's own MLflow and Weights & Biases callbacks (:mod:`harness.grid.progress.tracking`).
* Ray starts locally with every CPU and GPU it sees, or connects to ``address`` (an existing
  cluster; no node needs the driver's runs folder, every node reads the data root at the driver's
  path). ``smoke=True`` starts a small local Ray (no GPUs) for tests and CI.
* Resources per trial: ``cpus_per_trial`` CPUs (also the trial's torch thread count) and
  ``gpus_per_trial`` GPUs (fractions share a GPU between small trials; default 1 where the trials'
  machine has a GPU, else 0, decided once by the grid: ``GridRequest.trial_gpus``), plus
  ``trial_resources`` (custom Ray resources: trials go only to nodes offering them). A request no
  alive node can take is refused at once (:func:`harness.grid.capacity.trial_fit_problems`).
* A failing trial does not stop the others (``fail_fast=False``; no retry unless ``max_failures``).
  ``train_run`` records its own failures; a trial that dies before or outside it (an import error, a worker
  killed for memory) gets a ``failed`` record written by the trial wrapper or, failing that, by the
  driver, with the reason.
* Memory: a CPU trial also asks Ray for the host memory it needs at its peak
  (:func:`harness.grid.plan.memory.estimate_bytes`, at most the largest node's ``memory``
  resource), so Ray starts no more trials at once than the node holds (two K = 10 noise probes at
  ~5 GB each fit in 24 GB, three do not); after every trial the worker gives its freed memory back
  to the system (a reused worker runs the next trial in a new thread, whose allocator would not
  reuse it).
* Ray Tune itself failing (Tune 2.5x raises on the ``OutOfMemoryError`` of a worker Ray's memory
  monitor killed; tests/grid/tune/test_driver.py replays it) ends the grid with
  :class:`~harness.grid.progress.report.GridStopped`: runs left ``running`` are marked ``interrupted`` with
  Tune's reason, finished ones stay, the next grid resumes.
* Progress: a line per trial start and end, per evaluation point and at least every 30 s (done /
  running / failed / remaining, with an ETA from the cost model's estimates), written by
  :class:`harness.grid.progress.report.GridProgress`; ``TuneProgress`` only adapts it to Tune's callbacks.
* Each trial gets one frozen :class:`TrialSpec` (data root, device, threads, the resume checkpoints'
  interval the driver read, the train function) and its :class:`~harness.store.run_config.RunConfig`
  itself, already validated by the grid; it works in a folder of its own,
  ``<tmp>/harness-trial-<worker pid>-*`` on its node, removed when it ends.
* Record bookkeeping (a ``failed`` record for a trial that died, ``interrupted`` marks) lives in
  :mod:`harness.store.bookkeeping`; SIGTERM handling in :mod:`harness.grid.signals`.
* Resuming is the grid's job: killed and started again, it skips runs with a finished record
  (:mod:`harness.grid.plan.status`), so only the remaining ones run.
* Ctrl-C: the trials are stopped, Ray shuts down, runs left ``running`` are marked ``interrupted``
  (the next grid runs them again) and :class:`KeyboardInterrupt` propagates (exit status 130).
* A locally started Ray keeps its session files in a fresh ``harness-ray-<pid>-*`` folder under the
  system temporary folder, removed at shutdown; folders left by killed grids (dead pid) are removed
  at the next start.

The returned :class:`~harness.grid.progress.report.GridReport` says how much of the wall time was trial work
and how much was Ray start-up and scheduling.
"""

from __future__ import annotations

import os

_QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage-stats reporting
    "RAY_AIR_NEW_OUTPUT": "0",  # the legacy reporter honours verbose=0
    "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "600",
    # Ctrl-C raises KeyboardInterrupt in the driver (Tune's own handler would end fit() quietly and
    # the grid would report success); run_trials marks the interrupted runs and re-raises it.
    "TUNE_DISABLE_SIGINT_HANDLER": "1",
}
for _key, _value in _QUIET_ENV.items():
    os.environ.setdefault(_key, _value)
