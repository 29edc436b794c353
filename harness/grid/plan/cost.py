"""What a grid costs before it runs: seconds per run, hours per table, makespan on N parallel slots.

A run's estimate is the sum of its parts::

    steps x step_s x step_rows / 2        training (a SimCSE step scaled by the method's encoder rows:
                                          those with gradient, plus those without at
                                          NO_GRAD_ROW_COST each, see step_rows)
  + first_step_s                          the first step beyond a steady one (compilation, warm-up;
                                          measured by a calibration or by records, else 0)
  + dev_evals x dev_eval_s                STS-B dev evaluations (one every eval_every; the one at step 0
                                          only for runs that cannot share it, see computed_dev_evals)
  + sts_s [eval_precision]                final STS, when the run scores STS
  + transfer [transfer_mode, precision]   final transfer, when a transfer table uses the run:
                                          embedding its sentences (TRANSFER_PER_STS final STS
                                          passes) plus the classifier fits (TRANSFER_FIT_S)
  + post-processing fit                   post-whitening or flow: embedding its sentences at the
                                          STS pass's speed; a flow adds its fit
                                          (FLOW_FIT_S_PER_SENTENCE each)
 The unit costs come, in this order of preference, from finished records in the run store with the same
machine-relevant settings (device kind, encoder, precision, threads, batch and length: the median of
what those runs measured; the final STS and transfer passes from each record's ``final_seconds``), else
from the built-in table (:mod:`harness.grid.plan.unit_costs`, measured on the machines named there),
else from a SimCSE step measured for the encoder and the ratios of the built-in table. Every estimate
says where its numbers came from. ``harness grid --dry-run`` prints the estimate and a grid starts its
runs longest first (:func:`longest_first`), which shortens the makespan when runs
of very different lengths share a few slots.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.config.hardware import cpu_id as this_cpu
from harness.config.settings import steps_per_epoch
from harness.evaluation.tasks import sts_sentences
from harness.grid.plan.unit_costs import (
    BUILTIN,
    COMPUTE,
    FLOW_FIT_S_PER_SENTENCE,
    UnitCosts,
    encoder_class,
    sharing_slowdown,
)
from harness.run.footprint import FootprintCache, footprint
from harness.store.run_config import RunConfig


def _machine_key(config: RunConfig, device: str) -> tuple[Any, ...]:
    return (device, config.model, config.precision, config.threads, config.batch_size, config.max_length)


NO_GRAD_ROW_COST = 1.0 / 3.0
"""The cost of an encoder row without gradient (a forward only: a momentum key encoder's pass) as a
share of a row with gradient (forward and backward): the backward computes about twice the forward's
products (gradients with respect to the inputs and to the weights). An operation count, not a
measurement; ``benchmarks/bench_methods.py`` times what a method's step really costs."""


def step_rows(config: RunConfig, footprints: FootprintCache | None = None) -> float:
    """Encoder rows per sentence of one training step as the cost model counts them: the method's
    rows with gradient plus :data:`NO_GRAD_ROW_COST` of each row without (SimCSE: 2), as measured
    (:func:`harness.run.footprint.footprint`, through ``footprints`` when given)."""
    measure = footprints.get if footprints is not None else footprint
    measured = measure(config.method, config.params, config.hidden_size)
    return measured.rows + NO_GRAD_ROW_COST * measured.no_grad_rows


def dev_evals_of(steps: int, eval_every: int) -> int:
    """Dev evaluations of a run: step 0, every ``eval_every`` steps, and the last step."""
    if steps <= 0:
        return 1
    return 1 + steps // eval_every + (1 if steps % eval_every else 0)


def shares_step0_dev_eval(config: RunConfig) -> bool:
    """Whether a grid run reads its step-0 dev evaluation from the store's cache
    (:mod:`harness.run.dev_cache`) rather than computing it: every training run whose evaluation
    pooler is not ``cls`` (that one holds the seed's freshly initialised head at step 0). The first
    run of each starting encoder computes it; one dev evaluation per grid, left out of the estimate."""
    steps = config.max_steps
    return (steps is None or steps > 0) and config.eval_pooler != "cls"


def computed_dev_evals(config: RunConfig, steps: int) -> int:
    """Dev evaluations a grid run computes: :func:`dev_evals_of` less a shared step-0 one."""
    return dev_evals_of(steps, config.eval_every) - (1 if steps > 0 and shares_step0_dev_eval(config) else 0)


def _record_steps(record: Mapping[str, Any]) -> int | None:
    trajectory = record.get("trajectory") or []
    return int(trajectory[-1]["step"]) if trajectory else None


class CostModel:
    """Unit costs for the runs of a grid: calibrated from finished records where there are some.

    Args:
        records: finished run records (e.g. ``RunStore.load_all()``), used to calibrate.
        device: ``cpu`` or ``cuda``: where the grid's trials will run.
        corpus_sizes: corpus path -> sentences, for runs of one epoch (``max_steps = None``).
        trials_per_gpu: trials sharing one GPU (``1 / --gpus-per-trial``); their training and
            evaluation slow down as measured (:func:`sharing_slowdown`), calibrated numbers included.
        cpu_id: the processor the grid will run on (default: this machine's
            :func:`~harness.config.hardware.cpu_id` for ``cpu``): records whose provenance names the same
            one calibrate alone where there are any, since two EPYC generations sold under one name
            ran this project's bf16 steps 1.8x apart (docs/speed.md, "Processors"). Otherwise every
            record of the device does.
        calibrations: unit costs measured by ``benchmarks/gpu_check.py``
            (:func:`harness.grid.plan.calibration_files.load_calibrations`): for their device, encoder class,
            precision, batch and length they replace the built-in table; records still come first.
        footprints: where the methods' footprints were kept (:class:`FootprintCache`; default:
            measured in this process only).
        device_name: the GPU the grid will run on (``torch.cuda.get_device_name``), where known: only
            calibrations of that device count. None (no GPU here): any GPU's, named in the source.
        calibration_dir: where calibration files were looked for (named when there is none).
    """

    def __init__(
        self,
        records: Iterable[Mapping[str, Any]] = (),
        device: str = "cpu",
        corpus_sizes: Mapping[str, int] | None = None,
        trials_per_gpu: int = 1,
        cpu_id: str | None = None,
        calibrations: Iterable[Mapping[str, Any]] = (),
        footprints: FootprintCache | None = None,
        device_name: str | None = None,
        calibration_dir: str | None = None,
    ) -> None:
        self.device = device
        self.footprints = footprints
        self.device_name = device_name if device == "cuda" else None
        self.calibration_dir = calibration_dir
        self.trials_per_gpu = trials_per_gpu if device == "cuda" else 1
        self.corpus_sizes = dict(corpus_sizes or {})
        if cpu_id is None and device == "cpu":
            cpu_id = this_cpu()
        self.cpu_id = cpu_id or ""
        self.calibrations = [
            c
            for c in calibrations
            if c.get("device") == device and self.device_name in (None, c.get("device_name"))
        ]
        self._measured: dict[tuple[Any, ...], dict[str, list[float]]] = {}
        self._same_cpu: dict[tuple[Any, ...], dict[str, list[float]]] = {}
        counted: set[str] = set()
        for record in records:
            run_id = record.get("run_id")
            if isinstance(run_id, str) and record.get("status") == "finished":
                if run_id in counted:  # a run counts once, however many copies are passed
                    continue
                counted.add(run_id)
            self._add(record)

    def _add(self, record: Mapping[str, Any]) -> None:
        if record.get("status") != "finished":
            return
        try:
            config = RunConfig.from_dict(record["config"])
        except Exception:  # records of an older schema or a removed method calibrate nothing
            return
        steps = _record_steps(record)
        prov = record.get("provenance") or {}
        device = str(prov.get("device", "cpu")).split(":")[0]
        if steps is None or device != self.device:
            return
        key = _machine_key(config, device)
        buckets = [self._measured.setdefault(key, {})]
        if self.cpu_id and device == "cpu" and prov.get("cpu_id") == self.cpu_id:
            buckets.append(self._same_cpu.setdefault(key, {}))
        for bucket in buckets:
            self._add_to(bucket, record, config, steps)

    def _add_to(
        self, bucket: dict[str, list[float]], record: Mapping[str, Any], config: RunConfig, steps: int
    ) -> None:
        if steps > 0 and record.get("train_time_s"):
            rows = step_rows(config, self.footprints) / 2.0
            first = float(record.get("first_step_s") or 0.0)  # older records: not timed apart
            steady = max(float(record["train_time_s"]) - first, 0.0)
            bucket.setdefault("step_s", []).append(steady / steps / rows)
            if "first_step_s" in record:
                bucket.setdefault("first_step_s", []).append(first)
        final_s = record.get("final_time_s")
        if final_s is not None and config.post_whiten == "none":
            parts = record.get("final_seconds")
            if not isinstance(parts, Mapping):  # older records: only an STS-only run's total says
                parts = {"sts": final_s} if config.final_tasks == "sts" else {}
            if isinstance(parts.get("sts"), int | float):
                bucket.setdefault(f"sts_{config.eval_precision}", []).append(float(parts["sts"]))
            if isinstance(parts.get("transfer"), int | float):
                key = f"transfer_{config.transfer_mode}/{config.eval_precision}"
                bucket.setdefault(key, []).append(float(parts["transfer"]))
            cached = 1 if record.get("step0_probe_cached") else 0
            dev_evals = dev_evals_of(steps, config.eval_every) - cached
            eval_s = float(record.get("eval_time_s") or 0.0) - float(final_s)
            if eval_s > 0:
                bucket.setdefault(f"dev_eval_{config.precision}", []).append(eval_s / dev_evals)

    def units(self, config: RunConfig) -> tuple[UnitCosts, float | None]:
        """The unit costs for ``config`` and, when measured, its dev evaluation's seconds (else None)."""
        kind = encoder_class(config.model)
        base = BUILTIN.get((self.device, kind, config.precision)) or BUILTIN.get((self.device, kind, "fp32"))
        scale = 1.0
        if base is not None:
            source = base[2]
        else:  # another encoder measured on this device: scale its compute by encoder size
            # this device's entry at the precision, else its fp32 one (a tf32 step is no slower)
            known = [k for k in BUILTIN if k[0] == self.device and k[2] == config.precision] or [
                k for k in BUILTIN if k[0] == self.device and k[2] == "fp32"
            ]
            ref = known[0] if known else ("cpu", "minilm", "fp32")
            base = BUILTIN[ref]
            scale = COMPUTE[kind] / COMPUTE[ref[1]]
            source = (
                f"{config.model} not measured on {self.device}: {ref[1]}'s costs x {scale:.2f} (encoder size)"
            )
        step_s = base[0] * scale
        sts = {k: v * scale for k, v in base[1].items()}
        calibrated_dev_eval = None
        calibration = self._calibration(config, kind)
        transfer: dict[str, float] = {}
        method_steps: dict[str, Mapping[str, float]] = {}
        slowdown: dict[str, float] = {}
        first_step = 0.0
        size = 1.0
        if calibration is None and self.device != "cpu":  # the GPU measured another encoder: scaled by size
            calibration = self._calibration(config, None)
            if calibration is not None:
                size = COMPUTE[kind] / COMPUTE.get(str(calibration["encoder"]), 1.0)
        if calibration is not None:
            step_s = float(calibration["step_s"]) * size
            sts.update({k: float(v) * size for k, v in dict(calibration.get("sts_s") or {}).items()})
            calibrated_dev_eval = float(calibration["probe_s"]) * size
            if size == 1.0:  # the transfer fits run on the host: not scaled with the encoder
                transfer.update({k: float(v) for k, v in dict(calibration.get("transfer_s") or {}).items()})
            method_steps = dict(calibration.get("method_steps") or {})
            slowdown = {str(k): float(v) for k, v in dict(calibration.get("trials_slowdown") or {}).items()}
            first_step = float(calibration.get("first_step_s") or 0.0)
            when = str(calibration.get("measured_at", ""))[:10]
            how = calibration.get("source", "a calibration file")
            where = f"; {calibration['file']}" if calibration.get("file") else ""
            scaled = f" for {calibration['encoder']}, x {size:.2f} (encoder size)" if size != 1.0 else ""
            name = calibration.get("device_name", self.device)
            source = f"calibrated on {name}{scaled} ({when}, {how}{where})"
        machine = _machine_key(config, self.device)
        same = self._same_cpu.get(machine, {})
        measured = same or self._measured.get(machine, {})
        dev_eval = calibrated_dev_eval
        if measured:
            n = max(len(v) for v in measured.values())
            where = "on this CPU" if same else "in the store"
            source = f"calibrated from {n} finished run(s) {where}"
            if "step_s" in measured:
                step_s = statistics.median(measured["step_s"])
            for precision in ("fp32", "bf16"):
                if f"sts_{precision}" in measured:
                    sts[precision] = statistics.median(measured[f"sts_{precision}"])
            if f"dev_eval_{config.precision}" in measured:
                dev_eval = statistics.median(measured[f"dev_eval_{config.precision}"])
            if "first_step_s" in measured:
                first_step = statistics.median(measured["first_step_s"])
            for key, values in measured.items():
                if key.startswith("transfer_"):
                    transfer[key.removeprefix("transfer_")] = statistics.median(values)
        calibrated = calibration is not None or bool(measured)
        units = UnitCosts(step_s, sts, transfer, source, calibrated, method_steps, slowdown, first_step)
        return units, dev_eval

    def _calibration(self, config: RunConfig, kind: str | None) -> Mapping[str, Any] | None:
        """The newest calibration of this device for the config's encoder class (None: any in
        ``COMPUTE``), precision, batch and length, if any."""
        fits = [
            c
            for c in self.calibrations
            if (c.get("encoder") == kind if kind else c.get("encoder") in COMPUTE)
            and (
                self.device != "cpu"
                or (c.get("device_name") == self.cpu_id and c.get("threads") == config.threads)
            )
            and c.get("precision") == config.precision
            and c.get("batch_size") == config.batch_size
            and c.get("max_length") == config.max_length
        ]
        return max(fits, key=lambda c: str(c.get("measured_at", ""))) if fits else None

    def steps(self, config: RunConfig) -> int:
        if config.max_steps is not None:
            return config.max_steps
        size = self.corpus_sizes.get(config.corpus, 1_000_000)
        return steps_per_epoch(size, config.batch_size)

    def run_seconds(self, config: RunConfig) -> float:
        """Estimated wall seconds of one run (training, dev evaluations, final tasks, whitening fit)."""
        return sum(self.run_parts(config).values())

    def run_parts(self, config: RunConfig) -> dict[str, float]:
        """Estimated wall seconds of one run by part: ``training`` (its steps, and the first step's
        compilation once), ``probes`` (the STS-B dev evaluations; the part keeps its first name, as
        gpu_check.json writes it), ``final`` (final STS and transfer) and ``post`` (a post-processing
        fit: whitening or flow)."""
        units, dev_eval = self.units(config)
        steps = self.steps(config)
        shared = sharing_slowdown(config.model, self.trials_per_gpu)
        measured = [n for n in units.slowdown if n.isdigit() and int(n) > 1]
        if self.trials_per_gpu > 1 and measured:  # the device's own measurement, nearest k
            k = min(measured, key=lambda n: abs(int(n) - self.trials_per_gpu))
            shared = units.slowdown[k] * self.trials_per_gpu / int(k)
        training = steps * self._step_s(config, units) * shared + (units.first_step_s if steps > 0 else 0.0)
        dev_eval_s = dev_eval or units.dev_eval_s(config.precision)
        dev_evals = computed_dev_evals(config, steps) * dev_eval_s * shared
        sts = units.sts_s.get(config.eval_precision, units.sts_s["fp32"]) * shared
        final = post = 0.0
        if config.final_tasks in ("sts", "all"):
            final += sts
        if config.final_tasks in ("transfer", "all"):
            final += units.transfer(config.transfer_mode, config.eval_precision)  # fits: host CPU
        if config.post_whiten != "none":
            post += sts * config.post_whiten_sentences / sts_sentences()  # the task registry's count
        if config.post_whiten.startswith("flow"):
            post += FLOW_FIT_S_PER_SENTENCE * config.post_whiten_sentences
        return {"training": training, "probes": dev_evals, "final": final, "post": post}

    def _step_s(self, config: RunConfig, units: UnitCosts) -> float:
        """One step of ``config``: SimCSE's scaled by encoder rows, or, where a calibration timed this
        method beside SimCSE, SimCSE's times that measured ratio, scaled by rows from the measured ones."""
        rows = step_rows(config, self.footprints)
        own, simcse = units.method_steps.get(config.method), units.method_steps.get("simcse")
        if own and simcse:
            ratio = float(own["step_s"]) / float(simcse["step_s"])
            return units.step_s * ratio * rows / float(own["rows"])
        return units.step_s * rows / 2.0

    def source(self, config: RunConfig) -> str:
        return self.units(config)[0].source

    def uncalibrated_line(self, configs: Sequence[RunConfig]) -> str | None:
        """The estimate's first line when some run's unit costs are not this device's: which device
        has no calibration and where the numbers below come from instead; None when all are."""
        others = sorted({u.source for u in (self.units(c)[0] for c in configs) if not u.calibrated})
        if not others:
            return None
        where = f" in {self.calibration_dir}" if self.calibration_dir else ""
        if self.device == "cuda":
            what = self.device_name or "the GPU (none visible here)"
            fix = "`make gpu-check` on it writes one"
        else:
            what = f"this processor ({self.cpu_id or 'unknown'})"
            fix = "a grid over 5 min measures it before it starts"
        return (
            f"estimate: no calibration for {what}{where} ({fix}): {len(others)} unit cost(s) below are "
            f"other machines' numbers, not this device's"
        )


__all__ = [
    "CostModel",
    "computed_dev_evals",
    "dev_evals_of",
    "shares_step0_dev_eval",
    "step_rows",
]
