"""Semantic textual similarity: the registered STS tasks, scored as SentEval (via SimCSE) scores them.

The tasks (STS12-16, STS-B and SICK-R; their files, readers and scoring) are values of
:mod:`harness.evaluation.tasks`; this module embeds their pairs and scores them.

Every detail of the protocol is in ``shared/docs/SENTEVAL_PROTOCOL.md``; in short:

* STS12-16: per subset, keep the pairs whose gold line is non-empty, stable-sort them by
  ``(len(tokens1), len(tokens2), gold)``, score each pair by the float32 cosine of its two embeddings
  and report the "all" aggregate: Spearman over the concatenation of every subset's scores.
* STS-B and SICK-R: file order, no filtering; Spearman of cosine on the test split.
* Average: the mean of the reported numbers, each first rounded to 2 decimals.

Two ways of feeding the encoder give the same numbers to within rounding noise:

* ``exact_batches=True`` reproduces SentEval's calls: per subset (or split), chunks of 128 pairs,
  sentence-1 chunk then sentence-2 chunk. With ``all_splits=True`` it also encodes the train and dev
  splits of STS-B and SICK-R as SentEval does: that is "the SentEval pipeline".
* the default collects the distinct sentences of everything to be scored, embeds each one once in
  length-sorted batches (less padding), and looks the embeddings up. Padding to a different length
  changes the embeddings only by float rounding (about 1e-6), which moves a Spearman correlation by
  far less than the 0.01 the reported numbers show (packaged encoder: the two paths differ by
  5e-5 on STS13 and STS16; the default path is within 0.004 of SentEval's numbers on all seven).

All correlations are reported in percent (x 100), unrounded.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import pearsonr, spearmanr

from harness.errors import ConfigError, DataError
from harness.evaluation.embed import EmbedFn, LengthsFn
from harness.evaluation.readers import StsPairs, read_subset_files
from harness.evaluation.tasks import (
    REPORTED_SPLIT,
    SPLITS,
    STS_REGISTRY,
    StsTask,
    check_names,
    sts_task,
    sts_task_names,
)
from harness.evaluation.tasks import (
    sts_files as sts_files,  # re-exported: the commands' file checks
)

BATCH_SIZE = 128
"""SentEval's ``params.batch_size``: sentences per encoder call."""

STS_TASKS: tuple[str, ...] = sts_task_names()
"""The STS tasks registered when this module was imported, in table order (for tests and
benchmarks; the code asks :func:`~harness.evaluation.tasks.sts_task_names`)."""
STS_YEARS: dict[str, tuple[str, tuple[str, ...]]] = {
    t.name: (Path(t.parts[0].files[0]).parent.name, tuple(p.name for p in t.parts))
    for t in STS_REGISTRY.values()
    if t.has_subsets
}
"""STS12-16 at import: folder under ``STS/`` and subsets, in SentEval's order (a view of the registry)."""


@dataclass
class StsReport:
    """The outcome of :func:`run_sts`.

    Attributes:
        scores: the table's numbers in percent, unrounded: one per task asked, then ``"avg"``.
        details: per task, per subset (STS12-16) or split (STS-B, SICK-R): ``pearson``,
            ``spearman`` (percent) and ``n``; STS12-16 also get ``"all"``, ``"mean"`` and
            ``"wmean"`` aggregates of both correlations.
        sentences_embedded: sentences handed to the encoder in total (with repeats).
        seconds: wall time of the whole evaluation.
    """

    scores: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    sentences_embedded: int = 0
    seconds: float = 0.0


# -- reading (the readers are in harness.evaluation.readers, the files in the task registry) -----


def read_sts_subset(year_dir: Path, name: str) -> StsPairs:
    """Read one STS12-16 subset of ``year_dir`` (``STS.input.<name>.txt`` and ``STS.gs.<name>.txt``),
    filtered and sorted as SentEval does (:func:`~harness.evaluation.readers.read_subset_files`)."""
    return read_subset_files((year_dir / f"STS.input.{name}.txt", year_dir / f"STS.gs.{name}.txt"), name)


def _check_split(split: str) -> str:
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return split


def read_stsb(senteval_path: Path, split: str = "test") -> StsPairs:
    """Read an STS-B split (``STS/STSBenchmark/sts-{split}.csv``) in file order.

    Raises:
        ConfigError: ``split`` is not train, dev or test.
        DataError: missing file, or a line with fewer than 7 fields or a non-numeric gold score.
    """
    return sts_task("STSBenchmark").read(senteval_path, (_check_split(split),))[split]


def read_sickr(senteval_path: Path, split: str = "test") -> StsPairs:
    """Read a SICK-R split (``SICK_train.txt``, ``SICK_trial.txt`` = dev, ``SICK_test_annotated.txt``).

    Raises:
        ConfigError: ``split`` is not train, dev or test.
        DataError: missing file, or a line with fewer than 4 fields or a non-numeric gold score.
    """
    return sts_task("SICKRelatedness").read(senteval_path, (_check_split(split),))[split]


def check_tasks(tasks: Sequence[str] | None) -> tuple[str, ...]:
    """Validate STS task names (``None`` = every registered task); duplicates dropped, table order kept."""
    return check_names("STS", tasks)


def load_sts_task(
    senteval_path: Path, task: str, splits: Sequence[str] = (REPORTED_SPLIT,)
) -> dict[str, StsPairs]:
    """Read one task: its subsets by name, or the asked splits by split name."""
    return sts_task(task).read(senteval_path, splits)


# -- scoring -------------------------------------------------------------------------------------


def cosine_scores(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity exactly as SentEval computes it.

    Per pair: ``nan_to_num(dot(a, b) / (sqrt(dot(a, a)) * sqrt(dot(b, b))))`` on ``nan_to_num``'d
    rows, in the embeddings' own dtype (float32), with NumPy's 1-D ``dot``, so a zero vector scores 0.

    Args:
        u: first embeddings ``[n, d]``.
        v: second embeddings ``[n, d]``.

    Returns:
        Similarities ``[n]`` in the embeddings' dtype.
    """
    u = np.nan_to_num(np.asarray(u))
    v = np.nan_to_num(np.asarray(v))
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"cosine_scores needs two [n, d] arrays of one shape, got {u.shape} and {v.shape}")
    out = np.empty(u.shape[0], dtype=np.result_type(u.dtype, v.dtype))
    dot = np.dot
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for k in range(u.shape[0]):
            a = u[k]
            b = v[k]
            out[k] = dot(a, b) / (np.sqrt(dot(a, a)) * np.sqrt(dot(b, b)))
    return np.nan_to_num(out)


def correlations(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman (scipy; average ranks for ties) in percent, plus ``n``."""
    pred64 = np.asarray(pred, dtype=np.float64)
    return {
        "pearson": 100.0 * float(pearsonr(pred64, gold)[0]),
        "spearman": 100.0 * float(spearmanr(pred, gold)[0]),
        "n": len(gold),
    }


def table_average(scores: Iterable[float]) -> float:
    """The table's average: the mean of the numbers, each first rounded to 2 decimals."""
    values = [round(float(s), 2) for s in scores]
    return float(sum(values) / len(values)) if values else math.nan


# -- embedding -----------------------------------------------------------------------------------


def _checked(out: np.ndarray, n: int) -> np.ndarray:
    out = np.asarray(out)
    if out.ndim != 2 or out.shape[0] != n:
        raise ConfigError(
            f"the encoder returned an array of shape {out.shape} for {n} sentences; expected [{n}, d]"
        )
    return out


class DistinctEmbedder:
    """Embeds each distinct sentence once, in length-sorted batches, and looks embeddings up.

    Sorting by the tokenizer's counts (``token_lengths``) pads least: on the seven STS tasks with
    the packaged tokenizer, batches hold 2 % padding tokens on top of the real ones, against 45 %
    when sorting by characters (SentEval's own batches: 83 %).

    Args:
        embed: the encoder, ``list[str]`` -> ``[n, d]``.
        batch_size: sentences per encoder call.
        token_lengths: token counts of a list of sentences; ``None`` sorts by characters.
    """

    def __init__(
        self, embed: EmbedFn, batch_size: int = BATCH_SIZE, token_lengths: LengthsFn | None = None
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.embed = embed
        self.batch_size = batch_size
        self.token_lengths = token_lengths
        self.sentences_embedded = 0

    def __call__(self, sentences: Iterable[str]) -> tuple[dict[str, int], np.ndarray]:
        """Embed the distinct sentences of ``sentences``.

        Returns:
            ``(index, embeddings)``: ``embeddings[index[s]]`` is the ``[d]`` embedding of ``s``;
            ``embeddings`` is ``[m, d]`` for the m distinct sentences.
        """
        unique = distinct_by_length(sentences, self.token_lengths)
        return {s: i for i, s in enumerate(unique)}, self.embed_in_order(unique)

    def embed_in_order(self, sentences: Sequence[str]) -> np.ndarray:
        """Embed ``sentences`` as given, in consecutive batches: ``[n, d]``."""
        chunks = []
        for start in range(0, len(sentences), self.batch_size):
            batch = list(sentences[start : start + self.batch_size])
            chunks.append(_checked(self.embed(batch), len(batch)))
            self.sentences_embedded += len(batch)
        if not chunks:
            raise DataError("nothing to embed")
        return np.concatenate(chunks)


def distinct_by_length(sentences: Iterable[str], token_lengths: LengthsFn | None = None) -> list[str]:
    """The distinct sentences sorted by (length, text): the order :class:`DistinctEmbedder` embeds.

    Args:
        sentences: any sentences, repeats allowed.
        token_lengths: token counts of a list of sentences; ``None`` = character counts.
    """
    unique = sorted(set(sentences))
    if token_lengths is None:
        lengths: Sequence[int] = [len(s) for s in unique]
    else:
        lengths = token_lengths(unique)
        if len(lengths) != len(unique):
            raise ConfigError(f"token_lengths returned {len(lengths)} counts for {len(unique)} sentences")
    ranked = sorted(range(len(unique)), key=lambda i: (lengths[i], unique[i]))
    return [unique[i] for i in ranked]


def _score_exact(embed: EmbedFn, pairs: StsPairs, batch_size: int) -> tuple[np.ndarray, int]:
    """SentEval's own calls: per chunk of pairs, one call on sentence 1s, one on sentence 2s."""
    scores = []
    for start in range(0, len(pairs), batch_size):
        batch1 = list(pairs.sent1[start : start + batch_size])
        batch2 = list(pairs.sent2[start : start + batch_size])
        enc1 = _checked(embed(batch1), len(batch1))
        enc2 = _checked(embed(batch2), len(batch2))
        scores.append(cosine_scores(enc1, enc2))
    return np.concatenate(scores), 2 * len(pairs)


def _score_lookup(index: dict[str, int], emb: np.ndarray, pairs: StsPairs) -> np.ndarray:
    rows1 = np.fromiter((index[s] for s in pairs.sent1), dtype=np.int64, count=len(pairs))
    rows2 = np.fromiter((index[s] for s in pairs.sent2), dtype=np.int64, count=len(pairs))
    return cosine_scores(emb[rows1], emb[rows2])


def _year_details(per_subset: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    details: dict[str, Any] = {}
    for name, (pred, gold) in per_subset.items():
        details[name] = correlations(pred, gold)
    subsets = list(per_subset)
    weights = np.array([details[s]["n"] for s in subsets], dtype=np.float64)
    all_pred = np.concatenate([per_subset[s][0] for s in subsets])
    all_gold = np.concatenate([per_subset[s][1] for s in subsets])
    overall = correlations(all_pred, all_gold)
    for kind in ("pearson", "spearman"):
        values = np.array([details[s][kind] for s in subsets])
        details.setdefault("all", {})[kind] = overall[kind]
        details.setdefault("mean", {})[kind] = float(np.mean(values))
        details.setdefault("wmean", {})[kind] = float(np.average(values, weights=weights))
    details["all"]["n"] = overall["n"]
    return details


def run_sts(
    embed: EmbedFn,
    senteval_path: Path,
    tasks: Sequence[str] | None = None,
    *,
    exact_batches: bool = False,
    all_splits: bool = False,
    batch_size: int = BATCH_SIZE,
    token_lengths: LengthsFn | None = None,
) -> StsReport:
    """Evaluate an encoder on the STS tasks; see the module docstring for the two batching modes.

    Args:
        embed: the encoder, ``list[str]`` of length n -> ``[n, d]``.
        senteval_path: the SentEval folder (``<data root>/senteval``).
        tasks: registered task names (:mod:`harness.evaluation.tasks`); ``None`` = all of them.
        exact_batches: reproduce SentEval's encoder calls chunk by chunk.
        all_splits: also score the train and dev splits of STS-B and SICK-R (reported in
            ``details``), as SentEval does; the reported number stays the test split's.
        batch_size: sentences per encoder call (SentEval: 128).
        token_lengths: token counts of a list of sentences, to sort batches by (default path only;
            ``None`` sorts by characters, which pads more but gives the same numbers).

    Returns:
        A :class:`StsReport`; its ``scores`` hold the table's numbers.

    Raises:
        ConfigError: unknown task or bad batch size.
        DataError: missing or malformed data files (all files are read before the first encoder call).
    """
    started = time.perf_counter()
    names = check_tasks(tasks)
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    splits = SPLITS if all_splits else (REPORTED_SPLIT,)
    data = {task: load_sts_task(senteval_path, task, splits) for task in names}  # all before embedding
    if exact_batches:
        predictions, embedded = _predict_exact(embed, data, batch_size)
    else:
        predictions, embedded = _predict_distinct(embed, data, batch_size, token_lengths)
    scores: dict[str, float] = {}
    details: dict[str, Any] = {}
    for task in names:
        scores[task], details[task] = _score_task(sts_task(task), predictions[task], splits)
    scores["avg"] = table_average(scores[t] for t in names)
    return StsReport(scores, details, embedded, time.perf_counter() - started)


Predictions = dict[str, tuple[np.ndarray, np.ndarray]]
"""Per part (subset or split): the predicted similarities and the gold scores."""


def _predict_exact(
    embed: EmbedFn, data: dict[str, dict[str, StsPairs]], batch_size: int
) -> tuple[dict[str, Predictions], int]:
    """Cosine similarities with SentEval's own encoder calls; also the sentences embedded."""
    predictions: dict[str, Predictions] = {task: {} for task in data}
    embedded = 0
    for task, parts in data.items():
        for part, pairs in parts.items():
            pred, n = _score_exact(embed, pairs, batch_size)
            embedded += n
            predictions[task][part] = (pred, pairs.gold)
    return predictions, embedded


def _predict_distinct(
    embed: EmbedFn, data: dict[str, dict[str, StsPairs]], batch_size: int, token_lengths: LengthsFn | None
) -> tuple[dict[str, Predictions], int]:
    """Cosine similarities with each distinct sentence embedded once; also the sentences embedded."""
    embedder = DistinctEmbedder(embed, batch_size, token_lengths)
    every = (s for parts in data.values() for pairs in parts.values() for s in (*pairs.sent1, *pairs.sent2))
    index, emb = embedder(every)
    predictions = {
        task: {part: (_score_lookup(index, emb, pairs), pairs.gold) for part, pairs in parts.items()}
        for task, parts in data.items()
    }
    return predictions, embedder.sentences_embedded


def _score_task(
    task: StsTask, predictions: Predictions, splits: Sequence[str]
) -> tuple[float, dict[str, Any]]:
    """The task's number and details, as its ``scoring`` says (:class:`~harness.evaluation.tasks.StsTask`)."""
    if task.has_subsets:
        details = _year_details(predictions)
        return details["all"]["spearman"], details
    details = {part: correlations(*predictions[part]) for part in splits if part in predictions}
    return details[REPORTED_SPLIT]["spearman"], details


def evaluate_sts(
    embed: EmbedFn,
    senteval_path: Path,
    tasks: Sequence[str] | None = None,
    *,
    exact_batches: bool = False,
    batch_size: int = BATCH_SIZE,
    token_lengths: LengthsFn | None = None,
) -> dict[str, float]:
    """The STS table's numbers: ``{"STS12": ..., ..., "SICKRelatedness": ..., "avg": ...}``.

    Percent, unrounded; STS12-16 = "all" Spearman, STS-B and SICK-R = test-split Spearman; ``avg`` =
    mean of the asked tasks' numbers, each first rounded to 2 decimals. Per-subset details come
    from :func:`run_sts`.

    Args:
        embed: the encoder, ``list[str]`` of length n -> ``[n, d]``, embedding exactly that list.
        senteval_path: the SentEval folder (``<data root>/senteval``).
        tasks: registered task names (:mod:`harness.evaluation.tasks`); ``None`` = all of them.
        exact_batches: reproduce SentEval's encoder calls (slower; same numbers to ~1e-4).
        batch_size: sentences per encoder call.
        token_lengths: token counts of a list of sentences, for length-sorted batches.
    """
    return run_sts(
        embed,
        senteval_path,
        tasks,
        exact_batches=exact_batches,
        batch_size=batch_size,
        token_lengths=token_lengths,
    ).scores
