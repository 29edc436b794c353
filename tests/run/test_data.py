"""The corpus and its batches: lines read as they are, empty lines and short corpora named, seeded order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.config.settings import SEED_MAX
from harness.errors import DataError
from harness.run.data import batches, read_corpus, seed_everything


def test_read_corpus(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_bytes(b"one .\r\ntwo .\nthree .\n")
    assert read_corpus(path, 3) == ["one .", "two .", "three ."]
    path.write_bytes(b"one .\ntwo .")  # no final newline
    assert read_corpus(path) == ["one .", "two ."]


def test_a_corpus_with_cr_line_ends_is_read_as_lines(tmp_path: Path) -> None:
    # old Mac editors end lines with a lone CR; other breaks (U+2028, form feed) stay in the sentence
    path = tmp_path / "c.txt"
    path.write_bytes(b"one .\rtwo .\rthree .\r")
    assert read_corpus(path, 3) == ["one .", "two .", "three ."]
    path.write_text("a\u2028b .\r\nc\x0cd .\re .", encoding="utf-8", newline="")
    assert read_corpus(path) == ["a\u2028b .", "c\x0cd .", "e ."]
    path.write_bytes(b"one .\r\rtwo .\r")
    with pytest.raises(DataError, match=r"line 2 is empty \(1 empty"):
        read_corpus(path)


def test_empty_lines_are_a_data_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("one .\ntwo .\n\nthree .\n   \n")
    with pytest.raises(DataError, match=r"line 3 is empty \(2 empty"):
        read_corpus(path)


def test_too_few_sentences_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("one .\ntwo .\n")
    with pytest.raises(DataError, match="fewer than one batch of 8"):
        read_corpus(path, 8)
    path.write_bytes(b"\xff\xfe bad")
    with pytest.raises(DataError, match="UTF-8"):
        read_corpus(path)


def test_batches_are_seeded_full_and_reshuffled() -> None:
    sentences = [str(i) for i in range(10)]
    stream = batches(sentences, 4, seed=1)
    first = [next(stream) for _ in range(4)]  # two epochs of two full batches (2 dropped each)
    assert all(len(b) == 4 for b in first)
    assert len(set(first[0] + first[1])) == 8
    assert first[:2] != first[2:]
    again = batches(sentences, 4, seed=1)
    assert [next(again) for _ in range(4)] == first
    other = batches(sentences, 4, seed=2)
    assert [next(other) for _ in range(4)] != first


def test_seeding_takes_the_settings_whole_seed_range_as_it_is() -> None:
    for seed in (0, SEED_MAX):  # the bound the settings check: NumPy's own range, no wrapping needed
        seed_everything(seed)
        assert np.random.randint(2**31) == np.random.RandomState(seed).randint(2**31)
