"""The configuration tests' data root: two small corpora, no SentEval data."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import CONFIG_SENTENCES, corpus_text, make_corpus_root


@pytest.fixture
def config_root(tmp_path: Path) -> Path:
    """A data root with ``nli-sentences.txt`` (40 sentences) and ``wiki1m_for_simcse.txt`` (20)."""
    root = make_corpus_root(tmp_path / "data", corpus_text(CONFIG_SENTENCES))
    (root / "corpus" / "wiki1m_for_simcse.txt").write_text(corpus_text(CONFIG_SENTENCES[:20]))
    return root
