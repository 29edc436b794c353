"""Data-root lookup order and the command line's handling of user errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
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


def test_user_error_is_one_line_exit_2(capsys):
    assert main(["methods", "no-such-method"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("harness methods: error: unknown method 'no-such-method'; registered: ")
    assert "simcse" in err[0]
