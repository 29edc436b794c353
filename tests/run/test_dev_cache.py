"""The step-0 dev evaluation cache: computed once per starting encoder, shared by the runs of a store, and
skipping it changes nothing else in a run."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness.run.training as train_mod
from harness.encoder.loading import load_encoder
from harness.run.dev_cache import DevCache, dev_cache_key, weights_digest
from harness.run.training import train_run
from harness.store.run_store import RunStore
from tests.helpers import smoke_config

SENTENCES = ["a man is playing a guitar .", "a man plays the guitar .", "a woman slices an onion ."]


class CountingDevEval:
    """A deterministic stand-in for the STS-B dev evaluation that counts its calls and can be cached."""

    calls = 0

    def __init__(self, train_root: Path, token_lengths: Any = None) -> None:
        self.token = "fixture-dev-eval-v1"

    def cache_token(self) -> str:
        return self.token

    def __call__(self, embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        type(self).calls += 1
        x = embed(list(SENTENCES)).astype(np.float64)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return {
            "stsb_dev": float(100 * x[0] @ x[1]),
            "align": float(x[0] @ x[2]),
            "uniform": float(x[1] @ x[2]),
        }


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingDevEval]:
    CountingDevEval.calls = 0
    monkeypatch.setattr(train_mod, "make_dev_eval", CountingDevEval)
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    return CountingDevEval


def final(
    embed: Callable[[list[str]], np.ndarray], train_root: Path, tasks: str, mode: str
) -> dict[str, Any]:
    x = embed(list(SENTENCES))
    return {"sts": {"STSB": float(x[0] @ x[1]), "avg": float(x[0] @ x[1])}}


def strip(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.items() if k not in ("elapsed_s", "probe_s")} for p in record["trajectory"]]


def test_runs_of_one_store_share_the_starting_encoders_dev_evaluation(
    counting: type[CountingDevEval], train_root: Path, tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs")
    first = train_run(smoke_config(train_root, "simcse"), train_root, store, device="cpu", log=None)
    assert counting.calls == 3 and "step0_probe_cached" not in first  # steps 0, 2, 4
    # Another method from the same starting weights (random:tiny is seeded: same seed, same weights).
    config = smoke_config(train_root, "simcsepp")
    second = train_run(config, train_root, store, device="cpu", log=None)
    assert counting.calls == 5 and second["step0_probe_cached"] is True  # steps 2 and 4 only
    for key in ("stsb_dev", "align", "uniform"):
        assert second["trajectory"][0][key] == first["trajectory"][0][key]
    assert len(list((store.root / "dev_cache").glob("*.json"))) == 1

    # Skipping the dev evaluation draws nothing from the random streams: the same run in a store
    # without the cache gives the same trajectory and final scores.
    alone = train_run(config, train_root, RunStore(tmp_path / "fresh"), device="cpu", log=None)
    assert counting.calls == 8
    assert strip(alone) == strip(second) and alone["final"] == second["final"]

    # Other starting weights (another seed of the random encoder) miss the cache.
    train_run(smoke_config(train_root, "simcse", seed=7), train_root, store, device="cpu", log=None)
    assert counting.calls == 11


def test_the_key_follows_weights_pooler_precision_and_dev_evaluation(train_root: Path) -> None:
    encoder = load_encoder("random:tiny", seed=0)
    dev_eval = CountingDevEval(train_root)
    cpu = torch.device("cpu")

    def key(**kw: Any) -> str | None:
        args: dict[str, Any] = {"pooler": "cls_before_pooler", "precision": "fp32", **kw}
        return dev_cache_key(encoder.model, dev_eval, device=cpu, **args)

    base = key()
    assert base is not None and base == key()
    assert key(pooler="avg") != base and key(precision="bf16") != base
    dev_eval.token = "another dev set"
    assert key() != base
    dev_eval.token = "fixture-dev-eval-v1"
    before = weights_digest(encoder.model)
    with torch.no_grad():
        next(encoder.model.parameters()).add_(1e-6)
    assert weights_digest(encoder.model) != before and key() != base
    assert dev_cache_key(encoder.model, lambda embed: {}, pooler="avg", precision="fp32", device=cpu) is None


def test_unreadable_entries_are_ignored(tmp_path: Path) -> None:
    cache = DevCache(tmp_path / "cache")
    assert cache.get("k") is None
    cache.put("k", {"stsb_dev": 80.5, "align": 0.2})
    assert cache.get("k") == {"stsb_dev": 80.5, "align": 0.2}
    for bad in ("{not json", json.dumps({"scores": {"stsb_dev": "x"}}), json.dumps({"scores": {}}), "[]"):
        (tmp_path / "cache" / "k.json").write_text(bad)
        assert cache.get("k") is None
    (tmp_path / "cache" / "k.json").write_text(json.dumps({"scores": {"stsb_dev": float("nan")}}))
    assert cache.get("k") is None
    cache.put("k2", {"stsb_dev": 1.0}, about=object())  # cannot be written: no entry, no temporary file
    assert cache.get("k2") is None and not list((tmp_path / "cache").glob(".dev-cache-*"))


def test_the_real_dev_evaluation_keys_on_its_dev_data(tmp_path: Path) -> None:
    from harness.evaluation.geometry import StsbDevEval

    folder = tmp_path / "senteval" / "STS" / "STSBenchmark"
    folder.mkdir(parents=True)
    rows = [("a dog runs .", "a dog is running .", 4.5), ("a cat sleeps .", "the market fell .", 0.5)]

    def write(extra: str = "") -> StsbDevEval:
        lines = [
            f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g}\t{a}\t{b}{extra}"
            for i, (a, b, g) in enumerate(rows)
        ]
        (folder / "sts-dev.csv").write_text("\n".join(lines) + "\n")
        return StsbDevEval(tmp_path / "senteval")

    token = write().cache_token()
    assert token == write().cache_token()
    rows[1] = ("a cat sleeps .", "the market fell .", 0.75)
    assert write().cache_token() != token
