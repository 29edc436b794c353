"""The datasets the harness fetches and checks (harness.config.datasets): a SentEval folder against the
validated copy's checksums, and what a run records of its data."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.config.datasets import (
    DATASETS,
    SENTEVAL_SHA256,
    SentEvalCheck,
    check_senteval,
    data_checksums,
    file_sha256,
)


def test_a_run_records_the_checksums_of_its_data(data_root: Path) -> None:
    senteval = data_root / "senteval"
    files = [
        senteval / "STS" / "STSBenchmark" / "sts-dev.csv",
        senteval / "STS" / "STS12-en-test" / "STS.gs.MSRpar.txt",
    ]
    sums = data_checksums(data_root / "corpus" / "nli-sentences.txt", senteval, files)
    assert (
        sums["corpus_sha256"]
        == hashlib.sha256((data_root / "corpus" / "nli-sentences.txt").read_bytes()).hexdigest()
    )
    assert sums["senteval_files"] == 2 and sums["senteval_validated"] is True
    other = data_checksums(data_root / "corpus" / "nli-sentences.txt", senteval, files[:1])
    assert other["senteval_sha256"] != sums["senteval_sha256"]


def test_senteval_files_are_verified_missing_or_different(data_root: Path, tmp_path: Path) -> None:
    name = "STS/STSBenchmark/sts-dev.csv"
    assert check_senteval(data_root / "senteval", [name]) == SentEvalCheck((name,), (), ())
    copy = tmp_path / "senteval" / name
    copy.parent.mkdir(parents=True)
    copy.write_bytes((data_root / "senteval" / name).read_bytes() + b"one more line\n")
    other = "STS/STS12-en-test/STS.gs.MSRpar.txt"
    checked = check_senteval(tmp_path / "senteval", [name, other])
    assert checked == SentEvalCheck((), (other,), (name,)) and not checked.ok
    assert file_sha256(copy) == hashlib.sha256(copy.read_bytes()).hexdigest()
    assert set(DATASETS) == {"senteval", "wiki1m", "nli"} and len(SENTEVAL_SHA256) == 77
