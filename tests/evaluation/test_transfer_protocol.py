"""SentEval's model selection per transfer task: the fits of each stage, and the L2 value it picks."""

from __future__ import annotations

from harness.evaluation.logreg import PARAMETER_SETS
from harness.evaluation.transfer_protocol import TaskFeatures, TaskProtocol
from tests.helpers import blobs


def synthetic_features() -> dict[str, TaskFeatures]:
    """Three small tasks, one per protocol (nested k-fold, k-fold then test, train/dev/test); the
    engines' tests (test_transfer.py, test_transfer_batched.py) fit them too."""
    x, y = blobs(150, 8, 2, seed=5, noise=3.0)
    tr, ytr = blobs(160, 8, 6, seed=6, noise=2.0)
    te, yte = blobs(60, 8, 6, seed=6, noise=2.0)
    s_tr, s_ytr = blobs(200, 8, 2, seed=7, noise=3.0)
    s_dev, s_ydev = blobs(50, 8, 2, seed=7, noise=3.0)
    s_te, s_yte = blobs(70, 8, 2, seed=7, noise=3.0)
    return {
        "MR": TaskFeatures("MR", 2, {"all": (x, y)}),
        "TREC": TaskFeatures("TREC", 6, {"train": (tr, ytr), "test": (te, yte)}),
        "SST2": TaskFeatures(
            "SST2", 2, {"train": (s_tr, s_ytr), "dev": (s_dev, s_ydev), "test": (s_te, s_yte)}
        ),
    }


def test_protocol_fit_counts() -> None:
    feats = synthetic_features()
    cfg = PARAMETER_SETS["fasttest"]
    nested = TaskProtocol(feats["MR"], cfg)
    assert nested.kind == "nested" and len(nested.selection_jobs) == 5 * 4 * 5
    assert len(nested.final_jobs([0.5] * 100)) == 5
    kfold = TaskProtocol(feats["TREC"], cfg)
    assert kfold.kind == "kfold" and len(kfold.selection_jobs) == 4 * 5
    split = TaskProtocol(feats["SST2"], cfg)
    assert split.kind == "split" and len(split.selection_jobs) == 4
    # first maximum wins after rounding to 2 decimals: 0.50001 and 0.50004 tie at 50.0
    (job,) = split.final_jobs([0.40, 0.50001, 0.50004, 0.3])
    assert job.l2 == 1e-4
