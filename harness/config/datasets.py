"""The papers' data: where it comes from, where it goes under a data root, and what it must hash to.

SimCSE's own download scripts fetch two sets from one Hugging Face dataset repository,
``princeton-nlp/datasets-for-simcse``: ``senteval.tar`` (SentEval's downstream data, its
preprocessing applied: ``SentEval/data/downstream/download_dataset.sh``) and
``wiki1m_for_simcse.txt`` (the 1M Wikipedia sentences the papers train on: ``data/download_wiki.sh``).
:mod:`harness.config.fetch` downloads them; this module is the catalogue and the checks. The third,
``nli`` (the CPU profiles' corpus), is built from SNLI's own archive: :mod:`harness.config.nli`.

The SentEval files' SHA-256 below are those of the copy the harness's evaluation is validated
against (SentEval's own numbers reproduced: docs/correctness.md). The Wikipedia file is checked
against the hub's own SHA-256 of it (the ETag of a large file on the hub is its SHA-256).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HUB_REPO = "princeton-nlp/datasets-for-simcse"
"""The Hugging Face dataset repository SimCSE's download scripts fetch from."""


@dataclass(frozen=True)
class Dataset:
    """One set the harness can fetch.

    Attributes:
        name: what ``harness data fetch`` calls it.
        filename: the file in :data:`HUB_REPO`.
        target: where it goes, relative to the data root (a folder for an archive).
        archive: the file is a tar archive of the target folder's contents.
        description: a line for the user.
    """

    name: str
    filename: str
    target: str
    archive: bool
    description: str


DATASETS: dict[str, Dataset] = {
    "senteval": Dataset(
        "senteval",
        "senteval.tar",
        "senteval",
        True,
        "SentEval's STS and transfer tasks, as SentEval's download script preprocesses them",
    ),
    "wiki1m": Dataset(
        "wiki1m",
        "wiki1m_for_simcse.txt",
        "corpus/wiki1m_for_simcse.txt",
        False,
        "the 1M Wikipedia sentences the papers train on (the paper profile's corpus)",
    ),
    "nli": Dataset(
        "nli",
        "snli_1.0.zip",
        "corpus/nli-sentences.txt",
        False,
        "SNLI's dev and test sentences less the evaluation sets' (the cpu, demo and night profiles' "
        "corpus), built by the data README's recipe: harness/config/nli.py",
    ),
}


SENTEVAL_SHA256: dict[str, str] = json.loads(
    (Path(__file__).with_name("senteval_sha256.json")).read_text(encoding="utf-8")
)
"""SHA-256 of every file of the validated SentEval copy, by its path under ``senteval/``."""

_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The file's SHA-256 (cached per path, size and modification time)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


@dataclass(frozen=True)
class SentEvalCheck:
    """What a data root's ``senteval/`` holds against :data:`SENTEVAL_SHA256`."""

    verified: tuple[str, ...]
    missing: tuple[str, ...]
    different: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.different


def check_senteval(senteval: Path, names: Iterable[str] | None = None) -> SentEvalCheck:
    """Hash ``senteval``'s files (``names``: a subset of :data:`SENTEVAL_SHA256`'s keys)."""
    verified, missing, different = [], [], []
    for name in sorted(names if names is not None else SENTEVAL_SHA256):
        path = senteval / name
        if not path.is_file():
            missing.append(name)
        elif file_sha256(path) != SENTEVAL_SHA256[name]:
            different.append(name)
        else:
            verified.append(name)
    return SentEvalCheck(tuple(verified), tuple(missing), tuple(different))


def data_checksums(corpus: Path, senteval: Path, files: Iterable[Path]) -> dict[str, object]:
    """What a run records of its data: the corpus's SHA-256, and one SHA-256 over the SentEval files it
    reads (their paths under ``senteval/`` and contents), with whether each is the validated copy's."""
    listing = []
    known = True
    for path in sorted(set(files)):
        digest = file_sha256(path) if path.is_file() else "missing"
        name = path.relative_to(senteval).as_posix() if path.is_relative_to(senteval) else path.name
        known = known and SENTEVAL_SHA256.get(name) == digest
        listing.append(f"{name} {digest}")
    summary = hashlib.sha256("\n".join(listing).encode()).hexdigest()
    return {
        "corpus_sha256": file_sha256(corpus) if corpus.is_file() else None,
        "senteval_sha256": summary,
        "senteval_files": len(listing),
        "senteval_validated": known,
    }
