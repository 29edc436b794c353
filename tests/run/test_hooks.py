"""The training loop's evaluation hooks: the final scores that are not finite numbers are named."""

from __future__ import annotations

import numpy as np

from harness.run.hooks import non_finite_scores


def test_non_finite_scores_lists_every_group() -> None:
    final = {"sts": {"A": 1.0, "B": None, "C": True}, "transfer": {"MR": "x", "CR": 80}, "sts_tasks": ["A"]}
    assert non_finite_scores(final) == ["sts.B=None", "sts.C=True", "transfer.MR=x"]
    assert non_finite_scores({"sts": {"A": np.float32(1.5)}}) == []
