"""The readers of the evaluation tasks' files, exactly as SentEval reads them.

A reader takes the task's files (absolute paths, in the order its registry entry lists them, see
:mod:`harness.evaluation.tasks`) and a name, and returns the task's text; it knows nothing about
where the files lie. Every malformed or missing file is a :class:`~harness.errors.DataError`
naming the file and the line.

* STS: :func:`read_subset_files` (an STS12-16 subset: ``STS.input.*`` + ``STS.gs.*``, filtered and
  stable-sorted) and :class:`TsvPairs` (one tab-separated file per split, in file order: STS-B,
  SICK-R) return :class:`StsPairs`.
* Transfer: :func:`read_binary` (MR, CR, SUBJ, MPQA), :func:`read_sst2`, :func:`read_trec` and
  :func:`read_mrpc` return a :class:`TaskText` in file order; :func:`sort_split` applies SentEval's
  sort before embedding.

The protocol behind every detail is ``shared/docs/SENTEVAL_PROTOCOL.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.config.inputs import DATA_MAX_BYTES, read_input_bytes
from harness.errors import DataError

# --------------------------------------------------------------------------------------------------
# STS
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StsPairs:
    """Scored sentence pairs of one STS subset or split, in the order SentEval embeds them.

    Attributes:
        name: subset (``"MSRpar"``) or split (``"test"``) name.
        sent1: first sentences, whitespace-normalised (``' '.join(s.split())``), length n.
        sent2: second sentences, same form, length n.
        gold: gold similarity scores, float64 array ``[n]``, every one finite.
        gold_lines: where each gold score stands: ``(file, line number)`` (empty when built by
            hand), so a score outside the task's range is reported as ``file:line``.
    """

    name: str
    sent1: tuple[str, ...]
    sent2: tuple[str, ...]
    gold: np.ndarray
    gold_lines: tuple[tuple[Path, int], ...] = ()

    def __len__(self) -> int:
        return len(self.gold)


def _normalise(sentence: str) -> str:
    return " ".join(sentence.split())


def _read_text(path: Path) -> str:
    data = read_input_bytes(path, "STS data file", DATA_MAX_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({exc.reason})") from exc
    # The same universal-newline translation as a text-mode read (io.open, as SentEval reads).
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _parse_gold(value: str, path: Path, line: int) -> float:
    """A gold score: a finite number (``nan`` or ``inf`` would make every correlation NaN)."""
    try:
        score = float(value)
    except ValueError:
        raise DataError(f"{path}:{line}: gold score {value.strip()!r} is not a number") from None
    if not math.isfinite(score):
        raise DataError(f"{path}:{line}: gold score {value.strip()!r} is not a finite number")
    return score


def check_gold_range(pairs: StsPairs, low: float, high: float, task: str) -> None:
    """Every gold score of ``pairs`` must lie in ``low..high`` (the task's scale).

    Raises:
        DataError: ``file:line`` of the first score outside, and how many there are.
    """
    outside = [i for i, g in enumerate(pairs.gold) if not low <= g <= high]
    if not outside:
        return
    first = outside[0]
    where = pairs.gold_lines[first] if first < len(pairs.gold_lines) else None
    place = f"{where[0]}:{where[1]}" if where else f"{task} {pairs.name} pair {first + 1}"
    more = f" ({len(outside) - 1} more outside)" if len(outside) > 1 else ""
    raise DataError(
        f"{place}: gold score {pairs.gold[first]:g} is outside {task}'s range {low:g}..{high:g}{more}"
    )


_Kept = tuple[list[str], list[str], float, int]


def _sts_sort_key(item: _Kept) -> tuple[int, int, float]:
    return len(item[0]), len(item[1]), item[2]


def read_subset_files(paths: Sequence[Path], name: str) -> StsPairs:
    """Read one STS12-16 subset, filtered and sorted as SentEval does.

    Args:
        paths: ``(input file, gold file)``, e.g. ``STS.input.MSRpar.txt`` and ``STS.gs.MSRpar.txt``:
            the input holds two tab-separated sentences per line, the gold file one score per line.
        name: the subset, e.g. ``"MSRpar"``.

    Returns:
        The kept pairs (gold line non-empty), stable-sorted by (tokens in sentence 1, tokens in
        sentence 2, gold).

    Raises:
        DataError: a file is missing or not UTF-8, an input line has not exactly two tab-separated
            fields, a gold line is not a finite number, the two files differ in length, or nothing is
            kept.
    """
    input_path, gold_path = paths
    input_lines = _read_text(input_path).splitlines()
    gold_lines = _read_text(gold_path).splitlines()
    if len(input_lines) != len(gold_lines):
        short = gold_path if len(gold_lines) < len(input_lines) else input_path
        ends = min(len(input_lines), len(gold_lines))  # the last line they share
        raise DataError(
            f"{short}:{ends}: {input_path} has {len(input_lines)} lines but {gold_path} has "
            f"{len(gold_lines)}; they must pair up line by line"
        )
    kept: list[_Kept] = []
    for number, (pair_line, gold_line) in enumerate(zip(input_lines, gold_lines), start=1):
        fields = pair_line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{input_path}:{number}: expected 2 tab-separated sentences, found {len(fields)} fields"
            )
        if gold_line == "":
            continue
        gold = _parse_gold(gold_line, gold_path, number)
        kept.append((fields[0].split(), fields[1].split(), gold, number))
    if not kept:
        raise DataError(f"{gold_path}: no scored pairs")
    kept.sort(key=_sts_sort_key)
    return StsPairs(
        name=name,
        sent1=tuple(" ".join(t1) for t1, _, _, _ in kept),
        sent2=tuple(" ".join(t2) for _, t2, _, _ in kept),
        gold=np.array([g for _, _, g, _ in kept], dtype=np.float64),
        gold_lines=tuple((gold_path, n) for _, _, _, n in kept),
    )


@dataclass(frozen=True)
class TsvPairs:
    """A reader of one tab-separated file of scored pairs, in file order, nothing filtered.

    Each line is stripped and split on tabs (STS-B: gold = field 4, sentences = fields 5 and 6;
    SICK-R: a header line, sentences = fields 1 and 2, gold = field 3; a file whose first line is
    a pair instead is refused).

    Attributes:
        gold_field: the field holding the gold score.
        sent_fields: the fields holding sentence 1 and sentence 2.
        skip_header: whether the first line is a header.
    """

    gold_field: int
    sent_fields: tuple[int, int]
    skip_header: bool = False

    def __call__(self, paths: Sequence[Path], name: str) -> StsPairs:
        """Read ``paths[0]`` (the one file of a split) as the pairs called ``name``.

        Raises:
            DataError: missing file, a header expected and a pair found, or a line with too few
                fields or a gold score that is not a finite number.
        """
        (path,) = paths
        text = _read_text(path)
        # Iterating a text-mode file splits on "\n" only (unlike str.splitlines): do the same.
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        need = max(self.gold_field, *self.sent_fields) + 1
        sent1: list[str] = []
        sent2: list[str] = []
        gold: list[float] = []
        numbers: list[int] = []
        for number, line in enumerate(lines, start=1):
            fields = line.strip().split("\t")
            if self.skip_header and number == 1:
                self._check_header(fields, path)
                continue
            if len(fields) < need:
                raise DataError(
                    f"{path}:{number}: expected at least {need} tab-separated fields, found {len(fields)}"
                )
            sent1.append(_normalise(fields[self.sent_fields[0]]))
            sent2.append(_normalise(fields[self.sent_fields[1]]))
            gold.append(_parse_gold(fields[self.gold_field], path, number))
            numbers.append(number)
        if not gold:
            raise DataError(f"{path}: no sentence pairs")
        return StsPairs(
            name=name,
            sent1=tuple(sent1),
            sent2=tuple(sent2),
            gold=np.array(gold, dtype=np.float64),
            gold_lines=tuple((path, n) for n in numbers),
        )

    def _check_header(self, fields: list[str], path: Path) -> None:
        """The first line must be the header: a pair there (its gold field a number) means the header
        was lost, and skipping the line would drop that pair without a word."""
        if len(fields) > self.gold_field:
            try:
                float(fields[self.gold_field])
            except ValueError:
                return
            raise DataError(
                f"{path}:1: expected the header line (column names), found a scored pair: the file lost "
                "its header; put it back (the original file's first line) so no pair is skipped"
            )


# --------------------------------------------------------------------------------------------------
# Transfer
# --------------------------------------------------------------------------------------------------
Tokens = list[str]

TREC_LABELS: dict[str, int] = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}


@dataclass(frozen=True)
class TextSplit:
    """One split in SentEval's order: one token column (two for MRPC) and the labels.

    Attributes:
        columns: ``columns[c][i]`` is the token list of row i in column c.
        labels: Integer labels, one per row.
    """

    columns: tuple[list[Tokens], ...]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class TaskText:
    """A task's text: its splits (``all`` for the binary tasks; ``train``/``dev``/``test`` else)."""

    name: str
    nclasses: int
    splits: dict[str, TextSplit]


def _open_lines(path: Path, encoding: str) -> str:
    data = read_input_bytes(path, "SentEval file", DATA_MAX_BYTES)
    try:  # as a text-mode read gives it: universal newlines
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """Numbered lines as ``for line in f`` yields them (newline-terminated; no empty last line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return enumerate(lines, start=1)


def _require_rows(count: int, task: str, path: Path, what: str) -> None:
    """An empty file or split would be scored (one class only: 100 %), so it is a DataError."""
    if count == 0:
        raise DataError(f"{task}: {what} is empty (no sentences): {path}")


def read_binary(paths: Sequence[Path], name: str) -> TaskText:
    """MR, CR, SUBJ or MPQA from ``(label-1 file, label-0 file)``: Latin-1, ``splitlines`` (empty
    lines kept), label-1 rows first; one split, ``all``."""
    pos_path, neg_path = paths
    pos = [line.split() for line in _open_lines(pos_path, "latin-1").splitlines()]
    neg = [line.split() for line in _open_lines(neg_path, "latin-1").splitlines()]
    _require_rows(sum(1 for t in pos if t), name, pos_path, "the label-1 file")
    _require_rows(sum(1 for t in neg if t), name, neg_path, "the label-0 file")
    labels = np.array([1] * len(pos) + [0] * len(neg), dtype=np.int64)
    return TaskText(name, 2, {"all": TextSplit((pos + neg,), labels)})


def read_sst2(paths: Sequence[Path], name: str) -> TaskText:
    """SST2 from ``(train, dev, test)`` files: UTF-8, ``text<TAB>label`` per line."""
    splits = {}
    for split, path in zip(("train", "dev", "test"), paths, strict=True):
        rows, labels = [], []
        for lineno, line in _iter_lines(_open_lines(path, "utf-8")):
            fields = line.strip().split("\t")
            if len(fields) < 2 or fields[1].strip() not in ("0", "1"):
                raise DataError(f"{path}:{lineno}: expected 'sentence<TAB>0|1', got {line.strip()!r}")
            rows.append(fields[0].split())
            labels.append(int(fields[1]))
        _require_rows(len(rows), name, path, f"the {split} split")
        splits[split] = TextSplit((rows,), np.array(labels, dtype=np.int64))
    return TaskText(name, 2, splits)


def read_trec(paths: Sequence[Path], name: str) -> TaskText:
    """TREC from ``(train, test)`` files: Latin-1, ``COARSE:fine question``; the fine label (first
    word) is dropped."""
    splits = {}
    for split, path in zip(("train", "test"), paths, strict=True):
        rows, labels = [], []
        for lineno, line in _iter_lines(_open_lines(path, "latin-1")):
            target, sep, sample = line.strip().partition(":")
            words = sample.split(" ", 1)
            if not sep or target not in TREC_LABELS or len(words) < 2:
                raise DataError(
                    f"{path}:{lineno}: expected 'COARSE:fine question' with COARSE one of "
                    f"{', '.join(TREC_LABELS)}, got {line.strip()!r}"
                )
            rows.append(words[1].split())
            labels.append(TREC_LABELS[target])
        _require_rows(len(rows), name, path, f"the {split} split")
        splits[split] = TextSplit((rows,), np.array(labels, dtype=np.int64))
    return TaskText(name, 6, splits)


def read_mrpc(paths: Sequence[Path], name: str) -> TaskText:
    """MRPC from ``(train, test)`` files: UTF-8, tab-separated, header dropped; label = field 0,
    sentences = fields 3 and 4."""
    splits = {}
    for split, path in zip(("train", "test"), paths, strict=True):
        a_rows, b_rows, labels = [], [], []
        for lineno, line in _iter_lines(_open_lines(path, "utf-8")):
            if lineno == 1:
                continue  # the header
            fields = line.strip().split("\t")
            if len(fields) < 5 or fields[0] not in ("0", "1"):
                raise DataError(
                    f"{path}:{lineno}: expected 'label<TAB>id<TAB>id<TAB>sentence<TAB>sentence' with "
                    f"label 0 or 1, got {line.strip()!r}"
                )
            a_rows.append(fields[3].split())
            b_rows.append(fields[4].split())
            labels.append(int(fields[0]))
        _require_rows(len(labels), name, path, f"the {split} split")
        splits[split] = TextSplit((a_rows, b_rows), np.array(labels, dtype=np.int64))
    return TaskText(name, 2, splits)


def sort_split(split: TextSplit) -> TextSplit:
    """SentEval's stable sort by ``(len(tokens) per column..., label)``."""
    keys = [(*(len(col[i]) for col in split.columns), int(split.labels[i])) for i in range(len(split))]
    order = sorted(range(len(split)), key=keys.__getitem__)
    columns = tuple([col[i] for i in order] for col in split.columns)
    return TextSplit(columns, split.labels[np.array(order, dtype=np.int64)])
