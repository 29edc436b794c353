"""The unit costs a run's estimate is priced from: what a step, a dev evaluation, a final STS pass
and a transfer evaluation cost, the built-in table of them measured on the machines it names, and how
trials sharing a GPU slow each other (:mod:`harness.grid.plan.cost` prices runs with them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from harness.config.models import TINY_MODEL

DEV_EVAL_SHARE = 0.14
"""A dev evaluation's time as a share of a final STS pass in the same precision (packaged MiniLM, one
CPU thread; the measurement: docs/speed.md, "Where the code's constants come from")."""
TRANSFER_PER_STS = 415.0 / 49.8
"""Embedding the seven transfer tasks (SentEval's sorted batches, every split) / the final STS pass,
same encoder, precision and threads, as ``bench_transfer_eval.py`` and ``bench_sts_eval.py`` print
them (packaged MiniLM, fp32, 2 threads; dated in docs/speed.md): 8.3 STS passes."""
TRANSFER_FIT_S = {"fasttest": 12.3 * 454.8 / 230.0, "test": 454.8}
"""The transfer classifier fits of one run, one worker (a trial with one thread fits in-process), on
the host CPU whatever device embeds: test mode with one worker; fasttest with two workers, times the
test mode's one-worker/two-worker ratio (1.98), as ``bench_transfer_eval.py`` prints them (dated in
docs/speed.md)."""
FLOW_FIT_S_PER_SENTENCE = 7.2e-4
"""Fitting BERT-flow (harness/postprocess/flow.py, one epoch) per fitting sentence, one thread, on the
packaged encoder's embeddings (d = 384), as ``benchmarks/bench_flow_fit.py`` prints it (dated in
docs/speed.md); the fit is linear in the sentences (one epoch of fixed-size batches)."""
STS_PER_STEP = 35.0
"""Final STS pass / SimCSE step, same device and precision (CPU measurements above: 38 fp32, 32 bf16);
used only for an encoder with a measured step but no measured evaluation."""


@dataclass(frozen=True)
class UnitCosts:
    """Seconds of one unit of work under one set of machine-relevant settings."""

    step_s: float
    """One SimCSE step (two encoder rows per sentence) at the run's batch size and length."""
    sts_s: Mapping[str, float]
    """The final STS pass (seven tasks), by evaluation precision."""
    transfer_s: Mapping[str, float]
    """The final transfer tasks (seven) measured by finished runs, keyed ``"<mode>/<precision>"``;
    a key not there is derived (:meth:`transfer`)."""
    source: str
    calibrated: bool = True
    """Measured on the device the estimate is for (its records or a calibration file of it), not
    the built-in table's machines."""
    method_steps: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    """A calibration's steps by method (``step_s`` and the encoder ``rows`` it measured them at)."""
    slowdown: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """A calibration's measured slowdown of k trials sharing the device, keyed ``str(k)``."""
    first_step_s: float = 0.0
    """What a run's first step costs beyond a steady one (compilation, warm-up), once per run."""

    def dev_eval_s(self, precision: str) -> float:
        return DEV_EVAL_SHARE * self.sts_s.get(precision, self.sts_s.get("fp32", 0.0))

    def transfer(self, mode: str, precision: str) -> float:
        """Seconds of the final transfer tasks: measured, else embedding (TRANSFER_PER_STS final STS
        passes in the same precision) plus the classifier fits of ``mode``."""
        measured = self.transfer_s.get(f"{mode}/{precision}")
        if measured is not None:
            return measured
        sts = self.sts_s.get(precision, self.sts_s.get("fp32", 0.0))
        return TRANSFER_PER_STS * sts + TRANSFER_FIT_S.get(mode, TRANSFER_FIT_S["test"])


# (device kind, encoder, precision) -> measured unit costs. CPU: this project's 2-core machine,
# one thread per trial, another trial running beside it: the bf16 step and bf16 STS pass are the
# medians of the night grid's records (docs/night/runs), the fp32 STS pass one cpu-profile run with
# oneDNN linear layers; the fp32 step an earlier fp32 step times bench_train_step's oneDNN/BLAS
# ratio. GPU: an H100, bert-base-sized encoder with random weights: the compiled bf16 step and the
# fp32 STS pass from benchmarks/gpu_check.py (docs/gpu/); the fp32 step from an earlier eager
# bench, its evaluation derived (STS_PER_STEP). Where and when each was measured: docs/speed.md,
# "Where the code's constants come from".
BUILTIN: dict[tuple[str, str, str], tuple[float, dict[str, float], str]] = {
    ("cpu", "minilm", "bf16"): (
        0.71,
        {"fp32": 45.0, "bf16": 33.5},
        "measured: MiniLM on this 2-core CPU, 1 thread, bf16 (2026-11-23)",
    ),
    ("cpu", "minilm", "fp32"): (
        2.6 * 729.0 / 968.0,
        {"fp32": 45.0, "bf16": 33.5},
        "measured: MiniLM on this 2-core CPU, 1 thread, fp32 (2026-11-23; step scaled to oneDNN)",
    ),
    ("cuda", "bert-base", "bf16"): (
        0.01243,
        {"fp32": 4.21, "bf16": 4.21 * 0.0499 / 0.0697},
        "H100 gpu-check: compiled bf16 step, fp32 STS pass (bert-base-sized, 2026-11-25)",
    ),
    ("cuda", "bert-base", "fp32"): (
        0.0697,
        {"fp32": STS_PER_STEP * 0.0697, "bf16": STS_PER_STEP * 0.0499},
        "H100 step measured (bert-base-sized, fp32, 2026-11-22); evaluation derived from the step",
    ),
}


COMPUTE: dict[str, float] = {
    "tiny": 2 * 64**2 / (12 * 768**2),
    "minilm": 6 * 384**2 / (12 * 768**2),
    "bert-base": 1.0,
    "bert-large": 24 * 1024**2 / (12 * 768**2),
}
"""Per-token compute of each encoder class relative to bert-base (layers x width^2): the smoke
profile's random tiny BERT 0.001, MiniLM-L6 0.125, bert-large 3.56. Scales a measured encoder's
unit costs to an unmeasured one on the same device and precision."""


_GPU_SHARING: dict[str, dict[int, float]] = {
    "minilm": {1: 53.4, 2: 72.1, 4: 75.7, 8: 76.9},
    "bert-base": {1: 14.8, 2: 33.3, 4: 49.4, 8: 52.0},
}
"""Steps per second of one H100 running k trials at once (``bench_gpu_trials.py``, dated in
docs/speed.md; bert-base in bf16): a trial sharing a GPU with k - 1 others runs
``k x rate(1) / rate(k)`` times as long as it would alone (bert-base: 0.89x at 2 -- small trials
leave the GPU idle between kernels --, 1.2x at 4, 2.3x at 8)."""


def sharing_slowdown(model: str, trials_per_gpu: int) -> float:
    """How much longer one trial takes when ``trials_per_gpu`` trials share a GPU (1 = alone)."""
    if trials_per_gpu <= 1:
        return 1.0
    rates = _GPU_SHARING.get(encoder_class(model), _GPU_SHARING["bert-base"])
    k = min(rates, key=lambda n: abs(n - trials_per_gpu))
    return trials_per_gpu * rates[1] / rates[k]


def encoder_class(model: str) -> str:
    """``tiny`` (the smoke profile's random encoder), ``minilm``, ``bert-large`` or ``bert-base``
    (anything else): the encoder's size class."""
    name = model.lower()
    if name == TINY_MODEL:
        return "tiny"
    if name == "minilm" or "minilm" in name:
        return "minilm"
    if "large" in name:
        return "bert-large"
    return "bert-base"
