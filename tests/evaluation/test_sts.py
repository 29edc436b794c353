"""STS readers, scoring and the two batching paths, against the real files and a slow reference."""

from __future__ import annotations

import functools
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from harness.errors import ConfigError, DataError
from harness.evaluation.reference import SENTEVAL_STS_MINILM as REFERENCE
from harness.evaluation.sts import (
    STS_TASKS,
    STS_YEARS,
    DistinctEmbedder,
    check_tasks,
    cosine_scores,
    evaluate_sts,
    load_sts_task,
    read_sickr,
    read_sts_subset,
    read_stsb,
    run_sts,
    table_average,
)

TOLERANCE = 0.02


@functools.cache
def _word_vector(word: str) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(16).astype(np.float32)


def bag_of_words(sentences: list[str]) -> np.ndarray:
    """A batch-independent toy encoder ``[n, 16]``: the sum of per-word random vectors (empty -> 0)."""
    out = np.zeros((len(sentences), 16), dtype=np.float32)
    for i, sentence in enumerate(sentences):
        for word in sentence.split():
            out[i] += _word_vector(word)
    return out


@pytest.fixture(scope="module")
def senteval(data_root: Path) -> Path:
    return data_root / "senteval"


@pytest.fixture(scope="module")
def mini_senteval(mini_data_root: Path) -> Path:
    return mini_data_root / "senteval"


# -- readers on the real files -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "pairs"), [("STS12", 3108), ("STS13", 1500), ("STS14", 3750), ("STS15", 3000), ("STS16", 1186)]
)
def test_sts_year_pair_counts(senteval: Path, task: str, pairs: int) -> None:
    subsets = load_sts_task(senteval, task)
    assert list(subsets) == list(STS_YEARS[task][1])
    assert sum(len(p) for p in subsets.values()) == pairs


@pytest.mark.parametrize(
    ("reader", "counts"),
    [
        (read_stsb, {"train": 5749, "dev": 1500, "test": 1379}),
        (read_sickr, {"train": 4500, "dev": 500, "test": 4927}),
    ],
)
def test_split_pair_counts(senteval: Path, reader, counts: dict[str, int]) -> None:
    for split, n in counts.items():
        pairs = reader(senteval, split)
        assert len(pairs) == len(pairs.sent1) == len(pairs.sent2) == n
        assert pairs.gold.dtype == np.float64


def test_sts_subset_is_filtered_and_sorted(senteval: Path) -> None:
    year_dir = senteval / "STS" / "STS16-en-test"
    pairs = read_sts_subset(year_dir, "headlines")
    gold_lines = (year_dir / "STS.gs.headlines.txt").read_text(encoding="utf-8").splitlines()
    assert len(pairs) == sum(1 for line in gold_lines if line != "") == 249
    keys = [(len(a.split()), len(b.split()), g) for a, b, g in zip(pairs.sent1, pairs.sent2, pairs.gold)]
    assert keys == sorted(keys)


def test_stable_sort_keeps_file_order_on_ties(tmp_path: Path) -> None:
    (tmp_path / "STS.input.x.txt").write_text("b b\tc\na a\tc\nz\tq q\n", encoding="utf-8")
    (tmp_path / "STS.gs.x.txt").write_text("1\n1\n0.5\n", encoding="utf-8")
    pairs = read_sts_subset(tmp_path, "x")
    assert pairs.sent1 == ("z", "b b", "a a")
    assert pairs.gold.tolist() == [0.5, 1.0, 1.0]


def test_sentences_are_whitespace_normalised(senteval: Path) -> None:
    for pairs in (read_stsb(senteval, "test"), read_sickr(senteval, "test")):
        for sentence in (*pairs.sent1, *pairs.sent2):
            assert sentence == " ".join(sentence.split())
    # SICK's test file ends its lines with CRLF: nothing of it may reach the gold or the sentences.
    sick = read_sickr(senteval, "test")
    assert not any("\r" in s for s in sick.sent2)


def test_unknown_task_and_split() -> None:
    with pytest.raises(ConfigError, match="STS17"):
        check_tasks(["STS17"])
    with pytest.raises(ConfigError, match="valid"):
        read_stsb(Path("."), "valid")
    assert check_tasks(["SICKRelatedness", "STS12", "STS12"]) == ("STS12", "SICKRelatedness")


# -- malformed and missing files (copies in tmp_path; shared data is never written) --------------


def _copy_year(senteval: Path, tmp_path: Path, subset: str = "MSRpar") -> Path:
    year = tmp_path / "STS12-en-test"
    year.mkdir()
    for kind in ("input", "gs"):
        shutil.copy(senteval / "STS" / "STS12-en-test" / f"STS.{kind}.{subset}.txt", year)
    return year


def _edit_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def test_malformed_sts_input_line(senteval: Path, tmp_path: Path) -> None:
    year = _copy_year(senteval, tmp_path)
    _edit_line(year / "STS.input.MSRpar.txt", 3, "one\ttwo\tthree")
    with pytest.raises(DataError, match=r"STS\.input\.MSRpar\.txt:3: expected 2 tab-separated"):
        read_sts_subset(year, "MSRpar")


def test_malformed_sts_gold_line(senteval: Path, tmp_path: Path) -> None:
    year = _copy_year(senteval, tmp_path)
    _edit_line(year / "STS.gs.MSRpar.txt", 7, "four point five")
    with pytest.raises(DataError, match=r"STS\.gs\.MSRpar\.txt:7: gold score 'four point five'"):
        read_sts_subset(year, "MSRpar")


def test_sts_files_of_different_length(senteval: Path, tmp_path: Path) -> None:
    year = _copy_year(senteval, tmp_path)
    gold = year / "STS.gs.MSRpar.txt"
    gold.write_text("\n".join(gold.read_text(encoding="utf-8").splitlines()[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"750 lines but .*749"):
        read_sts_subset(year, "MSRpar")


def test_missing_and_undecodable_files(senteval: Path, tmp_path: Path) -> None:
    year = _copy_year(senteval, tmp_path)
    with pytest.raises(DataError, match=r"not found: .*STS\.input\.MSRvid\.txt"):
        read_sts_subset(year, "MSRvid")
    path = year / "STS.input.MSRpar.txt"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\n\xff", 1))
    with pytest.raises(DataError, match=r"STS\.input\.MSRpar\.txt:2: not valid UTF-8"):
        read_sts_subset(year, "MSRpar")
    with pytest.raises(DataError, match="not found"):
        run_sts(bag_of_words, tmp_path, ["STS12"])


def test_malformed_stsb_and_sick_lines(senteval: Path, tmp_path: Path) -> None:
    stsb = tmp_path / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    shutil.copy(senteval / "STS" / "STSBenchmark" / "sts-dev.csv", stsb)
    _edit_line(stsb / "sts-dev.csv", 12, "main-captions\tMSRvid\t2012test\t0001\t5.000\tonly one sentence")
    with pytest.raises(DataError, match=r"sts-dev\.csv:12: expected at least 7"):
        read_stsb(tmp_path, "dev")
    sick = tmp_path / "SICK"
    sick.mkdir()
    shutil.copy(senteval / "SICK" / "SICK_trial.txt", sick)
    _edit_line(sick / "SICK_trial.txt", 5, "9\ta b\tc d\tn/a\tNEUTRAL")
    with pytest.raises(DataError, match=r"SICK_trial\.txt:5: gold score 'n/a'"):
        read_sickr(tmp_path, "dev")


# -- scoring -------------------------------------------------------------------------------------


def test_cosine_scores_match_float64_and_zero_vectors() -> None:
    rng = np.random.default_rng(0)
    u = rng.standard_normal((50, 8)).astype(np.float32)
    v = rng.standard_normal((50, 8)).astype(np.float32)
    u[3] = 0.0
    v[4, 2] = np.nan
    got = cosine_scores(u, v)
    assert got.dtype == np.float32
    u64, v64 = np.nan_to_num(u.astype(np.float64)), np.nan_to_num(v.astype(np.float64))
    with np.errstate(invalid="ignore"):
        want = np.nan_to_num((u64 * v64).sum(1) / np.linalg.norm(u64, axis=1) / np.linalg.norm(v64, axis=1))
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert got[3] == 0.0
    assert np.isfinite(got).all()


def test_table_average_rounds_first() -> None:
    assert table_average([75.064, 76.456]) == pytest.approx((75.06 + 76.46) / 2, abs=1e-12)
    reference = [REFERENCE[t] for t in STS_TASKS]
    assert round(table_average(reference), 2) == REFERENCE["avg"]


def _senteval_reference(senteval: Path, embed, task: str) -> float:
    """SentEval's STS loop, written out independently from the protocol (slow and literal)."""
    if task in STS_YEARS:
        folder, subsets = STS_YEARS[task]
        all_sys: list[float] = []
        all_gold: list[float] = []
        for name in subsets:
            base = senteval / "STS" / folder
            with open(base / f"STS.input.{name}.txt", encoding="utf8") as f:
                sent1, sent2 = zip(*[line.split("\t") for line in f.read().splitlines()])
            with open(base / f"STS.gs.{name}.txt", encoding="utf8") as f:
                raw = np.array(f.read().splitlines())
            keep = raw != ""
            gold = [float(x) for x in raw[keep]]
            s1 = [s.split() for s, k in zip(sent1, keep) if k]
            s2 = [s.split() for s, k in zip(sent2, keep) if k]
            data = sorted(zip(s1, s2, gold), key=lambda z: (len(z[0]), len(z[1]), z[2]))
            for start in range(0, len(data), 128):
                chunk = data[start : start + 128]
                e1 = embed([" ".join(z[0]) for z in chunk])
                e2 = embed([" ".join(z[1]) for z in chunk])
                for k in range(len(chunk)):
                    a, b = np.nan_to_num(e1[k]), np.nan_to_num(e2[k])
                    with np.errstate(invalid="ignore", divide="ignore"):
                        all_sys.append(
                            np.nan_to_num(np.dot(a, b) / (np.sqrt(np.dot(a, a)) * np.sqrt(np.dot(b, b))))
                        )
                all_gold += [z[2] for z in chunk]
        return 100 * spearmanr(all_sys, all_gold)[0]
    if task == "STSBenchmark":
        path, header, cols = senteval / "STS" / "STSBenchmark" / "sts-test.csv", False, (5, 6, 4)
    else:
        path, header, cols = senteval / "SICK" / "SICK_test_annotated.txt", True, (1, 2, 3)
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if header and i == 0:
                continue
            text = line.strip().split("\t")
            rows.append((text[cols[0]].split(), text[cols[1]].split(), float(text[cols[2]])))
    sys_scores = []
    for start in range(0, len(rows), 128):
        chunk = rows[start : start + 128]
        e1 = embed([" ".join(r[0]) for r in chunk])
        e2 = embed([" ".join(r[1]) for r in chunk])
        sys_scores += list(cosine_scores(e1, e2))
    return 100 * spearmanr(sys_scores, [r[2] for r in rows])[0]


def test_both_paths_equal_a_literal_reference(mini_senteval: Path) -> None:
    fast = run_sts(bag_of_words, mini_senteval)
    exact = run_sts(bag_of_words, mini_senteval, exact_batches=True)
    for task in STS_TASKS:
        want = _senteval_reference(mini_senteval, bag_of_words, task)
        # A batch-independent encoder: the two paths and the reference agree to float rounding.
        assert fast.scores[task] == pytest.approx(want, abs=1e-9)
        assert exact.scores[task] == pytest.approx(want, abs=1e-9)
    assert fast.scores["avg"] == table_average(fast.scores[t] for t in STS_TASKS)
    assert set(fast.scores) == {*STS_TASKS, "avg"}
    assert fast.details["STS12"]["all"]["spearman"] == fast.scores["STS12"]
    assert set(fast.details["STS12"]) == {*STS_YEARS["STS12"][1], "all", "mean", "wmean"}
    assert fast.sentences_embedded < exact.sentences_embedded


def test_exact_path_makes_senteval_calls(mini_senteval: Path) -> None:
    calls: list[list[str]] = []

    def recording(sentences: list[str]) -> np.ndarray:
        calls.append(sentences)
        return bag_of_words(sentences)

    run_sts(recording, mini_senteval, ["STSBenchmark"], exact_batches=True, batch_size=16)
    pairs = read_stsb(mini_senteval, "test")
    expected = []
    for start in range(0, len(pairs), 16):
        expected += [list(pairs.sent1[start : start + 16]), list(pairs.sent2[start : start + 16])]
    assert calls == expected


def test_distinct_embedder_embeds_each_sentence_once() -> None:
    calls: list[list[str]] = []

    def recording(sentences: list[str]) -> np.ndarray:
        calls.append(sentences)
        return bag_of_words(sentences)

    sentences = ["a b c", "a", "a b c", "x y", "", "a"]
    lengths = {"": 2, "a": 3, "x y": 4, "a b c": 5}
    index, emb = DistinctEmbedder(recording, batch_size=2, token_lengths=lambda ss: [lengths[s] for s in ss])(
        sentences
    )
    assert calls == [["", "a"], ["x y", "a b c"]]
    assert emb.shape == (4, 16)
    np.testing.assert_array_equal(emb[index["x y"]], bag_of_words(["x y"])[0])
    with pytest.raises(ConfigError, match="counts"):
        DistinctEmbedder(recording, token_lengths=lambda ss: [1])(sentences)
    with pytest.raises(ConfigError, match="shape"):
        DistinctEmbedder(lambda ss: np.zeros((1, 3)))(sentences)


def test_evaluate_sts_top_level_contract(mini_senteval: Path) -> None:
    scores = evaluate_sts(bag_of_words, mini_senteval, ["STS13", "SICKRelatedness"])
    assert list(scores) == ["STS13", "SICKRelatedness", "avg"]
    assert all(isinstance(v, float) for v in scores.values())


def test_packaged_encoder_paths_agree(mini_senteval: Path) -> None:
    """The real encoder: the length-sorted distinct path against SentEval's own batching."""
    from harness.encoder.loading import load_encoder
    from harness.evaluation.runner import encoder_functions

    embed, token_lengths = encoder_functions(load_encoder(None), "cls_before_pooler")
    tasks = ["STS16", "STSBenchmark"]
    fast = run_sts(embed, mini_senteval, tasks, token_lengths=token_lengths)
    exact = run_sts(embed, mini_senteval, tasks, exact_batches=True)
    for task in tasks:
        assert fast.scores[task] == pytest.approx(exact.scores[task], abs=0.01)


# -- SentEval's published numbers on this data (full data, packaged encoder: minutes of CPU) -----


@pytest.mark.slow
@pytest.mark.parametrize("exact_batches", [False, True], ids=["harness", "senteval-batches"])
def test_reference_values(senteval: Path, exact_batches: bool) -> None:
    from harness.encoder.loading import load_encoder
    from harness.evaluation.runner import encoder_functions

    embed, token_lengths = encoder_functions(load_encoder(None), "cls_before_pooler")
    scores = evaluate_sts(embed, senteval, exact_batches=exact_batches, token_lengths=token_lengths)
    for task, want in REFERENCE.items():
        assert scores[task] == pytest.approx(want, abs=TOLERANCE), task


# -- STS12-16 aggregates ------------------------------------------------------------------------------
def test_year_aggregates_by_hand() -> None:
    from harness.evaluation.sts import _year_details

    # subset a: 3 pairs, perfectly ranked (+100); subset b: 4 pairs, reversed (-100)
    a = (np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0]))
    b = (np.array([0.1, 0.2, 0.3, 0.4]), np.array([4.0, 3.0, 2.0, 1.0]))
    details = _year_details({"a": a, "b": b})
    assert details["a"]["spearman"] == pytest.approx(100.0)
    assert details["b"]["spearman"] == pytest.approx(-100.0)
    assert details["mean"]["spearman"] == pytest.approx(0.0)  # (100 - 100) / 2
    assert details["wmean"]["spearman"] == pytest.approx((3 * 100 - 4 * 100) / 7)  # -14.29
    # "all": one Spearman over the 7 pairs together; by hand, pred ranks 1.5 3.5 5.5 1.5 3.5 5.5 7
    # against gold ranks 1.5 3.5 5.5 7 5.5 3.5 1.5
    pred = [1.5, 3.5, 5.5, 1.5, 3.5, 5.5, 7.0]
    gold = [1.5, 3.5, 5.5, 7.0, 5.5, 3.5, 1.5]
    assert details["all"]["spearman"] == pytest.approx(100 * np.corrcoef(pred, gold)[0, 1])
    assert details["all"]["n"] == 7


def test_evaluation_record_keeps_all_three_aggregates(mini_senteval: Path) -> None:
    from harness.evaluation.runner import EvaluationReport

    sts = run_sts(bag_of_words, mini_senteval)
    report = EvaluationReport(results={"sts": sts.scores}, details={"sts": sts.details})
    record = report.record()
    assert record["sts"] == sts.scores  # STS12 = "all", unchanged for old readers
    assert set(record["sts_aggregates"]) == set(STS_YEARS)
    for year, (_, subsets) in STS_YEARS.items():
        per = [sts.details[year][s]["spearman"] for s in subsets]
        sizes = [sts.details[year][s]["n"] for s in subsets]
        agg = record["sts_aggregates"][year]
        assert agg["all"] == sts.scores[year]
        assert agg["mean"] == pytest.approx(sum(per) / len(per))
        assert agg["wmean"] == pytest.approx(sum(p * n for p, n in zip(per, sizes)) / sum(sizes))
    assert "sts_aggregates" not in EvaluationReport(results={"transfer": {"MR": 1.0}}).record()
