"""SentEval transfer tasks: readers, order, classifier rules, fast == reference, parallel == sequential."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from harness.errors import ConfigError, DataError
from harness.evaluation import logreg
from harness.evaluation.logreg import (
    PARAMETER_SETS,
    ClassifierConfig,
    fit_fast,
    fit_reference,
    initial_parameters,
)
from harness.evaluation.readers import TextSplit, sort_split
from harness.evaluation.transfer import (
    TRANSFER_TASKS,
    TaskFeatures,
    TaskProtocol,
    classify_tasks,
    embed_column,
    evaluate_transfer,
    read_task,
)

SENTEVAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "senteval"
needs_data = pytest.mark.skipif(not SENTEVAL.is_dir(), reason="shared SentEval data not found")


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Fits on tiny tensors are latency-bound: OpenMP hand-offs only slow them (as in the evaluator)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------------------------------
# Readers and order
# --------------------------------------------------------------------------------------------------
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


def test_sort_is_stable_by_length_then_label() -> None:
    split = TextSplit(
        (
            [
                ["a", "b"],
                ["c"],
                ["d", "e"],
                ["f"],
                ["g", "h"],
                [],
            ],
        ),
        np.array([1, 1, 0, 0, 1, 1]),
    )
    ordered = sort_split(split)
    assert ordered.columns[0] == [[], ["f"], ["c"], ["d", "e"], ["a", "b"], ["g", "h"]]
    assert ordered.labels.tolist() == [1, 0, 1, 0, 1, 1]


def test_pair_sort_uses_both_lengths_then_label() -> None:
    a = [["x"], ["x"], ["x", "y"], ["x"]]
    b = [["p", "q"], ["p"], ["p"], ["p", "q"]]
    ordered = sort_split(TextSplit((a, b), np.array([1, 0, 0, 0])))
    assert ordered.columns[1] == [["p"], ["p", "q"], ["p", "q"], ["p"]]
    assert ordered.labels.tolist() == [0, 0, 1, 0]
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


# --------------------------------------------------------------------------------------------------
# The classifier
# --------------------------------------------------------------------------------------------------
def _blobs(n: int, d: int, c: int, seed: int, noise: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    centers = rng.randn(c, d)
    y = rng.randint(0, c, n)
    x = (centers[y] + noise * rng.randn(n, d)).astype(np.float32)
    return x, y


def test_initial_parameters_are_nn_linear_after_seed_1111() -> None:
    state = torch.random.get_rng_state()
    w, b = initial_parameters(12, 3)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(1111)
    layer = nn.Linear(12, 3)
    assert torch.equal(w, layer.weight.detach()) and torch.equal(b, layer.bias.detach())


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
@pytest.mark.parametrize("l2", [0.0, 1e-3])
def test_fast_steps_are_bitwise_torch_autograd_and_optim(optim: str, l2: float) -> None:
    x_np, y_np = _blobs(203, 24, 3, seed=1)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    torch.manual_seed(1111)
    model = nn.Linear(24, 3)
    opt: torch.optim.Optimizer
    opt = torch.optim.Adam(model.parameters()) if optim == "adam" else torch.optim.RMSprop(model.parameters())
    opt.param_groups[0]["weight_decay"] = l2
    fast = logreg._FlatLinear(24, 3, l2, optim)  # type: ignore[arg-type]
    batch = 64
    tables = {size: logreg._nll_grad_table(y, 3, size) for size in (batch, 203 % batch)}
    perm = torch.from_numpy(np.random.RandomState(0).permutation(203))
    for _ in range(3):
        for i in range(0, 203, batch):
            idx = perm[i : i + batch]
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            fast.backward(x[idx], tables[len(idx)][idx])
            fast.step()
            assert torch.equal(fast.weight, model.weight.detach())
            assert torch.equal(fast.bias, model.bias.detach())


@pytest.mark.parametrize("mode", ["fasttest", "test"])
@pytest.mark.parametrize("with_valid", [False, True])
def test_fast_fit_equals_senteval_reference_fit(mode: str, with_valid: bool) -> None:
    x, y = _blobs(160, 16, 3, seed=2)
    xs, ys = _blobs(90, 16, 3, seed=2)  # same centres (same seed), fresh noise
    valid = (xs[:45], ys[:45]) if with_valid else None
    cfg = dataclasses.replace(PARAMETER_SETS[mode], max_epoch=24)  # keep the test short
    a = fit_reference(x, y, 3, 1e-4, cfg, valid, (xs, ys))
    b = fit_fast(x, y, 3, 1e-4, cfg, valid, (xs, ys))
    assert a == b
    assert a.score is not None and a.score > 0.5


def _scripted_accuracies(monkeypatch: pytest.MonkeyPatch, values: list[float]) -> list[float]:
    script = list(values)
    seen: list[float] = []

    def fake(*args: object) -> float:
        seen.append(script.pop(0) if script else 0.0)
        return seen[-1]

    monkeypatch.setattr(logreg, "_fast_accuracy", fake)
    return seen


def test_early_stopping_counter_is_never_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    # tenacity 3, epoch size 2: improvement at checks 1 and 3; non-improving checks 2, 4, 5, 6 count
    # 0 -> 1, then 1 -> 2 -> 3, and check 6 finds the counter at 3 and stops. With a counter reset
    # at check 3 the loop would run a 7th check.
    seen = _scripted_accuracies(monkeypatch, [0.5, 0.4, 0.6, 0.4, 0.4, 0.4, 0.9, 0.9])
    x, y = _blobs(60, 4, 2, seed=3)
    result = fit_fast(x, y, 2, 1e-5, PARAMETER_SETS["fasttest"])
    assert len(seen) == 6
    assert result.best_valid == 0.6 and result.epochs == 12


def test_equal_accuracy_is_not_an_improvement(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scripted_accuracies(monkeypatch, [0.5] * 10)
    x, y = _blobs(60, 4, 2, seed=3)
    cfg = ClassifierConfig(optim="adam", batch_size=64, tenacity=5, epoch_size=4, kfold=10)
    result = fit_fast(x, y, 2, 1e-5, cfg)
    assert len(seen) == cfg.tenacity + 2 and result.epochs == (cfg.tenacity + 2) * 4


def test_separable_problem_stops_after_tenacity_plus_two_checks() -> None:
    # Validation accuracy is 1.0 at the first check and cannot improve afterwards.
    rng = np.random.RandomState(4)
    y = rng.randint(0, 2, 200)
    x = (np.where(y[:, None] == 1, 5.0, -5.0) + 0.1 * rng.randn(200, 3)).astype(np.float32)
    for mode in PARAMETER_SETS:
        cfg = PARAMETER_SETS[mode]
        for fit in (fit_fast, fit_reference):
            result = fit(x, y, 2, 1e-5, cfg, None, (x, y))
            assert result.best_valid == 1.0 and result.score == 1.0
            assert result.epochs == (cfg.tenacity + 2) * cfg.epoch_size


def test_max_epoch_bounds_the_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scripted_accuracies(monkeypatch, [i / 100 for i in range(100)])  # always improving
    x, y = _blobs(60, 4, 2, seed=3)
    cfg = ClassifierConfig(optim="rmsprop", batch_size=16, tenacity=3, epoch_size=4, kfold=5, max_epoch=10)
    result = fit_fast(x, y, 2, 1e-5, cfg)
    assert result.epochs == 12 and len(seen) == 3  # checks at 4, 8 and 12 passes (12 > 10 stops)


def test_classifier_config_validates() -> None:
    with pytest.raises(ConfigError, match="optim"):
        ClassifierConfig(optim="sgd", batch_size=1, tenacity=1, epoch_size=1, kfold=2)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="kfold"):
        ClassifierConfig(optim="adam", batch_size=1, tenacity=1, epoch_size=1, kfold=1)


# --------------------------------------------------------------------------------------------------
# The protocol, parallel == sequential
# --------------------------------------------------------------------------------------------------
def _synthetic_features() -> dict[str, TaskFeatures]:
    x, y = _blobs(150, 8, 2, seed=5, noise=3.0)
    tr, ytr = _blobs(160, 8, 6, seed=6, noise=2.0)
    te, yte = _blobs(60, 8, 6, seed=6, noise=2.0)
    s_tr, s_ytr = _blobs(200, 8, 2, seed=7, noise=3.0)
    s_dev, s_ydev = _blobs(50, 8, 2, seed=7, noise=3.0)
    s_te, s_yte = _blobs(70, 8, 2, seed=7, noise=3.0)
    return {
        "MR": TaskFeatures("MR", 2, {"all": (x, y)}),
        "TREC": TaskFeatures("TREC", 6, {"train": (tr, ytr), "test": (te, yte)}),
        "SST2": TaskFeatures(
            "SST2", 2, {"train": (s_tr, s_ytr), "dev": (s_dev, s_ydev), "test": (s_te, s_yte)}
        ),
    }


def test_protocol_fit_counts() -> None:
    feats = _synthetic_features()
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


def test_parallel_equals_sequential_and_reference() -> None:
    feats = _synthetic_features()
    sequential = classify_tasks(feats, mode="fasttest", workers=1)
    parallel = classify_tasks(feats, mode="fasttest", workers=2)
    assert parallel == sequential
    assert list(parallel) == ["MR", "TREC", "SST2"]
    assert all(0.0 <= v <= 100.0 for v in parallel.values())
    small = {k: feats[k] for k in ("TREC", "SST2")}
    assert classify_tasks(small, mode="fasttest", workers=1, engine="reference") == {
        k: sequential[k] for k in small
    }


# --------------------------------------------------------------------------------------------------
# End to end on a miniature SentEval folder, and bad inputs
# --------------------------------------------------------------------------------------------------
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


def test_unknown_task_or_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown transfer task"):
        evaluate_transfer(_hash_embed, tmp_path, tasks=["MR", "SST5"])
    with pytest.raises(ConfigError, match="mode"):
        evaluate_transfer(_hash_embed, tmp_path, mode="slowtest")
    with pytest.raises(ConfigError, match="workers"):
        classify_tasks(_synthetic_features(), workers=0)


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
    import torch

    from harness.evaluation.transfer import default_workers

    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert default_workers() == 1  # a one-CPU grid trial fits in one process
    finally:
        torch.set_num_threads(saved)
