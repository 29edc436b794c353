"""SentEval's model selection for one transfer task: the classifier inputs, one fit, and the two
stages of fits around it (selection over the L2 grid, then the refit with the chosen value).

The protocol is ``shared/docs/SENTEVAL_PROTOCOL.md`` ("Transfer tasks"): logistic regression
(:mod:`harness.evaluation.logreg`) with the L2 grid 1e-5..1e-2: nested ``StratifiedKFold`` for
MR/CR/SUBJ/MPQA, ``StratifiedKFold`` on train then test for TREC and MRPC, train/dev/test for SST2.
Accuracies are rounded exactly where SentEval rounds them.

A fit depends only on its rows, its L2 value and the parameter set (every fit reseeds), so the fits
of a stage are independent: :func:`harness.evaluation.transfer.classify_tasks` runs them in a
process pool, or all at once on a device (:mod:`harness.evaluation.transfer_batched`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import StratifiedKFold

from harness.evaluation.logreg import FITTERS, L2_GRID, SEED, ClassifierConfig, FitResult


@dataclass(frozen=True)
class TaskFeatures:
    """A task's classifier inputs: per split, features ``[n, f]`` (float32) and labels ``[n]``."""

    name: str
    nclasses: int
    splits: dict[str, tuple[np.ndarray, np.ndarray]]


Rows = tuple[str, "np.ndarray | None"]
"""Rows of a task's split: ``(split name, row indices or None for all rows)``."""


@dataclass(frozen=True)
class FitJob:
    """One classifier fit, small enough to send to a worker (the features stay there).

    Attributes:
        task: Task name (key of the worker's feature table).
        train: Training rows.
        valid: Validation rows, or None for SentEval's 5% split of the training rows.
        score: Rows to score the best model on, or None (then the best validation accuracy counts).
        l2: Weight decay.
    """

    task: str
    train: Rows
    valid: Rows | None
    score: Rows | None
    l2: float


def _rows(features: TaskFeatures, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    x, y = features.splits[rows[0]]
    idx = rows[1]
    return (x, y) if idx is None else (x[idx], y[idx])


def run_fit(job: FitJob, features: TaskFeatures, config: ClassifierConfig, engine: str = "fast") -> float:
    """Run one fit and return SentEval's ``clf.score`` on the scoring rows (a fraction)."""
    x, y = _rows(features, job.train)
    valid = _rows(features, job.valid) if job.valid is not None else None
    score = _rows(features, job.score) if job.score is not None else None
    result: FitResult = FITTERS[engine](x, y, features.nclasses, job.l2, config, valid, score)
    return result.best_valid if result.score is None else result.score


def _skf_splits(labels: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=SEED)
    return list(skf.split(np.zeros(len(labels)), labels))


class TaskProtocol:
    """SentEval's model selection for one task, as two stages of independent fits.

    Stage 1 (:attr:`selection_jobs`) scores every L2 value; stage 2 (:meth:`final_jobs`) refits
    with the chosen L2 and scores the test rows; :meth:`accuracy` rounds as SentEval does.
    """

    def __init__(self, features: TaskFeatures, config: ClassifierConfig) -> None:
        self.features = features
        self.config = config
        self.name = features.name
        self.selection_jobs: list[FitJob] = []
        k = config.kfold
        if "all" in features.splits:  # nested k-fold (InnerKFoldClassifier)
            y = features.splits["all"][1]
            self.kind = "nested"
            self.outer = _skf_splits(y, k)
            for train_idx, _ in self.outer:
                inner = _skf_splits(y[train_idx], k)
                for l2 in L2_GRID:
                    for in_train, in_test in inner:
                        self.selection_jobs.append(
                            FitJob(
                                self.name, ("all", train_idx[in_train]), ("all", train_idx[in_test]), None, l2
                            )
                        )
        elif "dev" in features.splits:  # train / dev / test (SplitClassifier)
            self.kind = "split"
            for l2 in L2_GRID:
                self.selection_jobs.append(FitJob(self.name, ("train", None), ("dev", None), None, l2))
        else:  # k-fold on train, then test (KFoldClassifier)
            self.kind = "kfold"
            folds = _skf_splits(features.splits["train"][1], k)
            for l2 in L2_GRID:
                for tr, te in folds:
                    self.selection_jobs.append(FitJob(self.name, ("train", tr), ("train", te), None, l2))

    def final_jobs(self, selection: Sequence[float]) -> list[FitJob]:
        """The refits, given stage 1's results in :attr:`selection_jobs` order."""
        k, n_reg = self.config.kfold, len(L2_GRID)
        if self.kind == "nested":
            jobs = []
            per_outer = n_reg * k
            for o, (train_idx, test_idx) in enumerate(self.outer):
                block = selection[o * per_outer : (o + 1) * per_outer]
                scores = [round(100 * np.mean(block[r * k : (r + 1) * k]), 2) for r in range(n_reg)]
                l2 = L2_GRID[int(np.argmax(scores))]
                jobs.append(FitJob(self.name, ("all", train_idx), None, ("all", test_idx), l2))
            return jobs
        if self.kind == "split":
            dev_scores = [round(100 * s, 2) for s in selection]  # Python's round, as SentEval
            l2 = L2_GRID[int(np.argmax(dev_scores))]
            return [FitJob(self.name, ("train", None), ("dev", None), ("test", None), l2)]
        scores = [round(100 * np.mean(selection[r * k : (r + 1) * k]), 2) for r in range(n_reg)]
        l2 = L2_GRID[int(np.argmax(scores))]
        return [FitJob(self.name, ("train", None), None, ("test", None), l2)]

    def accuracy(self, finals: Sequence[float]) -> float:
        """SentEval's ``acc``: the mean of rounded fold accuracies (nested) or the test accuracy."""
        if self.kind == "nested":
            return float(round(np.mean([round(100 * s, 2) for s in finals]), 2))
        return float(round(100 * finals[0], 2))


@dataclass
class TransferTiming:
    """Wall time of the classifier stage, per task (finish time since the start) and in total."""

    seconds: float = 0.0
    finished_at: dict[str, float] = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)
    """The batched engine's minibatch steps, one after another, per stage: on a GPU its time is
    about these steps times one step's launches."""
