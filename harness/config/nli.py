"""The ``nli`` corpus, ``corpus/nli-sentences.txt``: built from SNLI by the data README's recipe.

The recipe (../shared/data/README.md): the premises and hypotheses of SNLI 1.0's dev and test
splits, each sentence once, with every sentence that also occurs in an STS12-16, STS-B or SICK file
removed, compared case- and punctuation-insensitively (:func:`normalised`: lower case, punctuation
as a space, runs of spaces as one). The archive is SNLI's own (:data:`SNLI_URL`, checked against
:data:`SNLI_SHA256`); the evaluation sets it is filtered against are the data root's ``senteval/``
files, which the caller lists (the task registry lives a layer above the configuration).

The shared copy was shuffled in an order nobody recorded, so a build cannot reproduce its bytes.
What it reproduces is its content: the same :data:`SENTENCES` sentences, checked by
:data:`SET_SHA256` (the SHA-256 of the sorted sentences, one per line). A built file orders them by
a keyed hash of each sentence (:func:`ordered`), a fixed order that mixes them as a shuffle would;
its run ids differ from those of runs trained on the shared copy (a run id covers the corpus's
bytes). Training reshuffles every epoch with the run's seed either way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

SNLI_URL = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
"""SNLI 1.0, as its authors distribute it."""
SNLI_SHA256 = "afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e"
"""The archive's SHA-256 (as other projects that fetch it check it)."""
SPLITS = ("snli_1.0/snli_1.0_dev.jsonl", "snli_1.0/snli_1.0_test.jsonl")
"""The members read: the dev and test splits, one JSON pair per line (``sentence1``, ``sentence2``)."""
TARGET = "corpus/nli-sentences.txt"
SENTENCES = 25_374
"""How many sentences the recipe gives."""
SET_SHA256 = "bc544168229d03a1896edfdaf356ea296c0f63938f186b77d26e16e501d4bf0c"
"""SHA-256 of the shared copy's sentences, sorted, one per line (:func:`set_sha256`)."""
ORDER_KEY = b"nli-sentences:"
"""The key of the built file's order (:func:`ordered`)."""


def normalised(text: str) -> str:
    """A sentence as the filter compares it: lower case, punctuation as a space, single spaces."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def evaluation_sentences(files: Iterable[Path]) -> set[str]:
    """Every cell of every line of ``files`` (the STS tasks' files: STS12-16, STS-B, SICK, each
    split, as :func:`harness.evaluation.tasks.sts_files` lists them), normalised: their sentences
    and, harmlessly, their scores and labels."""
    out: set[str] = set()
    for path in files:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            out.update(normalised(cell) for cell in line.split("\t"))
    out.discard("")
    return out


def pairs_sentences(lines: Iterable[str]) -> list[str]:
    """The premises and hypotheses of SNLI's JSON lines, stripped, each once, in order of appearance."""
    seen: dict[str, None] = {}
    for line in lines:
        if not line.strip():
            continue
        pair = json.loads(line)
        for key in ("sentence1", "sentence2"):
            sentence = str(pair.get(key) or "").strip()
            if sentence:
                seen.setdefault(sentence, None)
    return list(seen)


def build(sentences: Iterable[str], held_out: set[str]) -> list[str]:
    """The corpus: ``sentences`` less those whose normalised form is in ``held_out``, in
    :func:`ordered` order."""
    return ordered(s for s in sentences if normalised(s) not in held_out)


def ordered(sentences: Iterable[str]) -> list[str]:
    """Distinct sentences in the order of their keyed SHA-256 (:data:`ORDER_KEY`)."""
    return sorted(set(sentences), key=lambda s: hashlib.sha256(ORDER_KEY + s.encode("utf-8")).digest())


def set_sha256(sentences: Iterable[str]) -> str:
    """SHA-256 of the distinct sentences, sorted, one per line: the same for any order of them."""
    text = "".join(f"{s}\n" for s in sorted(set(sentences)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_corpus(path: Path, expected: str = SET_SHA256) -> tuple[bool, str]:
    """Whether ``path`` holds the recipe's sentences (in any order), and a line saying so."""
    if not path.is_file():
        return False, f"{path} not found"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if set_sha256(lines) == expected and len(lines) == len(set(lines)):
        return True, f"the recipe's {len(lines):,} sentences (verified)"
    return False, (
        f"{path} holds {len(lines):,} lines that are not the recipe's {SENTENCES:,} sentences (another "
        "corpus: training takes it, but it is not the profiles' nli corpus)"
    )


__all__ = [
    "SENTENCES",
    "SET_SHA256",
    "SNLI_SHA256",
    "SNLI_URL",
    "SPLITS",
    "TARGET",
    "build",
    "check_corpus",
    "evaluation_sentences",
    "normalised",
    "ordered",
    "pairs_sentences",
    "set_sha256",
]
