"""Where the data root and the corpus are found: an explicit folder, ``$HARNESS_DATA``, ``./data``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.paths import ENV_VAR, resolve_corpus, resolve_data_root
from harness.errors import DataError


def test_data_root_order(tmp_path, monkeypatch):
    explicit = tmp_path / "explicit"
    env = tmp_path / "env"
    explicit.mkdir()
    env.mkdir()
    monkeypatch.setenv(ENV_VAR, str(env))
    assert resolve_data_root(explicit) == explicit.resolve()
    assert resolve_data_root(None) == env.resolve()
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    assert resolve_data_root(None) == (tmp_path / "data").resolve()


def test_missing_data_root_says_where_it_looked(tmp_path):
    with pytest.raises(DataError, match="--data-dir"):
        resolve_data_root(tmp_path / "nope")


def test_corpus_lookup(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "nli-sentences.txt").write_text("a\nb\n")
    assert resolve_corpus(None, tmp_path) == (tmp_path / "corpus" / "nli-sentences.txt").resolve()
    with pytest.raises(DataError, match="corpus file not found"):
        resolve_corpus(Path("missing.txt"), tmp_path)
