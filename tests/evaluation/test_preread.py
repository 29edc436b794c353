"""The pre-flight read: every part read once with the runs' readers, a second check of unchanged files
reads nothing again, a changed file is read again and its problem is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.evaluation import preread, tasks
from harness.evaluation.preread import data_problems
from harness.evaluation.readers import StsPairs
from harness.evaluation.tasks import STS_REGISTRY
from tests.helpers import STS15, replace_line


def test_check_passes_the_real_data_and_a_second_read_is_remembered(
    copied_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_parts: list[str] = []
    real = tasks.StsTask.read_part

    def counting(self: tasks.StsTask, senteval: Path, part: tasks.StsPart) -> StsPairs:
        read_parts.append(f"{self.name}/{part.name}")
        return real(self, senteval, part)

    monkeypatch.setattr(tasks.StsTask, "read_part", counting)
    monkeypatch.setattr(preread, "_READ_OK", set())
    senteval = copied_root / "senteval"
    count, problems = data_problems(senteval, ["sts"])
    assert problems == [] and count == len(read_parts) == 1 + sum(
        len(t.parts_for()) for t in STS_REGISTRY.values()
    )
    assert data_problems(senteval, ["sts"]) == (count, [])
    assert len(read_parts) == count  # nothing read again
    gold = senteval / STS15 / "STS.gs.images.txt"
    replace_line(gold, 2, "oops")  # a changed file is read again
    count, problems = data_problems(senteval, ["sts"])
    assert problems == [f"{gold}:2: gold score 'oops' is not a number"]
    assert data_problems(senteval, ["none"])[0] == 1  # the STS-B dev evaluation's file only
