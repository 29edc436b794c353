"""The training loop on the tiny random encoder (seconds per run).

The STS-B dev evaluation and the final evaluation are replaced by small deterministic stand-ins (a
function of the embeddings of four fixed sentences, ``tests.helpers.fake_dev_eval``), so these tests
exercise the loop, not the evaluator; one test (slow) runs the real dev evaluation. A method's own
sentence input is here; a run's end in tests/run/test_final.py, its evaluation points in
tests/run/test_evaluation_point.py, its losses in tests/run/test_trajectory.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness.run.training as train_mod
from harness.encoder.model import SentenceEncoder
from harness.encoder.saved import SENTENCE_HEAD_FILE
from harness.errors import ConfigError, DataError, TrainingError
from harness.run.dev_cache import CACHE_DIR
from harness.run.training import train_run
from harness.store.run_config import resolve_config
from harness.store.run_store import RunStore
from methods.simcse import SimCSE
from tests.helpers import DEV_SENTENCES, dev_scores, final_with, smoke_config


def test_smoke_run_end_to_end_and_deterministic(fakes: None, train_root: Path, tmp_path: Path) -> None:
    config = smoke_config(train_root)
    store = RunStore(tmp_path / "runs")
    lines: list[str] = []
    record = train_run(config, train_root, store, device="cpu", log=lines.append)
    assert record["status"] == "finished" and record["error"] is None
    assert record["run_id"] == config.run_id() and record["group_id"] == config.config_id()
    assert record["config"] == config.to_dict()
    assert [p["step"] for p in record["trajectory"]] == [0, 2, 4]
    first = record["trajectory"][0]
    assert first["loss"] is None and first["lr"] == pytest.approx(3e-5)
    for point in record["trajectory"][1:]:
        assert math.isfinite(point["loss"]) and {"stsb_dev", "align", "uniform", "lr"} <= set(point)
    assert record["trajectory"][-1]["lr"] == 0.0
    best = max(record["trajectory"][1:], key=lambda p: p["stsb_dev"])
    assert (record["best_step"], record["best_stsb_dev"]) == (best["step"], best["stsb_dev"])
    assert record["final"]["tasks"] == "sts" and record["final"]["mode"] == "fasttest"
    for key in ("wall_time_s", "train_time_s", "eval_time_s"):
        assert record[key] > 0
    # the first step (compilation, warm-up) is part of the training time; each dev evaluation is timed
    assert 0 < record["first_step_s"] <= record["train_time_s"]
    dev_evals = [p["probe_s"] for p in record["trajectory"]]
    assert all(s >= 0 for s in dev_evals) and sum(dev_evals) <= record["eval_time_s"]
    if Path("/proc/self/status").exists():  # the run's peak resident memory (harness.grid.plan.memory)
        assert 50 < record["peak_rss_mb"] < 64 * 1024
    assert record["started_at"] and record["finished_at"] and record["host"] and record["code_version"]
    assert store.load(config.run_id()) == json.loads(json.dumps(record))
    assert store.finished_ids() == {config.run_id()}
    assert any("step 4/4" in line for line in lines)

    again = train_run(config, train_root, None, device="cpu", log=None)
    strip = ("elapsed_s", "probe_s")
    assert [{k: v for k, v in p.items() if k not in strip} for p in again["trajectory"]] == [
        {k: v for k, v in p.items() if k not in strip} for p in record["trajectory"]
    ]
    assert again["final"] == record["final"]


def test_zero_steps_only_evaluates(fakes: None, train_root: Path) -> None:
    record = train_run(smoke_config(train_root, max_steps=0), train_root, log=None)
    assert [p["step"] for p in record["trajectory"]] == [0]
    assert record["best_step"] == 0 and record["status"] == "finished"


def test_bad_corpus_fails_the_record(fakes: None, train_root: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "short.txt"
    corpus.write_text("one .\ntwo .\n")
    config = smoke_config(train_root, corpus=str(corpus))
    store = RunStore(tmp_path / "runs")
    with pytest.raises(DataError, match="fewer than one batch"):
        train_run(config, train_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and "fewer than one batch" in saved["error"]


def test_what_the_encoder_and_corpus_cannot_give_stops_the_run_before_step_0(
    fakes: None, train_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load = train_mod.load_encoder

    def no_pooler(name: str, device: str = "cpu", seed: int = 0) -> SentenceEncoder:
        encoder = load(name, device, seed=seed)
        model: Any = encoder.model
        model.pooler = None
        return encoder

    lines: list[str] = []
    monkeypatch.setattr(train_mod, "load_encoder", no_pooler)
    with pytest.raises(ConfigError, match=r"^train_pooler 'cls' reads the model's pooler layer"):
        train_run(smoke_config(train_root, train_pooler="cls"), train_root, log=lines.append)
    assert not any("step 0/" in line for line in lines)  # before step 0's dev evaluation, not at a step
    monkeypatch.setattr(train_mod, "load_encoder", load)
    too_many = smoke_config(train_root, post_whiten="pca", post_whiten_sentences=81)  # 80 sentences
    with pytest.raises(ConfigError, match=r"^post_whiten_sentences 81 is more than the 80 sentences"):
        train_run(too_many, train_root, log=lines.append)


@pytest.mark.slow
def test_real_dev_evaluation_when_the_evaluator_exists(train_root: Path) -> None:
    from harness.config.paths import resolve_data_root

    try:
        real_root = resolve_data_root(None)
    except Exception:
        pytest.skip("no data root with SentEval data")
    config = smoke_config(train_root, max_steps=2, eval_every=2, final_tasks="none")
    record = train_run(config, real_root, log=None)
    for point in record["trajectory"]:
        assert -100 <= point["stsb_dev"] <= 100 and point["align"] >= 0 and point["uniform"] <= 0


def test_records_carry_provenance_schema_and_method_notes(
    fakes: None, train_root: Path, tmp_path: Path
) -> None:
    import transformers

    from harness.config.hardware import cpu_id, cpu_model
    from harness.store.record import SCHEMA_VERSION

    config = smoke_config(train_root, "whitenedcse", max_steps=2, eval_every=2)
    assert config.threads == 1
    record = train_run(config, train_root, RunStore(tmp_path / "runs"), num_threads=2, log=None)
    assert record["schema_version"] == SCHEMA_VERSION == 4
    prov = record["provenance"]
    assert prov is not None
    assert prov["threads"] == 1  # the config's thread count wins over the caller's
    assert prov["torch"] == torch.__version__ and prov["transformers"] == transformers.__version__
    assert prov["numpy"] == np.__version__ and prov["python"].count(".") == 2
    assert prov["device"] == "cpu" and prov["device_name"] == cpu_model() and prov["gpu_name"] is None
    assert prov.get("cpu_id") == cpu_id()
    assert isinstance(prov["code_dirty"], bool | None)
    assert record["method_notes"] == {"groups": "32 groups of 2 channels at d=64"}


def test_bf16_on_a_cpu_that_emulates_it_is_announced(
    fakes: None, train_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 40.0)
    train_run(
        smoke_config(train_root, max_steps=1, eval_every=1, precision="bf16"), train_root, log=lines.append
    )
    assert any("bf16 matmuls are emulated on this CPU (40x slower" in line for line in lines)
    lines.clear()
    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 1.1)
    train_run(
        smoke_config(train_root, max_steps=1, eval_every=1, precision="bf16"), train_root, log=lines.append
    )
    assert not any("emulated" in line for line in lines)
    lines.clear()
    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 40.0)
    train_run(
        smoke_config(train_root, max_steps=1, eval_every=1, eval_precision="bf16"),
        train_root,
        log=lines.append,
    )
    assert any("bf16 matmuls are emulated on this CPU (40x slower" in line for line in lines)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_does_not_depend_on_the_final_tasks_precision(
    fakes: None, train_root: Path, precision: str
) -> None:
    """The same run with its final tasks in bf16 or fp32 trains alike, step for step (the bf16 check
    drew from the global random stream when only the final tasks were bf16)."""
    trained = []
    for eval_precision in ("fp32", "bf16"):
        config = smoke_config(
            train_root, max_steps=2, eval_every=1, precision=precision, eval_precision=eval_precision
        )
        record = train_run(config, train_root, log=None)
        trained.append([(p["step"], p["loss"], p["stsb_dev"]) for p in record["trajectory"]])
    assert trained[0] == trained[1]


@pytest.mark.parametrize(("precision", "eval_precision"), [("bf16", "fp32"), ("fp32", "bf16")])
def test_dev_evaluations_use_the_training_precision_and_final_tasks_their_own(
    fakes: None, train_root: Path, monkeypatch: pytest.MonkeyPatch, precision: str, eval_precision: str
) -> None:
    from harness.encoder.model import SentenceEncoder

    seen: list[str] = []
    real_embed = SentenceEncoder.embed_tensor

    def spy(self: SentenceEncoder, sentences: Any, pooler: str, p: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(p)
        return real_embed(self, sentences, pooler, p, *args, **kwargs)

    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 1.0)
    monkeypatch.setattr(SentenceEncoder, "embed_tensor", spy)
    config = smoke_config(
        train_root, max_steps=2, eval_every=1, precision=precision, eval_precision=eval_precision
    )
    train_run(config, train_root, log=lambda _: None)
    # fake_dev_eval embeds once per dev evaluation (steps 0, 1, 2); fake_final embeds once at the end
    assert seen == [precision] * 3 + [eval_precision]


def test_a_singular_whitening_error_is_one_short_line_and_the_record_keeps_the_eigenvalues(
    fake_dev_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final_with(71.5)
    )
    config = resolve_config(
        "whitenedcse", {"num_groups": 1, "eps": 0.0}, "smoke", {"max_steps": 2}, data_root=fake_dev_root
    )
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError) as caught:
        train_run(config, fake_dev_root, store, log=None)
    line = str(caught.value)
    assert "step 1: " in line and "block 0, group 0 is singular or non-finite" in line
    assert len(line) < 250 and "[" not in line, line  # not the eigenvalues themselves
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and saved["error"] == f"TrainingError: {line}"
    details = saved["error_details"]
    assert details.startswith("eigenvalues of block 0, group 0: [") and details.count(",") >= 63


# -- the method's sentence input (Method.sentence_input) -----------------------------------------------
# The method contract's input transform (``Method.sentence_input``) in the training loop.
#
# A method whose sentence embedding needs another input than the sentence (PromptBERT: a template
# around it, read at its [MASK] by the method's sentence head) returns ``text(sentence)``; the loop
# embeds that text through the head in the dev evaluations and the final tasks, never shares its
# step-0 dev evaluation, and refuses a method that returns a text but no head. Methods without one
# embed the sentence itself.

DEV_TEXTS = [s if i % 2 == 0 else s.removesuffix(" .") for i, s in enumerate(DEV_SENTENCES)]
"""The stand-in dev evaluation's sentences, every other one without its full stop (evaluation.py adds it)."""


@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch, train_root: Path) -> dict[str, Any]:
    """A fake dev evaluation and final evaluation, and every text the encoder embeds, recorded."""
    seen: dict[str, Any] = {"texts": [], "dev": 0, "final": 0}

    class FakeDevEval:
        def __call__(self, embed: Any) -> dict[str, float]:
            x = embed(list(DEV_TEXTS))
            seen["dev"] += 1
            return dev_scores(x)

        def cache_token(self) -> str:
            return "sentence-input-test-dev-eval"

    def final(embed: Any, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        embed(list(DEV_TEXTS))
        seen["final"] += 1
        return {"sts": {"avg": 0.0}}

    original = SentenceEncoder.embed_tensor

    def recording(self: SentenceEncoder, sentences: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        seen["texts"].append(list(sentences))
        return original(self, sentences, *args, **kwargs)

    monkeypatch.setattr(train_mod, "make_dev_eval", lambda data_root, token_lengths=None: FakeDevEval())
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    monkeypatch.setattr(SentenceEncoder, "embed_tensor", recording)
    seen["root"] = train_root
    return seen


def test_dev_evaluations_and_final_tasks_embed_the_template_through_the_head(loop, tmp_path) -> None:
    root = loop["root"]
    config = resolve_config("promptbert", None, "smoke", {"max_steps": 2, "eval_every": 1}, data_root=root)
    store = RunStore(tmp_path / "runs")
    record = train_run(config, root, store, log=None, save_checkpoint=True)
    assert record["status"] == "finished"
    assert (loop["dev"], loop["final"]) == (3, 1)
    expected = [
        'This sentence of "a man is playing a guitar ." means[MASK].',
        'This sentence of "a man plays the guitar." means[MASK].',  # evaluation.py adds the full stop
        'This sentence of "a woman is slicing an onion ." means[MASK].',
        'This sentence of "the cat sleeps on the sofa." means[MASK].',
    ]
    assert loop["texts"] == [expected] * 4  # three dev evaluations, one final evaluation
    assert "step0_probe_cached" not in record
    assert not any((store.cache_root / CACHE_DIR).glob("**/*"))  # a head's step 0 is not shared
    assert (store.checkpoint_dir(config.run_id()) / SENTENCE_HEAD_FILE).exists()  # export/eval refuse it


def test_a_method_without_an_input_embeds_the_sentences_themselves(loop, tmp_path) -> None:
    root = loop["root"]
    config = resolve_config("simcse", None, "smoke", {"max_steps": 1, "eval_every": 1}, data_root=root)
    train_run(config, root, RunStore(tmp_path / "runs"), log=None)
    assert loop["texts"] == [DEV_TEXTS] * 3


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
