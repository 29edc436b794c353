"""Shared fixtures: the real data root and a small copy of its STS files, and the tiny random encoder.

Plain helpers (data roots, records, fake train functions) are in :mod:`tests.helpers`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.config.paths import resolve_data_root
from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder
from harness.errors import DataError
from tests.helpers import (
    CONFIG_SENTENCES,
    REPO_ROOT,
    SENTS,
    TRAIN_CORPUS,
    TRANSFER_SCORES,
    corpus_text,
    fake_dev_eval,
    fake_final,
    fixture_tables,
    make_corpus_root,
    make_data_root,
)

MINI_LINES = 60
"""Lines kept per STS file in :func:`mini_data_root` (SICK: plus its header)."""


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The data root as the CLI finds it from the repository root ($HARNESS_DATA, ./data, ../shared/data).

    Tests that need the real data skip cleanly when none is found.
    """
    previous = Path.cwd()
    os.chdir(REPO_ROOT)
    try:
        return resolve_data_root(None)
    except DataError as exc:
        pytest.skip(f"no data root: {exc}")
    finally:
        os.chdir(previous)


@pytest.fixture(scope="session")
def mini_data_root(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding the first :data:`MINI_LINES` lines of every STS, STS-B and SICK file.

    Read-only by convention (session-scoped): copy it before changing a file.
    """
    root = tmp_path_factory.mktemp("mini_data")
    source = data_root / "senteval"
    for folder in ("STS", "SICK"):
        for path in sorted((source / folder).rglob("*")):
            if not path.is_file() or path.suffix not in (".txt", ".csv"):
                continue
            target = root / "senteval" / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            keep = MINI_LINES + (1 if folder == "SICK" else 0)
            with path.open("rb") as src:
                head = b"".join(line for _, line in zip(range(keep), src))
            target.write_bytes(head)
    return root


# -- small data roots (tests.helpers makes others) ----------------------------------------------------
@pytest.fixture
def corpus_root(tmp_path: Path) -> Path:
    """A data root holding only the 64-sentence corpus (:data:`tests.helpers.CORPUS_TEXT`): enough to
    plan a grid or build a table, no SentEval data."""
    return make_corpus_root(tmp_path / "data")


@pytest.fixture
def linked_root(mini_data_root: Path, tmp_path: Path) -> Path:
    """The 64-sentence corpus and the mini STS data, linked (read-only by convention): enough for
    smoke runs."""
    return make_data_root(tmp_path / "data", mini_data_root / "senteval", link=True)


@pytest.fixture
def copied_root(mini_data_root: Path, tmp_path: Path) -> Path:
    """The 64-sentence corpus and a writable copy of the mini STS data (a test may break its files)."""
    return make_data_root(tmp_path / "data", mini_data_root / "senteval")


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A file where a test names an output folder (``tmp_path/a_file``)."""
    from harness.atomic import write_text

    return write_text(tmp_path / "a_file", "not a folder\n")


@pytest.fixture
def train_root(tmp_path: Path) -> Path:
    """A data root holding only the training-loop tests' corpus (:data:`tests.helpers.TRAIN_CORPUS`)."""
    return make_corpus_root(tmp_path / "data", corpus_text(TRAIN_CORPUS))


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The training loop's STS-B dev evaluation and final evaluation replaced by small deterministic
    stand-ins (:func:`tests.helpers.fake_dev_eval`, :func:`tests.helpers.fake_final`)."""
    import harness.run.training as train_mod

    monkeypatch.setattr(train_mod, "make_dev_eval", fake_dev_eval)
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: fake_final)


@pytest.fixture
def fake_transfer(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Stand in for harness.evaluation.transfer (accuracies :data:`tests.helpers.TRANSFER_SCORES`);
    the list of its calls (data folder, mode, embedding width)."""
    from harness.evaluation import runner

    calls: list[dict[str, object]] = []

    def evaluate_transfer(embed, senteval_path, mode="fasttest", tasks=None, device=None):
        calls.append(
            {"senteval_path": senteval_path, "mode": mode, "dim": embed(["a b", "c"]).shape, "device": device}
        )
        return {**TRANSFER_SCORES, "avg": sum(TRANSFER_SCORES.values()) / len(TRANSFER_SCORES)}

    monkeypatch.setattr(runner, "evaluate_transfer", evaluate_transfer)  # where the runner calls it
    return calls


# -- tables ------------------------------------------------------------------------------------------
@pytest.fixture()
def rendered(tmp_path: Path) -> list[Any]:
    """The two fixture specs' tables (report_rows, report_sweep) built from the fixture records
    (:func:`tests.helpers.fill_store`) under the smoke profile."""
    return fixture_tables(tmp_path)


# -- the tiny random encoder -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny() -> SentenceEncoder:
    """The tiny random encoder (seed 0) as loaded, one per test module (tests may switch its mode)."""
    return load_encoder("random:tiny", seed=0)


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    """The tiny random encoder (seed 0) in training mode, one per test module."""
    enc = load_encoder("random:tiny", seed=0)
    enc.train()
    return enc


@pytest.fixture(scope="module")
def sents_batch(encoder: SentenceEncoder) -> dict[str, torch.Tensor]:
    """:data:`tests.helpers.SENTS` tokenised by the ``encoder`` fixture (at most 32 tokens)."""
    return encoder.tokenize(SENTS, max_length=32)


@pytest.fixture
def single_thread() -> Iterator[None]:
    """One torch thread for the test: the tiny encoder is faster that way, and on a shared CPU
    intra-op threads fighting other processes make each step ~100x slower."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


# -- typed method parameters ------------------------------------------------------------------------
@pytest.fixture
def record_counts(monkeypatch: pytest.MonkeyPatch) -> Counter[Any]:
    """Counts parameter-record constructions, ``validate`` calls per (record class, width) of SimCSE's
    and WhitenedCSE's records, and encoder width lookups (each width looked up is 64)."""
    import harness.config.settings
    from methods.params import MethodParams
    from methods.simcse import SimCSEParams
    from methods.whitenedcse import WhitenedCSEParams

    seen: Counter[Any] = Counter()
    post_init = MethodParams.__post_init__

    def counting_post_init(self: MethodParams) -> None:
        seen["built", type(self).__name__] += 1
        post_init(self)

    monkeypatch.setattr(MethodParams, "__post_init__", counting_post_init)
    for cls in (SimCSEParams, WhitenedCSEParams):
        original = cls.validate

        def counting_validate(self: Any, hidden_size: int | None = None, _original: Any = original) -> None:
            seen["validate", type(self).__name__, hidden_size] += 1
            _original(self, hidden_size)

        monkeypatch.setattr(cls, "validate", counting_validate)

    def counting_hidden_size_of(name: str | None) -> int:
        seen["hidden_size_of", name] += 1
        return 64

    monkeypatch.setattr(harness.config.settings, "hidden_size_of", counting_hidden_size_of)
    return seen


@pytest.fixture
def config_root(tmp_path: Path) -> Path:
    """The configuration and run-config tests' data root: no SentEval data, ``nli-sentences.txt``
    (40 sentences) and ``wiki1m_for_simcse.txt`` (20)."""
    root = make_corpus_root(tmp_path / "data", corpus_text(CONFIG_SENTENCES))
    (root / "corpus" / "wiki1m_for_simcse.txt").write_text(corpus_text(CONFIG_SENTENCES[:20]))
    return root
