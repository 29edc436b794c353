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

from harness.errors import ConfigError
from harness.evaluation.sts import BATCH_SIZE, STS_YEARS, EmbedFn, LengthsFn, run_sts
from harness.paths import senteval_dir

if TYPE_CHECKING:
    from harness.encoder import SentenceEncoder

TASK_GROUPS: tuple[str, ...] = ("sts", "transfer", "all")
STS_AGGREGATES: tuple[str, ...] = ("all", "mean", "wmean")
"""SentEval's aggregates over an STS12-16 year's subsets (see :meth:`EvaluationReport.sts_aggregates`)."""
MODES: tuple[str, ...] = ("test", "fasttest")


def check_task_group(tasks: str) -> tuple[str, ...]:
    """``"sts"``, ``"transfer"`` or ``"all"`` -> the groups to run, in output order."""
    if tasks not in TASK_GROUPS:
        raise ConfigError(f"unknown task group {tasks!r}; choose one of {', '.join(TASK_GROUPS)}")
    return ("sts", "transfer") if tasks == "all" else (tasks,)


def check_mode(mode: str) -> str:
    """``"test"`` (10 folds, Adam) or ``"fasttest"`` (5 folds, RMSprop): the transfer parameter set."""
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return mode


def encoder_functions(
    encoder: SentenceEncoder, pooler: str, precision: str = "fp32"
) -> tuple[EmbedFn, LengthsFn]:
    """The ``embed`` and ``token_lengths`` functions of an encoder with a pooler.

    Args:
        encoder: a loaded :class:`~harness.encoder.SentenceEncoder`.
        pooler: one of :data:`harness.encoder.POOLERS`.
        precision: ``fp32`` or ``bf16`` (autocast of the forward pass; output float32 either way).

    Returns:
        ``embed(sentences) -> [n, d]`` float32 and ``token_lengths(sentences) -> list[int]`` (the
        tokenizer's counts, special tokens included, no truncation).
    """

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
            for task in STS_YEARS
            if isinstance(details.get(task), dict) and "all" in details[task]
        }

    def record(self) -> dict[str, Any]:
        """What a run record keeps as ``final``: :attr:`results` plus ``sts_aggregates`` when STS ran."""
        out: dict[str, Any] = dict(self.results)
        aggregates = self.sts_aggregates()
        if aggregates:
            out["sts_aggregates"] = aggregates
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
) -> EvaluationReport:
    """Evaluate an encoder; see :func:`evaluate` for the arguments it shares.

    Args:
        embed: the encoder, ``list[str]`` of length n -> ``[n, d]``, embedding exactly that list.
        data_root: data root laid out like ``shared/data`` (holding ``senteval/``).
        tasks: ``"sts"``, ``"transfer"`` or ``"all"``.
        mode: transfer parameter set, ``"test"`` or ``"fasttest"`` (STS ignores it).
        sts_tasks: a subset of the seven STS tasks (default all).
        exact_batches: STS: reproduce SentEval's encoder calls instead of embedding each distinct
            sentence once.
        batch_size: STS: sentences per encoder call.
        token_lengths: STS: token counts of a list of sentences, to sort batches by length.

    Raises:
        ConfigError: bad task group or mode (checked before anything is read).
        DataError: missing data.
    """
    groups = check_task_group(tasks)
    check_mode(mode)
    senteval = senteval_dir(data_root)
    report = EvaluationReport(results={})
    if "sts" in groups:
        started = time.perf_counter()
        sts = run_sts(
            embed,
            senteval,
            sts_tasks,
            exact_batches=exact_batches,
            batch_size=batch_size,
            token_lengths=token_lengths,
        )
        report.results["sts"] = sts.scores
        report.details["sts"] = {**sts.details, "sentences_embedded": sts.sentences_embedded}
        report.seconds["sts"] = time.perf_counter() - started
    if "transfer" in groups:
        from harness.evaluation.transfer import evaluate_transfer

        started = time.perf_counter()
        report.results["transfer"] = dict(evaluate_transfer(embed, senteval, mode=mode))
        report.seconds["transfer"] = time.perf_counter() - started
    return report


def evaluate(
    embed: EmbedFn, data_root: Path, tasks: str = "all", mode: str = "fasttest"
) -> dict[str, dict[str, float]]:
    """The benchmark's numbers: ``{"sts": {...}, "transfer": {...}}``, only the groups asked.

    ``"sts"`` holds STS12-16 ("all" Spearman), ``STSBenchmark`` and ``SICKRelatedness`` (test
    Spearman) and ``avg``; ``"transfer"`` holds MR, CR, SUBJ, MPQA, SST2, TREC, MRPC accuracies and
    ``avg``. All in percent, unrounded; each ``avg`` is the mean of the numbers rounded to 2 decimals.

    Args:
        embed: the encoder, ``list[str]`` of length n -> ``[n, d]``, embedding exactly that list.
        data_root: data root laid out like ``shared/data`` (holding ``senteval/``).
        tasks: ``"sts"``, ``"transfer"`` or ``"all"``.
        mode: transfer parameter set, ``"test"`` or ``"fasttest"``.

    Raises:
        ConfigError: bad ``tasks`` or ``mode``.
        DataError: missing or malformed data.
    """
    return run_evaluation(embed, data_root, tasks, mode).results
