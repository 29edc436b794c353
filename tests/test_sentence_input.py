"""The method contract's input transform (``Method.sentence_input``) in the training loop.

A method whose sentence embedding needs another input than the sentence (PromptBERT: a template
around it, read at its [MASK] by the method's sentence head) returns ``text(sentence)``; the loop
embeds that text through the head in the dev probes and the final tasks, never shares its step-0
probe, and refuses a method that returns a text but no head. Methods without one embed the sentence
itself, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.run.training as train_mod
from harness.config.run_config import resolve_config
from harness.encoder.model import SentenceEncoder
from harness.encoder.saved import SENTENCE_HEAD_FILE
from harness.run.probe_cache import CACHE_DIR
from harness.run.training import train_run
from harness.store.run_store import RunStore
from methods.simcse import SimCSE

PROBE = [
    "a man is playing a guitar .",
    "a man plays the guitar",
    "a woman slices an onion .",
    "the cat sleeps",
]
CORPUS = [
    f"the {w} number {i} walks to the {v} ."
    for i, (w, v) in enumerate(zip(["dog", "cat"] * 40, ["park", "shop"] * 40))
]


@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """A fake dev probe and final evaluation, and every text the encoder embeds, recorded."""
    seen: dict[str, Any] = {"texts": [], "probe": 0, "final": 0}

    class Probe:
        def __call__(self, embed: Any) -> dict[str, float]:
            x = embed(list(PROBE)).astype(np.float64)
            seen["probe"] += 1
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            return {"stsb_dev": float(100 * (x[0] @ x[1] - x[2] @ x[3])), "align": 0.0, "uniform": 0.0}

        def cache_token(self) -> str:
            return "sentence-input-test-probe"

    def final(embed: Any, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        embed(list(PROBE))
        seen["final"] += 1
        return {"sts": {"avg": 0.0}}

    original = SentenceEncoder.embed

    def recording(self: SentenceEncoder, sentences: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        seen["texts"].append(list(sentences))
        return original(self, sentences, *args, **kwargs)

    monkeypatch.setattr(train_mod, "make_probe", lambda data_root, token_lengths=None: Probe())
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final)
    monkeypatch.setattr(SentenceEncoder, "embed", recording)
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "nli-sentences.txt").write_text("\n".join(CORPUS) + "\n")
    seen["root"] = root
    return seen


def test_probes_and_final_tasks_embed_the_template_through_the_head(loop, tmp_path) -> None:
    root = loop["root"]
    config = resolve_config("promptbert", None, "smoke", {"max_steps": 2, "eval_every": 1}, data_root=root)
    store = RunStore(tmp_path / "runs")
    record = train_run(config, root, store, log=None, save_checkpoint=True)
    assert record["status"] == "finished"
    assert (loop["probe"], loop["final"]) == (3, 1)
    expected = [
        'This sentence of "a man is playing a guitar ." means[MASK].',
        'This sentence of "a man plays the guitar." means[MASK].',  # evaluation.py adds the full stop
        'This sentence of "a woman slices an onion ." means[MASK].',
        'This sentence of "the cat sleeps." means[MASK].',
    ]
    assert loop["texts"] == [expected] * 4  # three probes, one final evaluation
    assert "step0_probe_cached" not in record
    assert not any((store.cache_root / CACHE_DIR).glob("**/*"))  # a head's step 0 is not shared
    assert (store.checkpoint_dir(config.run_id()) / SENTENCE_HEAD_FILE).exists()  # export/eval refuse it


def test_a_method_without_an_input_embeds_the_sentences_themselves(loop, tmp_path) -> None:
    root = loop["root"]
    config = resolve_config("simcse", None, "smoke", {"max_steps": 1, "eval_every": 1}, data_root=root)
    train_run(config, root, RunStore(tmp_path / "runs"), log=None)
    assert loop["texts"] == [PROBE] * 3


class TextWithoutHead(SimCSE):
    def sentence_input(self) -> Any:
        return lambda sentence: f"[{sentence}]"


def test_a_text_without_a_head_stops_the_run_before_training(loop, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(train_mod, "get_method", lambda name: TextWithoutHead)
    root = loop["root"]
    config = resolve_config("simcse", None, "smoke", {"max_steps": 1, "eval_every": 1}, data_root=root)
    with pytest.raises(RuntimeError, match="sentence_head"):
        train_run(config, root, RunStore(tmp_path / "runs"), log=None)
    assert loop["texts"] == []
