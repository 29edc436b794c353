"""Semantic textual similarity: STS12-16, STS-B and SICK-R, scored as SentEval (via SimCSE) scores them.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import pearsonr, spearmanr

from harness.errors import ConfigError, DataError

EmbedFn = Callable[[list[str]], np.ndarray]
"""Embeds exactly the sentences given: ``list[str]`` of length n -> array ``[n, d]``."""

BATCH_SIZE = 128
"""SentEval's ``params.batch_size``: sentences per encoder call."""

STS_YEARS: dict[str, tuple[str, tuple[str, ...]]] = {
    "STS12": ("STS12-en-test", ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews")),
    "STS13": ("STS13-en-test", ("FNWN", "headlines", "OnWN")),
    "STS14": ("STS14-en-test", ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news")),
    "STS15": (
        "STS15-en-test",
        ("answers-forums", "answers-students", "belief", "headlines", "images"),
    ),
    "STS16": (
        "STS16-en-test",
        ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
    ),
}
"""STS12-16: folder under ``STS/`` and subsets, in SentEval's order (STS13 has no SMT)."""

SPLIT_TASKS: tuple[str, ...] = ("STSBenchmark", "SICKRelatedness")
STS_TASKS: tuple[str, ...] = (*STS_YEARS, *SPLIT_TASKS)
"""The seven tasks of the STS table, in table order."""

SPLITS: tuple[str, ...] = ("train", "dev", "test")
REPORTED_SPLIT = "test"

_STSB_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
_SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


@dataclass(frozen=True)
class StsPairs:
    """Scored sentence pairs of one STS subset or split, in the order SentEval embeds them.

    Attributes:
        name: subset (``"MSRpar"``) or split (``"test"``) name.
        sent1: first sentences, whitespace-normalised (``' '.join(s.split())``), length n.
        sent2: second sentences, same form, length n.
        gold: gold similarity scores, float64 array ``[n]``.
    """

    name: str
    sent1: tuple[str, ...]
    sent2: tuple[str, ...]
    gold: np.ndarray

    def __len__(self) -> int:
        return len(self.gold)


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


# -- reading -------------------------------------------------------------------------------------


def _normalise(sentence: str) -> str:
    return " ".join(sentence.split())


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"STS data file not found: {path}")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({exc.reason})") from exc
    # The same universal-newline translation as a text-mode read (io.open, as SentEval reads).
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _parse_gold(value: str, path: Path, line: int) -> float:
    try:
        return float(value)
    except ValueError:
        raise DataError(f"{path}:{line}: gold score {value.strip()!r} is not a number") from None


def _sts_sort_key(item: tuple[list[str], list[str], float]) -> tuple[int, int, float]:
    return len(item[0]), len(item[1]), item[2]


def read_sts_subset(year_dir: Path, name: str) -> StsPairs:
    """Read one STS12-16 subset, filtered and sorted as SentEval does.

    Args:
        year_dir: the year's folder, e.g. ``senteval/STS/STS12-en-test``.
        name: the subset, e.g. ``"MSRpar"`` (reads ``STS.input.MSRpar.txt`` and ``STS.gs.MSRpar.txt``).

    Returns:
        The kept pairs (gold line non-empty), stable-sorted by (tokens in sentence 1, tokens in
        sentence 2, gold).

    Raises:
        DataError: a file is missing or not UTF-8, an input line has not exactly two tab-separated
            fields, a gold line is not a number, the two files differ in length, or nothing is kept.
    """
    input_path = year_dir / f"STS.input.{name}.txt"
    gold_path = year_dir / f"STS.gs.{name}.txt"
    input_lines = _read_text(input_path).splitlines()
    gold_lines = _read_text(gold_path).splitlines()
    if len(input_lines) != len(gold_lines):
        raise DataError(
            f"{input_path} has {len(input_lines)} lines but {gold_path} has {len(gold_lines)}; "
            "they must pair up line by line"
        )
    kept: list[tuple[list[str], list[str], float]] = []
    for number, (pair_line, gold_line) in enumerate(zip(input_lines, gold_lines), start=1):
        fields = pair_line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{input_path}:{number}: expected 2 tab-separated sentences, found {len(fields)} fields"
            )
        if gold_line == "":
            continue
        kept.append((fields[0].split(), fields[1].split(), _parse_gold(gold_line, gold_path, number)))
    if not kept:
        raise DataError(f"{gold_path}: no scored pairs")
    kept.sort(key=_sts_sort_key)
    return StsPairs(
        name=name,
        sent1=tuple(" ".join(t1) for t1, _, _ in kept),
        sent2=tuple(" ".join(t2) for _, t2, _ in kept),
        gold=np.array([g for _, _, g in kept], dtype=np.float64),
    )


def _read_tsv_pairs(
    path: Path, *, skip_header: bool, gold_field: int, sent_fields: tuple[int, int], name: str
) -> StsPairs:
    text = _read_text(path)
    # Iterating a text-mode file splits on "\n" only (unlike str.splitlines): do the same.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    need = max(gold_field, *sent_fields) + 1
    sent1: list[str] = []
    sent2: list[str] = []
    gold: list[float] = []
    for number, line in enumerate(lines, start=1):
        if skip_header and number == 1:
            continue
        fields = line.strip().split("\t")
        if len(fields) < need:
            raise DataError(
                f"{path}:{number}: expected at least {need} tab-separated fields, found {len(fields)}"
            )
        sent1.append(_normalise(fields[sent_fields[0]]))
        sent2.append(_normalise(fields[sent_fields[1]]))
        gold.append(_parse_gold(fields[gold_field], path, number))
    if not gold:
        raise DataError(f"{path}: no sentence pairs")
    return StsPairs(name=name, sent1=tuple(sent1), sent2=tuple(sent2), gold=np.array(gold, dtype=np.float64))


def _check_split(split: str) -> str:
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return split


def read_stsb(senteval_path: Path, split: str = "test") -> StsPairs:
    """Read an STS-B split (``STS/STSBenchmark/sts-{split}.csv``) in file order.

    Each line is stripped and split on tabs: gold = field 4, sentences = fields 5 and 6.

    Raises:
        ConfigError: ``split`` is not train, dev or test.
        DataError: missing file, or a line with fewer than 7 fields or a non-numeric gold score.
    """
    path = senteval_path / "STS" / "STSBenchmark" / _STSB_FILES[_check_split(split)]
    return _read_tsv_pairs(path, skip_header=False, gold_field=4, sent_fields=(5, 6), name=split)


def read_sickr(senteval_path: Path, split: str = "test") -> StsPairs:
    """Read a SICK-R split (``SICK_train.txt``, ``SICK_trial.txt`` = dev, ``SICK_test_annotated.txt``).

    The header line is skipped; sentences = fields 1 and 2, gold = field 3 (relatedness).

    Raises:
        ConfigError: ``split`` is not train, dev or test.
        DataError: missing file, or a line with fewer than 4 fields or a non-numeric gold score.
    """
    path = senteval_path / "SICK" / _SICK_FILES[_check_split(split)]
    return _read_tsv_pairs(path, skip_header=True, gold_field=3, sent_fields=(1, 2), name=split)


def check_tasks(tasks: Sequence[str] | None) -> tuple[str, ...]:
    """Validate task names (``None`` = all seven); duplicates dropped, table order kept."""
    if tasks is None:
        return STS_TASKS
    if isinstance(tasks, str):
        tasks = [tasks]
    unknown = [t for t in tasks if t not in STS_TASKS]
    if unknown:
        raise ConfigError(
            f"unknown STS task(s) {', '.join(map(repr, unknown))}; choose from {', '.join(STS_TASKS)}"
        )
    if not tasks:
        raise ConfigError("no STS task asked")
    return tuple(t for t in STS_TASKS if t in tasks)


def sts_files(
    senteval_path: Path, tasks: Sequence[str] | None = None, *, all_splits: bool = False
) -> list[Path]:
    """The data files the given tasks read (for checking them before an encoder is loaded)."""
    splits = SPLITS if all_splits else (REPORTED_SPLIT,)
    files: list[Path] = []
    for task in check_tasks(tasks):
        if task in STS_YEARS:
            folder, subsets = STS_YEARS[task]
            year_dir = senteval_path / "STS" / folder
            for name in subsets:
                files += [year_dir / f"STS.input.{name}.txt", year_dir / f"STS.gs.{name}.txt"]
        elif task == "STSBenchmark":
            files += [senteval_path / "STS" / "STSBenchmark" / _STSB_FILES[s] for s in splits]
        else:
            files += [senteval_path / "SICK" / _SICK_FILES[s] for s in splits]
    return files


def load_sts_task(
    senteval_path: Path, task: str, splits: Sequence[str] = (REPORTED_SPLIT,)
) -> dict[str, StsPairs]:
    """Read one task: STS12-16 subsets by name, or the asked STS-B / SICK-R splits by split name."""
    (task,) = check_tasks([task])
    if task in STS_YEARS:
        folder, subsets = STS_YEARS[task]
        year_dir = senteval_path / "STS" / folder
        return {name: read_sts_subset(year_dir, name) for name in subsets}
    reader = read_stsb if task == "STSBenchmark" else read_sickr
    return {split: reader(senteval_path, split) for split in splits}


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


LengthsFn = Callable[[list[str]], Sequence[int]]
"""Token counts of sentences, one call for a list (e.g. from the encoder's tokenizer)."""


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
        tasks: task names from :data:`STS_TASKS`; ``None`` = all seven.
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
    data = {task: load_sts_task(senteval_path, task, splits) for task in names}

    predictions: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {t: {} for t in names}
    embedded = 0
    if exact_batches:
        for task in names:
            for part, pairs in data[task].items():
                pred, n = _score_exact(embed, pairs, batch_size)
                embedded += n
                predictions[task][part] = (pred, pairs.gold)
    else:
        embedder = DistinctEmbedder(embed, batch_size, token_lengths)
        every = (s for task in names for pairs in data[task].values() for s in (*pairs.sent1, *pairs.sent2))
        index, emb = embedder(every)
        embedded = embedder.sentences_embedded
        for task in names:
            for part, pairs in data[task].items():
                predictions[task][part] = (_score_lookup(index, emb, pairs), pairs.gold)

    scores: dict[str, float] = {}
    details: dict[str, Any] = {}
    for task in names:
        if task in STS_YEARS:
            details[task] = _year_details(predictions[task])
            scores[task] = details[task]["all"]["spearman"]
        else:
            details[task] = {part: correlations(*predictions[task][part]) for part in splits}
            scores[task] = details[task][REPORTED_SPLIT]["spearman"]
    scores["avg"] = table_average(scores[t] for t in names)
    return StsReport(scores, details, embedded, time.perf_counter() - started)


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
        tasks: task names from :data:`STS_TASKS`; ``None`` = all seven.
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
