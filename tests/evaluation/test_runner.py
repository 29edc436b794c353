"""The evaluation runner: the task groups or task names asked for, and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harness.cli import main
from harness.encoder.model import SentenceEncoder
from harness.errors import ConfigError
from harness.evaluation.runner import evaluate, run_evaluation
from harness.evaluation.sts import STS_TASKS
from harness.evaluation.tasks import (
    LEGACY_STS_TASKS,
)


def test_eval_tasks_takes_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from harness.evaluation.runner import TaskSelection, select_tasks

    chosen = select_tasks("SICKRelatedness,MR,STS12,MR")
    assert (chosen.groups, chosen.sts, chosen.transfer) == (
        ("sts", "transfer"),
        ("STS12", "SICKRelatedness"),
        ("MR",),
    )
    assert select_tasks("transfer") == TaskSelection(("transfer",))
    assert select_tasks("all") == TaskSelection(("sts", "transfer"))
    assert select_tasks("MR,sts") == TaskSelection(("sts", "transfer"), LEGACY_STS_TASKS, ("MR",))
    code = main(
        ["eval", "--model", "random:tiny", "--tasks", "STS13,SICK", "--output", str(tmp_path / "r.json")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "unknown task 'SICK'" in err and len(err.strip().splitlines()) == 1


def constant_free_embed(sentences: list[str]) -> np.ndarray:
    """A toy encoder ``[n, 4]``: character statistics (good enough for wiring tests)."""
    return np.array(
        [[len(s), s.count(" "), sum(map(ord, s)) % 97, s.count("e")] for s in sentences], dtype=np.float32
    )


def test_evaluate_returns_only_the_groups_asked(mini_data_root: Path, fake_transfer: list) -> None:
    sts_only = evaluate(constant_free_embed, mini_data_root, "sts")
    assert list(sts_only) == ["sts"]
    assert list(sts_only["sts"]) == [*STS_TASKS, "avg"]
    assert fake_transfer == []

    both = evaluate(constant_free_embed, mini_data_root, "all", "test")
    assert list(both) == ["sts", "transfer"]
    assert both["sts"] == sts_only["sts"]
    assert both["transfer"]["MR"] == 70.0
    assert fake_transfer[-1]["mode"] == "test"
    assert fake_transfer[-1]["senteval_path"] == mini_data_root / "senteval"

    transfer_only = run_evaluation(constant_free_embed, mini_data_root, "transfer")
    assert list(transfer_only.results) == ["transfer"]
    assert fake_transfer[-1]["device"] is None  # no device: the CPU's process pool
    run_evaluation(constant_free_embed, mini_data_root, "transfer", device=torch.device("meta"))
    assert fake_transfer[-1]["device"] == torch.device("meta")  # where the classifiers train


@pytest.mark.parametrize(
    ("tasks", "mode", "match"),
    [
        ("sst", "fasttest", "task group"),
        ("sts", "slow", r"^mode: 'slow' is not one of 'fasttest', 'test'"),  # transfer_mode's rule
    ],
)
def test_evaluate_rejects_bad_choices(mini_data_root: Path, tasks: str, mode: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        evaluate(constant_free_embed, mini_data_root, tasks, mode)


def test_an_encoder_without_a_pooler_layer_cannot_embed_with_cls(tiny: SentenceEncoder) -> None:
    from harness.evaluation.runner import encoder_functions

    encoder_functions(tiny, "cls")  # BERT has one
    model: Any = tiny.model
    saved, model.pooler = model.pooler, None
    try:
        encoder_functions(tiny, "cls_before_pooler")
        with pytest.raises(ConfigError, match=r"^pooler 'cls' reads the model's pooler layer"):
            encoder_functions(tiny, "cls")  # once, not at the first embedding
    finally:
        model.pooler = saved
