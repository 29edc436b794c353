"""SentEval transfer tasks: readers, order, embedding, fast == reference, parallel == sequential, engines."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.errors import ConfigError, DataError
from harness.evaluation.transfer import (
    TRANSFER_TASKS,
    classify_tasks,
    embed_column,
    evaluate_transfer,
    read_task,
)
from tests.evaluation.test_transfer_protocol import synthetic_features
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.usefixtures("single_thread")
"""Fits on tiny tensors are latency-bound: OpenMP hand-offs only slow them (as in the evaluator)."""

SENTEVAL = REPO_ROOT.parent / "shared" / "data" / "senteval"
needs_data = pytest.mark.skipif(not SENTEVAL.is_dir(), reason="shared SentEval data not found")


# -- readers and order ------------------------------------------------------------------------------
@needs_data
@pytest.mark.parametrize(
    ("task", "sizes"),
    [
        ("MR", {"all": 10662}),
        ("CR", {"all": 3775}),
        ("SUBJ", {"all": 10000}),
        ("MPQA", {"all": 10606}),
        ("SST2", {"train": 67349, "dev": 872, "test": 1821}),
        ("TREC", {"train": 5452, "test": 500}),
        ("MRPC", {"train": 4076, "test": 1725}),
    ],
)
def test_readers_count_the_real_files(task: str, sizes: dict[str, int]) -> None:
    text = read_task(SENTEVAL, task)
    assert {name: len(split) for name, split in text.splits.items()} == sizes
    for split in text.splits.values():
        assert all(len(col) == len(split) for col in split.columns)
        assert set(np.unique(split.labels)) <= set(range(text.nclasses))


@needs_data
def test_binary_readers_keep_empty_lines_and_put_positives_first() -> None:
    cr = read_task(SENTEVAL, "CR").splits["all"]
    assert sum(1 for tokens in cr.columns[0] if not tokens) == 4
    mpqa = read_task(SENTEVAL, "MPQA").splits["all"]
    assert sum(1 for tokens in mpqa.columns[0] if not tokens) == 3
    assert np.bincount(read_task(SENTEVAL, "MR").splits["all"].labels).tolist() == [5331, 5331]


@needs_data
def test_trec_uses_coarse_labels_and_drops_the_fine_one() -> None:
    trec = read_task(SENTEVAL, "TREC").splits["train"]
    assert trec.labels.max() == 5
    first = (SENTEVAL / "TREC" / "train_5500.label").read_text(encoding="latin-1").splitlines()[0]
    coarse, rest = first.split(":", 1)
    expected = rest.split(" ", 1)[1].split()
    positions = [i for i, tokens in enumerate(trec.columns[0]) if tokens == expected]
    assert positions and trec.labels[positions[0]] == {"DESC": 1}.get(coarse, -1)

    # the two rows with key (1, 2, ...) keep label order: label 0 (row 3) before label 1 (row 0)


def test_embed_column_sends_senteval_batches() -> None:
    calls: list[list[str]] = []

    def embed(batch: list[str]) -> np.ndarray:
        calls.append(batch)
        return np.zeros((len(batch), 3), dtype=np.float32)

    sentences = [["w"] * (i % 7) for i in range(300)]
    out = embed_column(sentences, embed)
    assert out.shape == (300, 3)
    assert [len(c) for c in calls] == [128, 128, 44]
    assert calls[0][1] == "w" and calls[0][0] == ""
    with pytest.raises(ConfigError, match="shape"):
        embed_column(sentences, lambda batch: np.zeros((len(batch) - 1, 3)))


# -- parallel == sequential, and the engine a device chooses ---------------------------------------
def test_parallel_equals_sequential_and_reference() -> None:
    feats = synthetic_features()
    sequential = classify_tasks(feats, mode="fasttest", workers=1)
    parallel = classify_tasks(feats, mode="fasttest", workers=2)
    assert parallel == sequential
    assert list(parallel) == ["MR", "TREC", "SST2"]
    assert all(0.0 <= v <= 100.0 for v in parallel.values())
    small = {k: feats[k] for k in ("TREC", "SST2")}
    assert classify_tasks(small, mode="fasttest", workers=1, engine="reference") == {
        k: sequential[k] for k in small
    }


def test_the_device_chooses_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """An accelerator runs the batched fits; the CPU keeps the process pool of fit_fast."""
    from harness.evaluation import transfer

    chosen: list[object] = []

    def batched(protocols: object, config: object, device: object, *rest: object) -> dict[str, float]:
        chosen.append(device)
        return {}

    monkeypatch.setattr(transfer, "classify_batched", batched)
    feats = {"SST2": synthetic_features()["SST2"]}
    with pytest.raises(KeyError):  # the stand-in returns no accuracies
        classify_tasks(feats, device="meta")
    assert chosen == [torch.device("meta")]
    assert classify_tasks(feats, device="cpu", workers=1) == classify_tasks(feats, workers=1)
    assert chosen == [torch.device("meta")]
    with pytest.raises(ConfigError, match="engine"):
        classify_tasks(feats, engine="gpu")


# -- end to end on a miniature SentEval folder, and bad inputs -------------------------------------
_WORDS = [
    "good",
    "bad",
    "fine",
    "awful",
    "great",
    "poor",
    "nice",
    "dull",
    "what",
    "who",
    "where",
    "when",
    "how",
    "many",
]


def _write_mini_senteval(root: Path) -> Path:
    rng = np.random.RandomState(8)

    def sentence() -> str:
        return " ".join(rng.choice(_WORDS, rng.randint(1, 6)))

    for task, (folder, pos, neg) in {
        "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
        "CR": ("CR", "custrev.pos", "custrev.neg"),
        "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),
        "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
    }.items():
        (root / folder).mkdir(parents=True)
        (root / folder / pos).write_text("\n".join(sentence() for _ in range(40)) + "\n", encoding="latin-1")
        lines = [sentence() for _ in range(40)] + ([""] if task == "CR" else [])
        (root / folder / neg).write_text("\n".join(lines) + "\n", encoding="latin-1")
    (root / "SST" / "binary").mkdir(parents=True)
    for split, n in (("train", 80), ("dev", 30), ("test", 30)):
        rows = [f"{sentence()} \t{rng.randint(0, 2)}" for _ in range(n)]
        (root / "SST" / "binary" / f"sentiment-{split}").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "TREC").mkdir()
    coarse = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    for name, n in (("train_5500.label", 90), ("TREC_10.label", 30)):
        rows = [f"{coarse[i % 6]}:fine {sentence()}" for i in range(n)]
        (root / "TREC" / name).write_text("\n".join(rows) + "\n", encoding="latin-1")
    (root / "MRPC").mkdir()
    for split, n in (("train", 60), ("test", 30)):
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        rows += [f"{rng.randint(0, 2)}\t1\t2\t{sentence()}\t{sentence()}" for _ in range(n)]
        (root / "MRPC" / f"msr_paraphrase_{split}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def _hash_embed(batch: list[str]) -> np.ndarray:
    out = np.zeros((len(batch), 16), dtype=np.float32)
    for i, sentence in enumerate(batch):
        for word in sentence.split():
            out[i] += np.random.RandomState(sum(map(ord, word))).randn(16).astype(np.float32)
    return out


def test_evaluate_transfer_end_to_end_on_a_mini_folder(tmp_path: Path) -> None:
    root = _write_mini_senteval(tmp_path / "senteval")
    seen: list[list[str]] = []

    def embed(batch: list[str]) -> np.ndarray:
        seen.append(batch)
        return _hash_embed(batch)

    result = evaluate_transfer(embed, root, mode="fasttest", workers=1)
    assert list(result) == [*TRANSFER_TASKS, "avg"]
    assert result["avg"] == float("%.2f" % (sum(result[t] for t in TRANSFER_TASKS) / 7))
    assert all(len(batch) <= 128 for batch in seen)
    subset = evaluate_transfer(_hash_embed, root, mode="fasttest", tasks=["TREC", "CR"], workers=2)
    assert subset == {
        "TREC": result["TREC"],
        "CR": result["CR"],
        "avg": float("%.2f" % ((result["TREC"] + result["CR"]) / 2)),
    }


def test_unknown_task_or_workers_is_a_config_error(tmp_path: Path) -> None:
    # (the mode is checked where it enters: the run settings, evaluation.runner, harness eval)
    with pytest.raises(ConfigError, match="unknown transfer task"):
        evaluate_transfer(_hash_embed, tmp_path, tasks=["MR", "SST5"])
    with pytest.raises(ConfigError, match="workers"):
        classify_tasks(synthetic_features(), workers=0)


@needs_data
def test_missing_file_names_the_file(tmp_path: Path) -> None:
    shutil.copytree(SENTEVAL / "TREC", tmp_path / "TREC")
    (tmp_path / "TREC" / "TREC_10.label").unlink()
    with pytest.raises(DataError, match=r"TREC_10\.label"):
        read_task(tmp_path, "TREC")


@needs_data
def test_malformed_mrpc_line_names_file_and_line(tmp_path: Path) -> None:
    shutil.copytree(SENTEVAL / "MRPC", tmp_path / "MRPC")
    path = tmp_path / "MRPC" / "msr_paraphrase_test.txt"
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[7] = "1\t123\tonly three fields"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataError, match=r"msr_paraphrase_test\.txt:8"):
        read_task(tmp_path, "MRPC")


@pytest.mark.parametrize(
    ("task", "relpath", "bad_line", "where"),
    [
        ("TREC", "TREC/TREC_10.label", "WHAT:fine is this ?", "TREC_10.label:2"),
        ("TREC", "TREC/TREC_10.label", "", "TREC_10.label:2"),
        ("SST2", "SST/binary/sentiment-dev", "no label here", "sentiment-dev:2"),
        ("MRPC", "MRPC/msr_paraphrase_train.txt", "x\t1\t2\ta\tb", "msr_paraphrase_train.txt:2"),
    ],
)
def test_malformed_lines_are_data_errors(
    tmp_path: Path, task: str, relpath: str, bad_line: str, where: str
) -> None:
    root = _write_mini_senteval(tmp_path / "senteval")
    path = root / relpath
    lines = path.read_text(encoding="latin-1").split("\n")
    lines[1] = bad_line
    path.write_text("\n".join(lines), encoding="latin-1")
    with pytest.raises(DataError, match=where.replace(".", r"\.")):
        read_task(root, task)


@pytest.mark.slow
@needs_data
def test_packaged_encoder_on_trec() -> None:
    from harness.encoder.loading import load_encoder

    encoder = load_encoder("minilm")
    result = evaluate_transfer(lambda b: encoder.embed(b), SENTEVAL, tasks=["TREC"])
    # benchmarks/bench_transfer_eval.py measured 72.2 (fasttest) with this encoder and pooler
    assert result == {"TREC": 72.2, "avg": 72.2}


def test_default_fit_processes_follow_the_runs_cpu_share() -> None:

    from harness.evaluation.transfer import default_workers

    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert default_workers() == 1  # a one-CPU grid trial fits in one process
    finally:
        torch.set_num_threads(saved)


MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


# -- transfer data: an empty file or split is named, never scored ------------------------------------
def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_an_empty_binary_file_is_a_data_error(tmp_path: Path) -> None:
    write(tmp_path / "MR" / "rt-polarity.pos", "a fine film .\nwonderful .\n")
    write(tmp_path / "MR" / "rt-polarity.neg", "")
    with pytest.raises(
        DataError, match=r"MR: the label-0 file is empty \(no sentences\): .*rt-polarity\.neg"
    ):
        read_task(tmp_path, "MR")
    write(tmp_path / "MR" / "rt-polarity.neg", "dull .\n")
    text = read_task(tmp_path, "MR")
    assert len(text.splits["all"]) == 3 and set(np.unique(text.splits["all"].labels)) == {0, 1}


@pytest.mark.parametrize(
    ("task", "files", "empty", "message"),
    [
        (
            "SST2",
            {f"SST/binary/sentiment-{s}": "good .\t1\nbad .\t0\n" for s in ("train", "dev", "test")},
            "SST/binary/sentiment-dev",
            "SST2: the dev split is empty",
        ),
        (
            "TREC",
            {"TREC/train_5500.label": "NUM:date when is it ?\n", "TREC/TREC_10.label": "HUM:ind who ?\n"},
            "TREC/TREC_10.label",
            "TREC: the test split is empty",
        ),
        (
            "MRPC",
            {f"MRPC/msr_paraphrase_{s}.txt": MRPC_HEADER + "1\t1\t2\ta .\tb .\n" for s in ("train", "test")},
            "MRPC/msr_paraphrase_test.txt",
            "MRPC: the test split is empty",
        ),
    ],
)
def test_an_empty_split_names_the_task_and_file(
    task: str, files: dict[str, str], empty: str, message: str, tmp_path: Path
) -> None:
    for name, text in files.items():
        write(tmp_path / name, text)
    read_task(tmp_path, task)  # the full files read
    header = MRPC_HEADER if task == "MRPC" else ""
    write(tmp_path / empty, header)
    with pytest.raises(DataError, match=rf"{message} \(no sentences\): .*{Path(empty).name}"):
        read_task(tmp_path, task)
