"""Where the data lives.

Every command finds the data root the same way: ``--data-dir D``, else ``$HARNESS_DATA``, else
``./data``, else ``../shared/data``. A data root is laid out like ``../shared/data``::

    D/senteval/STS/STS12-en-test/...   (SentEval's own layout)
    D/corpus/nli-sentences.txt         (the default training corpus)
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.config.inputs import CORPUS_MAX_BYTES, check_input_file
from harness.errors import DataError

ENV_VAR = "HARNESS_DATA"
DEFAULT_CORPUS = "corpus/nli-sentences.txt"


def _candidates(data_dir: str | os.PathLike[str] | None) -> list[tuple[str, Path]]:
    if data_dir is not None:
        return [("--data-dir", Path(data_dir))]
    env = os.environ.get(ENV_VAR)
    if env:
        return [(f"${ENV_VAR}", Path(env))]
    return [("./data", Path("data")), ("../shared/data", Path("..") / "shared" / "data")]


def resolve_data_root(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the data root, or raise :class:`DataError` saying where it was looked for."""
    tried = _candidates(data_dir)
    for _, path in tried:
        if path.is_dir():
            return path.resolve()
    where = ", ".join(f"{src} ({p})" for src, p in tried)
    raise DataError(
        f"data directory not found: looked at {where}; pass --data-dir or set {ENV_VAR} to a folder "
        "laid out like shared/data (senteval/, corpus/)"
    )


def senteval_dir(data_root: Path) -> Path:
    """The SentEval task folder inside a data root, checked to exist."""
    path = data_root / "senteval"
    if not path.is_dir():
        raise DataError(f"SentEval data not found: {path} is not a directory")
    return path


def resolve_corpus(corpus: str | os.PathLike[str] | None, data_root: Path | None) -> Path:
    """A corpus file: an explicit path, or ``corpus/nli-sentences.txt`` inside the data root."""
    if corpus is None:
        if data_root is None:
            raise DataError("no corpus given and no data root to find the default corpus in")
        path = data_root / DEFAULT_CORPUS
    else:
        path = Path(corpus)
        if not path.exists() and data_root is not None and (data_root / corpus).exists():
            path = data_root / corpus
    if path.is_dir():
        raise DataError(f"corpus {path} is a folder, not a file (one sentence per line)")
    if not path.exists():
        raise DataError(f"corpus file not found: {path}")
    check_input_file(path, "corpus", CORPUS_MAX_BYTES)  # a FIFO, a device, too large: refused here
    return path.resolve()
