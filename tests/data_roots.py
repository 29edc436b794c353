"""Small data roots for command tests: a 64-sentence corpus, and SentEval files copied or absent."""

from __future__ import annotations

import shutil
from pathlib import Path

CORPUS_TEXT = "".join(f"fixture sentence number {i} for the corpus.\n" for i in range(64))


def make_data_root(folder: Path, senteval_from: Path | None = None) -> Path:
    """``folder`` laid out like shared/data: ``corpus/nli-sentences.txt`` (:data:`CORPUS_TEXT`) and
    ``senteval/``, a copy of ``senteval_from`` (a writable one a test may break) or else empty."""
    (folder / "corpus").mkdir(parents=True)
    (folder / "corpus" / "nli-sentences.txt").write_text(CORPUS_TEXT)
    if senteval_from is None:
        (folder / "senteval").mkdir()
    else:
        shutil.copytree(senteval_from, folder / "senteval")
    return folder
