"""The end of a run (harness.run.final): the final scores and the seconds each task group took, a
run whose final scores are not finite numbers failed, not finished; the final tasks on the best
state, post-whitening and flows on the final embeddings, and more threads for the final evaluation
than for training."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness.run.training as train_mod
from harness.errors import TrainingError
from harness.run.final import check_final_scores, final_scores
from harness.run.hooks import FINAL_SECONDS
from harness.run.training import train_run
from harness.store.run_config import resolve_config
from harness.store.run_store import RunStore
from tests.helpers import TRAIN_CORPUS, corpus_text, fake_dev_eval, final_with, make_corpus_root, smoke_config


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_run_with_non_finite_final_scores_is_failed_not_finished(
    value: float, fake_dev_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final_with(value)
    )
    config = smoke_config(fake_dev_root, max_steps=2, eval_every=1)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(
        TrainingError, match=rf"final scores are not finite numbers: sts.STSB={value}, sts.avg"
    ):
        train_run(config, fake_dev_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed"
    assert saved["error"].startswith("TrainingError: final scores are not finite numbers")
    assert saved["final"]["sts"] == {"STS12": 70.0, "STSB": None, "avg": None}  # kept, as strict JSON
    assert store.finished_ids() == set()


def test_finite_final_scores_finish(
    fake_dev_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    devices: list[Any] = []

    def make_final_evaluator(token_lengths: Any = None, device: Any = None) -> Any:
        devices.append(device)
        return final_with(71.5)

    monkeypatch.setattr(train_mod, "make_final_evaluator", make_final_evaluator)
    config = smoke_config(fake_dev_root, max_steps=2, eval_every=1)
    store = RunStore(tmp_path / "runs")
    assert train_run(config, fake_dev_root, store, log=None)["status"] == "finished"
    assert store.finished_ids() == {config.run_id()}
    assert devices == [torch.device("cpu")]  # the run's device: where the transfer classifiers train


def no_embed(sentences: list[str]) -> np.ndarray:
    raise AssertionError("the stand-in evaluator embeds nothing")


def test_the_final_scores_and_their_seconds_come_apart(corpus_root: Path) -> None:
    config = resolve_config("simcse", None, "smoke", {}, data_root=corpus_root)
    calls: list[tuple[str, str]] = []

    def evaluate(embed: Any, root: Path, tasks: str, mode: str) -> dict[str, Any]:
        calls.append((tasks, mode))
        return {"sts": {"avg": 70.0}, FINAL_SECONDS: {"sts": 1.5}}

    assert final_scores(evaluate, no_embed, corpus_root, config) == (
        {"sts": {"avg": 70.0}},
        {"sts": 1.5},
    )
    assert calls == [(config.final_tasks, config.transfer_mode)]
    no_seconds = final_scores(lambda *a: {"sts": {"avg": 1.0}}, no_embed, corpus_root, config)
    assert no_seconds == ({"sts": {"avg": 1.0}}, None)


def test_the_check_of_the_final_scores_names_four_and_counts_the_rest() -> None:
    check_final_scores({"sts": {"STS12": 70.0, "avg": 70.0}, "transfer": {"MR": 80.0}})
    bad = {"sts": {f"STS{i}": math.nan for i in range(12, 18)}}
    with pytest.raises(TrainingError) as caught:
        check_final_scores(bad)
    line = str(caught.value)
    assert line.startswith("final scores are not finite numbers: sts.STS12=nan, ")
    assert line.endswith(" and 2 more") and line.count("=nan") == 4


# -- the best state's final scores, post-processing ------------------------------------------------
def test_final_scores_come_from_the_best_checkpoint(
    fakes: None, train_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[float] = []

    def final(embed: Callable[[list[str]], np.ndarray], root: Path, tasks: str, mode: str) -> dict[str, Any]:
        seen.append(fake_dev_eval(root)(embed)["stsb_dev"])
        return {"sts": {"avg": 0.0}}

    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    record = train_run(smoke_config(train_root, max_steps=3, eval_every=1), train_root, log=None)
    assert seen == [pytest.approx(record["best_stsb_dev"], abs=1e-4)]


def test_post_whitening_whitens_the_final_embeddings(
    fakes: None, train_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured: dict[str, np.ndarray] = {}

    def final(embed: Callable[[list[str]], np.ndarray], root: Path, tasks: str, mode: str) -> dict[str, Any]:
        captured["x"] = embed(TRAIN_CORPUS[:80]).astype(np.float64)
        return {}

    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    config = smoke_config(train_root, max_steps=0, post_whiten="zca", post_whiten_sentences=80)
    train_run(config, train_root, log=None)
    # With no training the encoder is the seeded random one: whitening must be fitted on the first 80
    # corpus sentences and applied to the evaluation embeddings.
    from harness.encoder.loading import load_encoder
    from harness.postprocess.whitening import apply_post_whitening, fit_post_whitening

    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or threads)  # as the run embedded: ZCA magnifies rounding
    try:
        raw = load_encoder("random:tiny", "cpu", seed=config.seed).embed(TRAIN_CORPUS[:80])
    finally:
        torch.set_num_threads(threads)
    mu, w = fit_post_whitening(raw, "zca")
    assert not np.allclose(captured["x"], raw, atol=1e-3)
    np.testing.assert_allclose(captured["x"], apply_post_whitening(raw, mu, w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["flow", "flow_glow"])
def test_post_flow_evaluates_the_flows_latents(
    fakes: None, train_root: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    captured: dict[str, np.ndarray] = {}

    def final(embed: Callable[[list[str]], np.ndarray], root: Path, tasks: str, mode: str) -> dict[str, Any]:
        captured["z"] = embed(TRAIN_CORPUS[:80])
        return {}

    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    config = smoke_config(train_root, max_steps=0, post_whiten=kind, post_whiten_sentences=80, seed=7)
    record = train_run(config, train_root, log=None)
    assert record["status"] == "finished"
    # No training: the flow is fitted (seeded by the run's seed) on the seeded random encoder's
    # embeddings of the first 80 corpus sentences, and the final tasks score its latents.
    from harness.encoder.loading import load_encoder
    from harness.postprocess.flow import READINGS, fit_flow

    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or threads)
    try:
        raw = load_encoder("random:tiny", "cpu", seed=config.seed).embed(TRAIN_CORPUS[:80])
    finally:
        torch.set_num_threads(threads)
    fitted = fit_flow(raw, READINGS[kind], seed=config.seed)
    assert not np.allclose(captured["z"], raw, atol=1e-3)
    np.testing.assert_allclose(captured["z"], fitted.transform(raw), rtol=1e-4, atol=1e-4)


# -- more threads for the final evaluation (train_run(final_threads=...)) ------------------------------
SENTENCES = ["a man plays a guitar .", "a man is playing music .", "a cat sleeps .", "rain falls ."]


def _dev_eval(data_root: Path, token_lengths: Any = None) -> Callable[..., dict[str, float]]:
    def dev_eval(embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        x = embed(list(SENTENCES)).astype(np.float64)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return {"stsb_dev": float(100 * x[0] @ x[1]), "align": 0.0, "uniform": 0.0}

    return dev_eval


def test_the_final_evaluation_alone_runs_on_the_threads_handed_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, int] = {}

    def final(
        embed: Callable[[list[str]], np.ndarray], data_root: Path, tasks: str, mode: str
    ) -> dict[str, Any]:
        seen["final"] = torch.get_num_threads()
        x = embed(list(SENTENCES)).astype(np.float64)
        return {"sts": {"STSB": float(x[0] @ x[1]), "avg": float(x[0] @ x[1])}}

    monkeypatch.setattr(train_mod, "make_dev_eval", _dev_eval)
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    data_root = make_corpus_root(tmp_path / "data", corpus_text(SENTENCES * 10))
    config = resolve_config("simcse", None, "smoke", {"max_steps": 2, "eval_every": 2}, data_root=data_root)
    assert config.threads == 1
    before = torch.get_num_threads()
    plain = train_run(config, data_root, None, device="cpu", log=None)
    asked: list[int] = []

    def two() -> int:
        asked.append(torch.get_num_threads())  # asked once, as the final evaluation starts
        return 2

    handed = train_run(config, data_root, None, device="cpu", log=None, final_threads=two)
    assert asked == [1] and seen["final"] == 2 and handed["final_threads"] == 2
    assert "final_threads" not in plain
    assert handed["final"]["sts"]["avg"] == pytest.approx(plain["final"]["sts"]["avg"], abs=1e-5)
    assert handed["best_stsb_dev"] == plain["best_stsb_dev"]  # training kept its one thread
    assert torch.get_num_threads() == before
    one = train_run(config, data_root, None, device="cpu", log=None, final_threads=lambda: 1)
    assert "final_threads" not in one  # no more than its own: nothing to say


def test_a_saved_encoder_replaces_only_an_earlier_saved_encoder(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from harness.atomic import WriteError
    from harness.run.final import save_encoder

    def saves(name: str) -> SimpleNamespace:
        return SimpleNamespace(save_pretrained=lambda folder: (Path(folder) / name).write_text("{}"))

    encoder: Any = SimpleNamespace(model=saves("config.json"), tokenizer=saves("vocab.txt"))
    target = RunStore(tmp_path / "runs").checkpoint_dir("r1")
    save_encoder(target, encoder, "simcse", None)
    save_encoder(target, encoder, "simcse", None)  # a later save of the run replaces its own
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "vocab.txt"]
    (target / "config.json").unlink()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(WriteError, match=f"{target} is not a saved encoder the harness wrote"):
        save_encoder(target, encoder, "simcse", None)
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt", "vocab.txt"]
