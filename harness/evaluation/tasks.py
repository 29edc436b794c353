"""The evaluation tasks as data: every STS and transfer task is one value in a registry.

Everything else that names tasks is derived from :data:`STS_REGISTRY` and
:data:`TRANSFER_REGISTRY`, at the time it is asked (so a task registered later is seen):

* what the evaluators run and in which order (:mod:`harness.evaluation.sts`, ``transfer``), and
  what the final STS pass and its average cover (every registered STS task);
* the files ``harness check`` and ``harness eval`` look for before an encoder loads
  (:func:`sts_files`, :func:`transfer_files`);
* the score keys a table spec may name and their column labels (:data:`SCORE_KEYS`,
  :data:`COLUMN_LABELS`, used by :mod:`harness.specs`), and which columns have SentEval's
  all/mean/wmean aggregates (:func:`year_task_names`);
* the sentences of the final STS pass in the cost model (:func:`sts_sentences`);
* which records a table may show: a record states the tasks its averages cover
  (``final.sts_tasks``, ``final.transfer_tasks``; see :mod:`harness.store.record`), and only records
  covering the registered tasks count;
* what ``harness results --format mteb`` writes a task as (:func:`mteb_tasks`);
* what ``harness check`` and the start of a grid read (:mod:`harness.evaluation.preread`).

Adding a task is its entry here plus its test (``CONTRIBUTING.md``, "Adding an evaluation task").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from harness.errors import ConfigError, did_you_mean
from harness.evaluation.readers import (
    StsPairs,
    TaskText,
    TsvPairs,
    check_gold_range,
    read_binary,
    read_mrpc,
    read_sst2,
    read_subset_files,
    read_trec,
)

SPLITS: tuple[str, ...] = ("train", "dev", "test")
REPORTED_SPLIT = "test"

PairReader = Callable[[Sequence[Path], str], StsPairs]
"""``reader(files, part name) -> StsPairs``: the files are absolute, in the order the part lists them."""
TextReader = Callable[[Sequence[Path], str], TaskText]
"""``reader(files, task name) -> TaskText``: the files are absolute, in the order the task lists them."""

Scoring = Literal["all_subsets", "test_split"]


@dataclass(frozen=True)
class StsPart:
    """One subset (STS12-16) or split (STS-B, SICK-R) of an STS task.

    Attributes:
        name: the subset (``"MSRpar"``) or split (``"train"``, ``"dev"``, ``"test"``).
        files: the files its reader opens, relative to the SentEval root (``<data root>/senteval``).
    """

    name: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class StsTask:
    """One STS task: where its pairs are, how they are read and how they become the table's number.

    Every pair is scored by the float32 cosine of its two embeddings; then, by ``scoring``:

    * ``"all_subsets"`` (STS12-16): every part is a subset, and the number is SentEval's "all": one
      Spearman over every subset's pairs together (the details also keep "mean" and "wmean", which
      a table can show with ``sts_aggregate``);
    * ``"test_split"`` (STS-B, SICK-R): the parts are splits, and the number is the Spearman on the
      ``test`` split (``harness eval`` / ``run_sts(all_splits=True)`` also score train and dev).

    Attributes:
        name: the key in records (``final.sts``) and the column a table spec names.
        label: the column label tables print (``"STS-B"``).
        scoring: see above.
        parts: subsets or splits, in SentEval's order.
        reader: reads one part's files.
        sentences: distinct sentences the task's scored parts add to the final STS pass, beyond
            those of the tasks before it in the registry (the pass embeds each distinct sentence
            once; the cost model sums these). ``tests/evaluation/test_tasks.py`` counts them in
            the real files.
        gold_range: the scale of the gold scores (``(0, 5)`` for STS12-16 and STS-B, ``(1, 5)``
            for SICK-R): :meth:`read` refuses a score outside it, naming its file and line.
        mteb: ``(MTEB task name, the dataset revision MTEB pins)`` where MTEB has the task (what
            ``harness results --format mteb`` writes it as); None: not written there.
    """

    name: str
    label: str
    scoring: Scoring
    parts: tuple[StsPart, ...]
    reader: PairReader
    sentences: int
    gold_range: tuple[float, float] = (0.0, 5.0)
    mteb: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.scoring not in ("all_subsets", "test_split"):
            raise ValueError(f"{self.name}: unknown scoring {self.scoring!r}")
        names = [p.name for p in self.parts]
        if self.scoring == "test_split" and (REPORTED_SPLIT not in names or not set(names) <= set(SPLITS)):
            raise ValueError(
                f"{self.name}: a test_split task's parts are splits with a test split, got {names}"
            )

    @property
    def has_subsets(self) -> bool:
        """Scored as SentEval's "all" over subsets (a table can show its mean/wmean aggregates)."""
        return self.scoring == "all_subsets"

    def parts_for(self, splits: Sequence[str] = (REPORTED_SPLIT,)) -> tuple[StsPart, ...]:
        """The parts read for ``splits``: every subset, or the splits asked that the task has."""
        if self.has_subsets:
            return self.parts
        return tuple(p for p in self.parts if p.name in splits)

    def files(self, senteval: Path, splits: Sequence[str] = (REPORTED_SPLIT,)) -> list[Path]:
        """The absolute paths of the files read for ``splits``."""
        return [senteval / f for part in self.parts_for(splits) for f in part.files]

    def read(self, senteval: Path, splits: Sequence[str] = (REPORTED_SPLIT,)) -> dict[str, StsPairs]:
        """The pairs of every part read for ``splits``, by part name, in the task's order.

        Raises:
            DataError: the reader's (``file:line``), or a gold score outside :attr:`gold_range`.
        """
        return {p.name: self.read_part(senteval, p) for p in self.parts_for(splits)}

    def read_part(self, senteval: Path, part: StsPart) -> StsPairs:
        """One part's pairs, their gold scores checked against :attr:`gold_range`."""
        pairs = self.reader([senteval / f for f in part.files], part.name)
        check_gold_range(pairs, *self.gold_range, task=self.name)
        return pairs


@dataclass(frozen=True)
class TransferTask:
    """One SentEval transfer task.

    Scoring: test accuracy of SentEval's logistic regression
    (:mod:`harness.evaluation.transfer_protocol`), its model selection chosen by the splits the
    reader returns: one split ``all`` -> nested k-fold; ``train``/``dev``/``test`` -> the L2 value
    chosen on dev; ``train``/``test`` -> k-fold on train, then test.

    Attributes:
        name: the key in records (``final.transfer``) and the column a table spec names.
        label: the column label tables print (``"SST"``).
        files: the files the reader opens, relative to the SentEval root, in its order.
        reader: reads them into a :class:`~harness.evaluation.readers.TaskText`.
    """

    name: str
    label: str
    files: tuple[str, ...]
    reader: TextReader

    def paths(self, senteval: Path) -> list[Path]:
        return [senteval / f for f in self.files]

    def read(self, senteval: Path) -> TaskText:
        """The task's text, in file order (:func:`harness.evaluation.transfer.read_task` sorts it)."""
        return self.reader(self.paths(senteval), self.name)


def _sts_year(name: str, folder: str, subsets: tuple[str, ...], sentences: int, mteb: str) -> StsTask:
    """A SemEval STS year: its subsets' files, scored SentEval's "all" way; ``mteb`` MTEB's revision."""
    where = f"STS/{folder}"
    parts = tuple(StsPart(s, (f"{where}/STS.input.{s}.txt", f"{where}/STS.gs.{s}.txt")) for s in subsets)
    return StsTask(name, name, "all_subsets", parts, read_subset_files, sentences, mteb=(name, mteb))


def _split_parts(folder: str, files: Mapping[str, str]) -> tuple[StsPart, ...]:
    return tuple(StsPart(split, (f"{folder}/{file}",)) for split, file in files.items())


def _binary(name: str, folder: str, positive: str, negative: str) -> TransferTask:
    return TransferTask(name, name, (f"{folder}/{positive}", f"{folder}/{negative}"), read_binary)


# The registries: in table order. A new task is one entry (CONTRIBUTING.md).
STS_REGISTRY: dict[str, StsTask] = {
    task.name: task
    for task in (
        _sts_year(
            "STS12",
            "STS12-en-test",
            ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
            4946,
            "a0d554a64d88156834ff5ae9920b964011b16384",
        ),
        _sts_year(
            "STS13",
            "STS13-en-test",
            ("FNWN", "headlines", "OnWN"),
            2534,
            "7e90230a92c190f1bf69ae9002b8cea547a64cca",
        ),
        _sts_year(
            "STS14",
            "STS14-en-test",
            ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
            5999,
            "6031580fec1f6af667f0bd2da0a551cf4f0b2375",
        ),
        _sts_year(
            "STS15",
            "STS15-en-test",
            ("answers-forums", "answers-students", "belief", "headlines", "images"),
            5085,
            "ae752c7c21bf194d8b67fd573edf7ae58183cbe3",
        ),
        _sts_year(
            "STS16",
            "STS16-en-test",
            ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
            1840,
            "4d8694f8f0e0100860b497b999b3dbed754a0513",
        ),
        StsTask(
            name="STSBenchmark",
            label="STS-B",
            scoring="test_split",
            parts=_split_parts(
                "STS/STSBenchmark", {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
            ),
            reader=TsvPairs(gold_field=4, sent_fields=(5, 6)),
            sentences=672,
            mteb=("STSBenchmark", "b0fddb56ed78048fa8b90373c8a3cfc37b684831"),
        ),
        StsTask(
            name="SICKRelatedness",
            label="SICK-R",
            scoring="test_split",
            parts=_split_parts(
                "SICK",
                {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"},
            ),
            reader=TsvPairs(gold_field=3, sent_fields=(1, 2), skip_header=True),
            sentences=5007,
            gold_range=(1.0, 5.0),
            mteb=("SICK-R", "20a6d6f312dd54037fe07a32d58e5e168867909d"),
        ),
    )
}
"""Every STS task, in table order: the final STS pass runs them all and ``avg`` covers them all."""

TRANSFER_REGISTRY: dict[str, TransferTask] = {
    task.name: task
    for task in (
        _binary("MR", "MR", "rt-polarity.pos", "rt-polarity.neg"),
        _binary("CR", "CR", "custrev.pos", "custrev.neg"),
        _binary("SUBJ", "SUBJ", "subj.objective", "subj.subjective"),
        _binary("MPQA", "MPQA", "mpqa.pos", "mpqa.neg"),
        TransferTask("SST2", "SST", tuple(f"SST/binary/sentiment-{s}" for s in SPLITS), read_sst2),
        TransferTask("TREC", "TREC", ("TREC/train_5500.label", "TREC/TREC_10.label"), read_trec),
        TransferTask(
            "MRPC", "MRPC", ("MRPC/msr_paraphrase_train.txt", "MRPC/msr_paraphrase_test.txt"), read_mrpc
        ),
    )
}
"""Every transfer task, in SimCSE's table order: ``avg`` covers them all."""

LEGACY_STS_TASKS: tuple[str, ...] = (
    "STS12",
    "STS13",
    "STS14",
    "STS15",
    "STS16",
    "STSBenchmark",
    "SICKRelatedness",
)
"""What the ``avg`` of a record without ``final.sts_tasks`` covers (records written before the
field existed). History: never edit it when adding a task."""
LEGACY_TRANSFER_TASKS: tuple[str, ...] = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
"""What the ``avg`` of a record without ``final.transfer_tasks`` covers. History, as above."""

STSB_DEV_EVAL = ("STSBenchmark", "dev")
"""The task and split the training's dev evaluation reads (:mod:`harness.evaluation.geometry`)."""


# -- derived views ---------------------------------------------------------------------------------
def sts_task_names() -> tuple[str, ...]:
    """The registered STS tasks, in table order."""
    return tuple(STS_REGISTRY)


def transfer_task_names() -> tuple[str, ...]:
    """The registered transfer tasks, in table order."""
    return tuple(TRANSFER_REGISTRY)


def mteb_tasks() -> dict[str, tuple[str, str]]:
    """Harness STS task -> (MTEB task name, MTEB's dataset revision), for the tasks MTEB has."""
    return {name: task.mteb for name, task in STS_REGISTRY.items() if task.mteb is not None}


def year_task_names() -> tuple[str, ...]:
    """The STS tasks scored over subsets (STS12-16): the columns with all/mean/wmean aggregates."""
    return tuple(t.name for t in STS_REGISTRY.values() if t.has_subsets)


def task_names(group: str) -> tuple[str, ...]:
    """The registered tasks of ``"sts"`` or ``"transfer"``."""
    return sts_task_names() if group == "sts" else transfer_task_names()


def sts_sentences() -> int:
    """Distinct sentences the final STS pass embeds (every registered task's test parts)."""
    return sum(t.sentences for t in STS_REGISTRY.values())


def score_keys() -> dict[str, tuple[str, ...]]:
    """The keys a table spec's ``columns`` may name, per ``scores``: tasks and ``avg``, or the dev score."""
    return {
        "sts": (*sts_task_names(), "avg"),
        "transfer": (*transfer_task_names(), "avg"),
        "stsb_dev": ("stsb_dev",),
    }


SCORE_RANGES: Mapping[str, tuple[float, float]] = {
    "sts": (-100.0, 100.0),
    "transfer": (0.0, 100.0),
    "stsb_dev": (-100.0, 100.0),
}
"""The scale of each score set (a key of :func:`score_keys`): correlations x 100, accuracies in %."""


def column_labels() -> dict[str, str]:
    """The label a table prints for each score key."""
    sts = {t.name: t.label for t in STS_REGISTRY.values()}
    transfer = {t.name: t.label for t in TRANSFER_REGISTRY.values()}
    return {**sts, **transfer, "avg": "Avg.", "stsb_dev": "STS-B dev"}


V = TypeVar("V")


class _LiveView(Mapping[str, V]):
    """A read-only mapping rebuilt from the registries at every use."""

    def __init__(self, build: Callable[[], dict[str, V]], doc: str) -> None:
        self._build = build
        self.__doc__ = doc

    def __getitem__(self, key: str) -> V:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return repr(self._build())


SCORE_KEYS: Mapping[str, tuple[str, ...]] = _LiveView(score_keys, "score_keys(), kept current")
COLUMN_LABELS: Mapping[str, str] = _LiveView(column_labels, "column_labels(), kept current")


# -- checks ----------------------------------------------------------------------------------------
def _unknown(kind: str, names: Sequence[str], known: Sequence[str]) -> ConfigError:
    listed = ", ".join(f"{n!r}{did_you_mean(n, known)}" for n in names)
    return ConfigError(f"unknown {kind} task(s) {listed}; choose from {', '.join(known)}")


def check_names(kind: str, tasks: Sequence[str] | str | None) -> tuple[str, ...]:
    """Validate task names of ``kind`` (``"STS"`` or ``"transfer"``; ``None`` = all registered).

    Returns:
        The tasks asked, duplicates dropped, in registry order.

    Raises:
        ConfigError: an unknown name (one line, with a "did you mean" hint) or no task at all.
    """
    known = sts_task_names() if kind == "STS" else transfer_task_names()
    if tasks is None:
        return known
    if isinstance(tasks, str):
        tasks = [tasks]
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise _unknown(kind, unknown, known)
    if not tasks:
        raise ConfigError(f"no {kind} task asked")
    return tuple(t for t in known if t in tasks)


def sts_task(name: str) -> StsTask:
    """The registered STS task ``name`` (ConfigError with a hint otherwise)."""
    (name,) = check_names("STS", [name])
    return STS_REGISTRY[name]


def transfer_task(name: str) -> TransferTask:
    """The registered transfer task ``name`` (ConfigError with a hint otherwise)."""
    (name,) = check_names("transfer", [name])
    return TRANSFER_REGISTRY[name]


def sts_files(senteval: Path, tasks: Sequence[str] | None = None, *, all_splits: bool = False) -> list[Path]:
    """The files the STS tasks read (``None`` = all registered), for checking before an encoder loads."""
    splits = SPLITS if all_splits else (REPORTED_SPLIT,)
    return [path for name in check_names("STS", tasks) for path in STS_REGISTRY[name].files(senteval, splits)]


def transfer_files(senteval: Path, tasks: Sequence[str] | None = None) -> list[Path]:
    """The files the transfer tasks read (``None`` = all registered)."""
    return [
        path for name in check_names("transfer", tasks) for path in TRANSFER_REGISTRY[name].paths(senteval)
    ]


def stsb_dev_file(senteval: Path) -> Path:
    """The file of the training's STS-B dev evaluation."""
    task, split = STSB_DEV_EVAL
    return sts_task(task).files(senteval, (split,))[0]
