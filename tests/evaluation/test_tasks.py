"""The task registry: its entries against the real files, the views derived from it, and a test-only
STS task added by its registry entry alone (CONTRIBUTING.md, "Adding an evaluation task")."""

from __future__ import annotations

import ast
import re
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.evaluation import tasks as tasks_module
from harness.evaluation.readers import TsvPairs
from harness.evaluation.sts import run_sts, table_average
from harness.evaluation.tasks import (
    COLUMN_LABELS,
    LEGACY_STS_TASKS,
    LEGACY_TRANSFER_TASKS,
    SCORE_KEYS,
    STS_REGISTRY,
    TRANSFER_REGISTRY,
    StsPart,
    StsTask,
    check_names,
    sts_files,
    sts_sentences,
    sts_task_names,
    transfer_files,
    transfer_task_names,
    year_task_names,
)
from tests.helpers import REPO_ROOT, SPECS, make_record, spec_text, write_spec

TINY_PAIRS = (
    (4.5, "a cat sits on the red mat", "a cat is sitting on the red mat"),
    (0.5, "stock markets fell sharply today", "the child plays with a blue ball"),
    (3.0, "the train leaves at noon", "the train departs at midday"),
    (1.0, "she reads a long novel", "he cooks a short dinner"),
    (2.5, "rain is expected tomorrow", "it may rain tomorrow evening"),
    (5.0, "the door is open", "the door is open"),
)
"""The test-only task's pairs: gold, sentence 1, sentence 2 (sentences found in no SentEval file)."""


def _tiny_task() -> StsTask:
    sentences = {s for _, a, b in TINY_PAIRS for s in (a, b)}
    return StsTask(
        name="TINY",
        label="Tiny",
        scoring="test_split",
        parts=(StsPart("test", ("TINY/tiny-test.tsv",)),),
        reader=TsvPairs(gold_field=0, sent_fields=(1, 2)),
        sentences=len(sentences),
    )


@pytest.fixture
def tiny_root(mini_data_root: Path, tmp_path: Path) -> Path:
    """A copy of the mini data root with the test-only task's file written into it."""
    root = tmp_path / "data"
    shutil.copytree(mini_data_root, root)
    folder = root / "senteval" / "TINY"
    folder.mkdir()
    lines = "".join(f"{gold}\t{a}\t{b}\n" for gold, a, b in TINY_PAIRS)
    (folder / "tiny-test.tsv").write_text(lines, encoding="utf-8")
    return root


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Iterator[StsTask]:
    """The test-only STS task, registered by its entry alone (undone after the test)."""
    task = _tiny_task()
    with monkeypatch.context() as patch:
        patch.setitem(STS_REGISTRY, task.name, task)
        yield task
    assert "TINY" not in sts_task_names()


def bag_of_words(sentences: list[str]) -> Any:
    """A toy encoder: one hashed dimension per word (batch-independent)."""

    out = np.zeros((len(sentences), 32), dtype=np.float32)
    for i, sentence in enumerate(sentences):
        for word in sentence.split():
            out[i, zlib.crc32(word.encode()) % 32] += 1.0
    return out


# -- the registry against the real files ------------------------------------------------------------


def new_sentences(senteval: Path) -> dict[str, int]:
    """Per STS task, in registry order: the distinct test sentences it adds to the ones before it."""
    seen: set[str] = set()
    out = {}
    for task in STS_REGISTRY.values():
        found = {s for pairs in task.read(senteval).values() for s in (*pairs.sent1, *pairs.sent2)}
        out[task.name] = len(found - seen)
        seen |= found
    return out


def test_declared_sentence_counts_are_the_real_files(data_root: Path) -> None:
    """Each STS task's ``sentences`` is counted in its files; together, the final pass's 26,083."""
    counted = new_sentences(data_root / "senteval")
    assert counted == {name: task.sentences for name, task in STS_REGISTRY.items()}
    assert sts_sentences() == sum(counted.values()) == 26_083


def test_every_registered_file_is_in_the_shared_data(data_root: Path) -> None:
    senteval = data_root / "senteval"
    files = [*sts_files(senteval, all_splits=True), *transfer_files(senteval)]
    # 24 subsets x 2 files + STS-B and SICK-R x 3 splits; 4 binary tasks x 2 + SST2 3 + TREC 2 + MRPC 2
    assert len(files) == len(set(files)) == 24 * 2 + 2 * 3 + 4 * 2 + 3 + 2 + 2
    assert [f for f in files if not f.is_file()] == []


def test_the_standard_tasks_and_their_views() -> None:
    assert sts_task_names() == LEGACY_STS_TASKS
    assert transfer_task_names() == LEGACY_TRANSFER_TASKS
    assert year_task_names() == ("STS12", "STS13", "STS14", "STS15", "STS16")
    assert SCORE_KEYS["sts"] == (*LEGACY_STS_TASKS, "avg")
    assert SCORE_KEYS["transfer"] == (*LEGACY_TRANSFER_TASKS, "avg")
    assert list(SCORE_KEYS) == ["sts", "transfer", "stsb_dev"]
    labels = {k: COLUMN_LABELS.get(k, k) for k in ("STSBenchmark", "SICKRelatedness", "SST2", "avg", "STS12")}
    assert labels == {
        "STSBenchmark": "STS-B",
        "SICKRelatedness": "SICK-R",
        "SST2": "SST",
        "avg": "Avg.",
        "STS12": "STS12",
    }
    assert set(TRANSFER_REGISTRY) == set(LEGACY_TRANSFER_TASKS)


def test_a_split_task_needs_its_own_test_split() -> None:
    """No task can fall back on another task's files (once, BIOSSES would have read SICK's)."""
    with pytest.raises(ValueError, match="test split"):
        StsTask("BIOSSES", "BIOSSES", "test_split", (StsPart("dev", ("B/dev.tsv",)),), TsvPairs(0, (1, 2)), 1)


def test_task_names_live_only_in_the_registry() -> None:
    """No module of the harness but the registry spells a task name (two compatibility readers aside;
    reference.py holds SentEval's measured output, keyed by task, not a list a new task extends)."""
    names = {*sts_task_names(), *transfer_task_names()}
    allowed = {
        ("harness/evaluation/sts.py", "STSBenchmark"),
        ("harness/evaluation/sts.py", "SICKRelatedness"),
    }
    found = set()
    for path in sorted((REPO_ROOT / "harness").rglob("*.py")):
        where = path.relative_to(REPO_ROOT).as_posix()
        if where in ("harness/evaluation/tasks.py", "harness/evaluation/reference.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings:
                found.add((where, node.value))
    assert found == allowed


# -- unknown names: one line with a hint ---------------------------------------------------------------


def test_unknown_task_names_get_one_line_with_a_hint(tmp_path: Path) -> None:
    from harness.evaluation.runner import select_tasks
    from harness.specs.parse import load_table_spec

    with pytest.raises(ConfigError, match=r"unknown STS task\(s\) 'STS17' \(did you mean 'STS1\d'\?\)"):
        check_names("STS", ["STS17"])
    with pytest.raises(ConfigError, match=r"unknown task 'MRCP' \(did you mean 'MRPC'\?\)"):
        select_tasks("STS12,MRCP")
    spec = write_spec(tmp_path / "t.toml", _spec_text('["STS17", "avg"]'))
    with pytest.raises(ConfigError, match=r"unknown column 'STS17' \(did you mean 'STS1\d'\?\)") as err:
        load_table_spec(spec)
    assert "\n" not in str(err.value)


def _spec_text(columns: str) -> str:
    """A spec of one quoted row with these two ``columns``."""
    body = '[[rows]]\nlabel = "GloVe"\nquoted = true\npaper = [1.0, 2.0]\n'
    return spec_text(body, cites="SimCSE++ Table 3", title="t", columns=columns)


# -- the test-only task: its entry is all it takes -----------------------------------------------------


def test_a_registered_task_is_evaluated_averaged_and_recorded(tiny: StsTask, tiny_root: Path) -> None:
    from harness.evaluation.runner import run_evaluation, select_tasks

    report = run_sts(bag_of_words, tiny_root / "senteval")
    assert list(report.scores) == [*LEGACY_STS_TASKS, "TINY", "avg"]
    assert report.details["TINY"]["test"]["n"] == len(TINY_PAIRS)
    assert report.scores["avg"] == table_average(report.scores[t] for t in (*LEGACY_STS_TASKS, "TINY"))
    alone = run_sts(bag_of_words, tiny_root / "senteval", ["TINY"])
    assert alone.scores["TINY"] == report.scores["TINY"]  # file order, no filtering, test split

    final = run_evaluation(bag_of_words, tiny_root, "sts").record()
    assert final["sts_tasks"] == [*LEGACY_STS_TASKS, "TINY"]
    assert "TINY" not in final["sts_aggregates"]  # scored on a test split, not over subsets
    assert select_tasks("TINY,STS12").sts == ("STS12", "TINY")


def test_a_registered_task_is_a_spec_column_a_checked_file_and_counted_sentences(
    tiny: StsTask, tiny_root: Path, tmp_path: Path
) -> None:
    from harness.grid.preflight.machine import needed_data_files
    from harness.specs.parse import load_table_spec

    assert SCORE_KEYS["sts"] == (*LEGACY_STS_TASKS, "TINY", "avg")
    assert COLUMN_LABELS["TINY"] == "Tiny"
    assert "TINY" not in year_task_names()
    spec = write_spec(tmp_path / "tiny.toml", _spec_text('["TINY", "avg"]'))
    assert load_table_spec(spec).column_labels == ("Tiny", "Avg.")

    senteval = tiny_root / "senteval"
    tiny_file = senteval / "TINY" / "tiny-test.tsv"
    assert sts_files(senteval)[-1] == tiny_file
    assert tiny_file in needed_data_files(senteval, {"sts"})
    assert tiny_file not in needed_data_files(senteval, {"transfer"})
    assert new_sentences(senteval)["TINY"] == tiny.sentences == 11  # one sentence is there twice
    assert sts_sentences() == 26_083 + 11


def test_records_of_other_task_sets_are_never_mixed(tiny: StsTask) -> None:
    from harness.grid.plan.status import complete_for
    from harness.store.record import record_metric, record_tasks

    old = {"status": "finished", "config": {"final_tasks": "sts"}, "final": {"sts": {"avg": 70.0}}}
    new = {
        "status": "finished",
        "config": {"final_tasks": "sts"},
        "final": {"sts": {"TINY": 50.0, "avg": 60.0}, "sts_tasks": [*LEGACY_STS_TASKS, "TINY"]},
    }
    assert record_tasks(old, "sts") == LEGACY_STS_TASKS
    assert record_metric(old, "sts", "avg") is None and record_metric(new, "sts", "avg") == 60.0
    assert not complete_for(old, "sts") and complete_for(new, "sts")
    assert record_metric(old, "stsb_dev", "stsb_dev") is None  # the dev score has no task set


def test_without_the_task_old_records_count_and_new_ones_do_not() -> None:
    from harness.grid.plan.status import complete_for
    from harness.store.record import record_metric

    scores: dict[str, Any] = {"sts": {"avg": 70.0}, "transfer": {"avg": 80.0}}
    old = {"status": "finished", "config": {"final_tasks": "all"}, "final": scores}
    eight = {**old, "final": {**scores, "sts_tasks": [*LEGACY_STS_TASKS, "TINY"]}}
    assert record_metric(old, "sts", "avg") == 70.0 and complete_for(old, "all")
    assert record_metric(eight, "sts", "avg") is None and not complete_for(eight, "all")
    assert record_metric(eight, "transfer", "avg") == 80.0 and complete_for(eight, "transfer")


def test_a_table_cell_never_mixes_task_sets(
    corpus_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One group, two seeds: a 7-task record and an 8-task one. The cell shows one of them, never both."""
    from harness.reporting.tables.build import build_tables
    from harness.specs.cells import expand
    from harness.specs.parse import load_table_spec
    from harness.store.run_store import RunStore

    root = corpus_root
    spec = load_table_spec(SPECS / "report_rows.toml")
    base = expand([spec], "smoke", seeds=1, data_root=root).cell(spec.name, "SimCSE-BERT-base").configs[0]
    store = RunStore(tmp_path / "runs")
    eight = [*LEGACY_STS_TASKS, "TINY"]
    for seed, final in (
        (base.seed, {"sts": {"STS12": 70.0, "STSBenchmark": 70.0, "avg": 70.0}}),
        (base.seed + 1, {"sts": {"STS12": 60.0, "STSBenchmark": 60.0, "avg": 60.0}, "sts_tasks": eight}),
    ):
        store.save(make_record(base.replace(seed=seed), final=final))

    def measured() -> list[str]:
        (table,) = build_tables([spec], store, "smoke", data_root=root)
        lines = table.lines
        row = next(i for i, ln in enumerate(lines) if ln.label == "SimCSE-BERT-base")
        return [c.text for c in lines[row + 1].cells]

    assert measured() == ["70.00", "70.00", "70.00"]
    monkeypatch.setitem(STS_REGISTRY, "TINY", _tiny_task())
    assert measured() == ["60.00", "60.00", "60.00"]


def test_contributing_lists_what_the_test_only_task_touched() -> None:
    """The test-only task above needs its registry entry and its test: CONTRIBUTING says exactly that."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    part = text.split("## Adding an evaluation task", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\d\. `([^`]+)`", part, flags=re.MULTILINE))
    assert named == {"harness/evaluation/tasks.py", "tests/evaluation/test_<task>.py"}
    for name in ("STS_REGISTRY", "TRANSFER_REGISTRY", "StsTask", "TransferTask", "TsvPairs"):
        assert name in part and hasattr(tasks_module, name), name
