"""One entry point for the benchmark: STS and/or the SentEval transfer tasks.

:func:`evaluate` returns only the table's numbers, ``{"sts": {...}, "transfer": {...}}`` (the groups
asked); :func:`run_evaluation` returns them with per-subset details and timings, for ``harness eval``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.coerce import coerce_value
from harness.config.choices import TransferMode
from harness.config.paths import senteval_dir
from harness.errors import ConfigError, did_you_mean
from harness.evaluation.sts import BATCH_SIZE, EmbedFn, LengthsFn, run_sts
from harness.evaluation.tasks import check_names, sts_task_names, transfer_task_names, year_task_names
from harness.evaluation.transfer import evaluate_transfer

if TYPE_CHECKING:
    from harness.encoder.model import SentenceEncoder

TASK_GROUPS: tuple[str, ...] = ("sts", "transfer", "all")
STS_AGGREGATES: tuple[str, ...] = ("all", "mean", "wmean")
"""SentEval's aggregates over an STS12-16 year's subsets (see :meth:`EvaluationReport.sts_aggregates`)."""


@dataclass(frozen=True)
class TaskSelection:
    """What ``--tasks`` asked for: the groups to run and, per group, the tasks (``None`` = all).

    Attributes:
        groups: ``("sts",)``, ``("transfer",)`` or ``("sts", "transfer")``, in output order.
        sts: the STS tasks, or ``None`` for every registered one.
        transfer: the transfer tasks, or ``None`` for every registered one.
    """

    groups: tuple[str, ...]
    sts: tuple[str, ...] | None = None
    transfer: tuple[str, ...] | None = None


def select_tasks(tasks: str) -> TaskSelection:
    """``"sts"``, ``"transfer"``, ``"all"`` or comma-separated task names (groups allowed among
    them: ``"sts,MR"``) -> what to run.

    Raises:
        ConfigError: an unknown group or task name (one line, with a "did you mean" hint).
    """
    if tasks in TASK_GROUPS:
        return TaskSelection(("sts", "transfer") if tasks == "all" else (tasks,))
    sts, transfer = sts_task_names(), transfer_task_names()
    groups = {"sts": sts, "transfer": transfer, "all": (*sts, *transfer)}
    names = [n for t in tasks.split(",") if (item := t.strip()) for n in groups.get(item, (item,))]
    for name in names:
        if name not in sts and name not in transfer:
            what = "task group" if len(names) == 1 else "task"
            raise ConfigError(
                f"unknown {what} {name!r}{did_you_mean(name, (*TASK_GROUPS, *sts, *transfer))}; choose "
                f"{', '.join(TASK_GROUPS)} or comma-separated task names: {', '.join((*sts, *transfer))}"
            )
    if not names:
        raise ConfigError(f"no task asked; choose {', '.join(TASK_GROUPS)} or task names")
    chosen_sts = check_names("STS", [n for n in names if n in sts]) if set(names) & set(sts) else None
    chosen_transfer = tuple(dict.fromkeys(n for n in names if n in transfer)) or None
    asked = tuple(g for g, chosen in (("sts", chosen_sts), ("transfer", chosen_transfer)) if chosen)
    return TaskSelection(asked, chosen_sts, chosen_transfer)


def check_mode(mode: str, name: str = "mode") -> str:
    """``"test"`` (10 folds, Adam) or ``"fasttest"`` (5 folds, RMSprop): the transfer parameter set,
    checked by the run settings' rule and message (``transfer_mode``; ``name``: what it was given
    as) where a mode enters other than as a setting (this module's functions, ``harness eval``)."""
    checked: str = coerce_value(name, mode, TransferMode)
    return checked


def encoder_functions(
    encoder: SentenceEncoder, pooler: str, precision: str = "fp32"
) -> tuple[EmbedFn, LengthsFn]:
    """The ``embed`` and ``token_lengths`` functions of an encoder with a pooler.

    Args:
        encoder: a loaded :class:`~harness.encoder.model.SentenceEncoder`.
        pooler: one of :data:`harness.config.choices.POOLERS`.
        precision: ``fp32`` or ``bf16`` (autocast of the forward pass; output float32 either way).

    Returns:
        ``embed(sentences) -> [n, d]`` float32 and ``token_lengths(sentences) -> list[int]`` (the
        tokenizer's counts, special tokens included, no truncation).

    Raises:
        ConfigError: the encoder cannot pool with ``pooler`` (``cls`` without a pooler layer), said
            here, once, rather than at the first embedding.
    """
    problem = encoder.pooler_problem(pooler)
    if problem is not None:
        raise problem

    def embed(sentences: list[str]) -> Any:
        return encoder.embed(sentences, pooler, precision)

    def token_lengths(sentences: list[str]) -> list[int]:
        ids = encoder.tokenizer(list(sentences), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(row) for row in ids]

    return embed, token_lengths


@dataclass
class EvaluationReport:
    """What :func:`run_evaluation` found.

    Attributes:
        results: ``{"sts": {...}, "transfer": {...}}``, the groups asked, percent, unrounded.
        details: per group, extra numbers (STS: per subset/split Pearson, Spearman, n; aggregates).
        seconds: wall time per group.
    """

    results: dict[str, dict[str, float]]
    details: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def sts_aggregates(self) -> dict[str, dict[str, float]]:
        """SentEval's three STS12-16 aggregates of the Spearman correlation, percent, unrounded.

        ``{"STS12": {"all": ..., "mean": ..., "wmean": ...}, ...}`` for the years evaluated: "all" is
        one Spearman over every subset's pairs together (the number in ``results["sts"]``), "mean"
        the unweighted mean of the subsets' Spearman, "wmean" their mean weighted by subset size.
        Empty when STS did not run.
        """
        details = self.details.get("sts", {})
        return {
            task: {agg: float(details[task][agg]["spearman"]) for agg in STS_AGGREGATES}
            for task in year_task_names()
            if isinstance(details.get(task), dict) and "all" in details[task]
        }

    def record(self) -> dict[str, Any]:
        """What a run record keeps as ``final``: :attr:`results`, ``sts_aggregates`` when STS ran,
        and per group the tasks its ``avg`` covers (``sts_tasks``, ``transfer_tasks``; see
        :func:`harness.store.record.record_tasks`)."""
        out: dict[str, Any] = dict(self.results)
        aggregates = self.sts_aggregates()
        if aggregates:
            out["sts_aggregates"] = aggregates
        for group, scores in self.results.items():
            out[f"{group}_tasks"] = [task for task in scores if task != "avg"]
        return out


def run_evaluation(
    embed: EmbedFn,
    data_root: Path,
    tasks: str = "all",
    mode: str = "fasttest",
    *,
    sts_tasks: Sequence[str] | None = None,
    exact_batches: bool = False,
    batch_size: int = BATCH_SIZE,
    token_lengths: LengthsFn | None = None,
    device: torch.device | str | None = None,
) -> EvaluationReport:
    """Evaluate an encoder; see :func:`evaluate` for the arguments it shares.

    Args:
        embed: the encoder, ``list[str]`` of length n -> ``[n, d]``, embedding exactly that list.
        data_root: data root laid out like ``shared/data`` (holding ``senteval/``).
        tasks: ``"sts"``, ``"transfer"``, ``"all"`` or comma-separated task names
            (:func:`select_tasks`).
        mode: transfer parameter set, ``"test"`` or ``"fasttest"`` (STS ignores it).
        sts_tasks: the STS tasks to run (default: those ``tasks`` names, else every registered one).
        exact_batches: STS: reproduce SentEval's encoder calls instead of embedding each distinct
            sentence once.
        batch_size: STS: sentences per encoder call.
        token_lengths: STS: token counts of a list of sentences, to sort batches by length.
        device: transfer: the encoder's device; an accelerator fits the classifiers there
            (:func:`~harness.evaluation.transfer.classify_tasks`), else processes on the CPU.

    Raises:
        ConfigError: bad task group or mode (checked before anything is read).
        DataError: missing data.
    """
    selection = select_tasks(tasks)
    check_mode(mode)
    senteval = senteval_dir(data_root)
    report = EvaluationReport(results={})
    if "sts" in selection.groups:
        started = time.perf_counter()
        sts = run_sts(
            embed,
            senteval,
            sts_tasks if sts_tasks is not None else selection.sts,
            exact_batches=exact_batches,
            batch_size=batch_size,
            token_lengths=token_lengths,
        )
        report.results["sts"] = sts.scores
        report.details["sts"] = {**sts.details, "sentences_embedded": sts.sentences_embedded}
        report.seconds["sts"] = time.perf_counter() - started
    if "transfer" in selection.groups:
        started = time.perf_counter()
        transfer = evaluate_transfer(embed, senteval, mode=mode, tasks=selection.transfer, device=device)
        report.results["transfer"] = dict(transfer)
        report.seconds["transfer"] = time.perf_counter() - started
    return report


def evaluate(
    embed: EmbedFn, data_root: Path, tasks: str = "all", mode: str = "fasttest"
) -> dict[str, dict[str, float]]:
    """The benchmark's numbers: ``{"sts": {...}, "transfer": {...}}``, only the groups asked.

    ``"sts"`` holds one number per registered STS task (:mod:`harness.evaluation.tasks`: STS12-16
    "all" Spearman, STS-B and SICK-R test Spearman) and ``avg``; ``"transfer"`` holds the transfer
    tasks' accuracies (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC) and ``avg``. All in percent, unrounded;
    each ``avg`` is the mean of the numbers rounded to 2 decimals.

    Args:
        embed: the encoder, ``list[str]`` of length n -> ``[n, d]``, embedding exactly that list.
        data_root: data root laid out like ``shared/data`` (holding ``senteval/``).
        tasks: ``"sts"``, ``"transfer"``, ``"all"`` or comma-separated task names.
        mode: transfer parameter set, ``"test"`` or ``"fasttest"``.

    Raises:
        ConfigError: bad ``tasks`` or ``mode``.
        DataError: missing or malformed data.
    """
    return run_evaluation(embed, data_root, tasks, mode).results
