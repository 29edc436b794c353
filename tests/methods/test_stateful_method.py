"""A stateful method (momentum copy + queue) fits the method contract without touching the loop.

The method lives in ``momentum_method.py`` beside this test and is registered by ONE line
(``monkeypatch.setitem(REGISTRY, ...)``); ``harness/run/training.py`` knows nothing about it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import torch

import harness.run.training as train_mod
from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder
from harness.encoder.training_encode import TrainingEncode
from harness.grid.plan import memory
from harness.grid.plan.cost import NO_GRAD_ROW_COST, CostModel
from harness.run.footprint import footprint
from harness.run.step import TrainStep
from harness.store.run_config import RunConfig, resolve_config
from harness.store.run_store import RunStore
from methods import REGISTRY
from tests.helpers import DOG_CORPUS, corpus_text, make_corpus_root, record_widths
from tests.methods.momentum_method import MomentumQueue, MomentumQueueParams


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "momentum_queue", MomentumQueue)  # the one registry line


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    return make_corpus_root(tmp_path / "data", corpus_text(DOG_CORPUS[:40]))


def config(data_root: Path, **params: Any) -> RunConfig:
    return resolve_config("momentum_queue", params, "smoke", {"max_steps": 3}, data_root=data_root)


def test_frozen_copy_is_not_optimised_and_follows_the_ema(registered: None, data_root: Path) -> None:
    cfg = config(data_root, momentum=0.75, queue_size=12)
    encoder = load_encoder("random:tiny", seed=0)
    method = MomentumQueue(MomentumQueueParams(momentum=0.75, queue_size=12), encoder.hidden_size)
    step = TrainStep(encoder, method, cfg, total=3)
    optimised = {id(p) for p in step.parameters}
    key_params = list(method.key_encoder.parameters()) + list(method.key_head.parameters())
    assert key_params and not any(id(p) in optimised for p in key_params)
    assert not any(p.requires_grad for p in key_params)
    head = method.export_head()
    assert head is not None and all(id(p) in optimised for p in head.parameters())  # the head is trained

    online_before = [p.detach().clone() for p in encoder.parameters()]
    key_before = [p.detach().clone() for p in method.key_encoder.parameters()]
    _, metrics = step(DOG_CORPUS[:8], 1)
    assert float(metrics["queue_filled"]) == 8.0
    online_after = list(encoder.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(online_before, online_after, strict=True))
    for k0, k1, o1 in zip(key_before, method.key_encoder.parameters(), online_after, strict=True):
        torch.testing.assert_close(k1, 0.75 * k0 + 0.25 * o1.detach())
    _, metrics = step(DOG_CORPUS[8:16], 2)
    assert float(metrics["queue_filled"]) == 12.0  # capped at queue_size
    assert method.queue.contents().shape == (12, encoder.hidden_size)


def test_snapshots_leave_out_frozen_copies_and_buffers(registered: None, data_root: Path) -> None:
    cfg = config(data_root)
    encoder = load_encoder("random:tiny", seed=0)
    method = MomentumQueue(MomentumQueueParams(), encoder.hidden_size)
    TrainStep(encoder, method, cfg, total=3)
    snap = method.snapshot_state()
    assert snap and all(k.startswith("mlp.") for k in snap)
    assert any(k.startswith("key_encoder.") for k in method.state_dict())  # kept for checkpoints
    before = method.queue.rows.clone()
    method.queue.push(torch.ones(2, encoder.hidden_size))
    method.restore_state(snap)  # restoring a snapshot leaves the queue alone
    assert not torch.equal(method.queue.rows, before)


def test_train_run_completes_with_the_stateful_method(
    registered: None, data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dev_eval(data_root: Path, token_lengths: Any = None) -> Any:
        return lambda embed: {"stsb_dev": float(embed(["a b", "c d"]).sum()), "align": 0.0, "uniform": 0.0}

    monkeypatch.setattr(train_mod, "make_dev_eval", dev_eval)
    cfg = resolve_config(
        "momentum_queue", None, "smoke", {"max_steps": 4, "eval_every": 2, "final_tasks": "none"}, data_root
    )
    record = train_run(cfg, data_root, RunStore(tmp_path / "runs"), log=None)
    assert record["status"] == "finished"
    assert [p["step"] for p in record["trajectory"]] == [0, 2, 4]
    # smoke batch 8, queue 16: the queue holds 8 then 16 keys (steps 1-2), then stays full
    assert [p.get("queue_filled") for p in record["trajectory"]] == [None, 12.0, 16.0]
    assert set(method_state_keys(cfg)) == {"mlp.dense.weight", "mlp.dense.bias"}


@pytest.mark.parametrize(
    ("pooler", "buckets"), [("cls_before_pooler", 1), ("cls_before_pooler", 3), ("avg", 3)]
)
def test_the_key_encoder_runs_through_the_runs_pooler_and_buckets(pooler: str, buckets: int) -> None:
    encoder = load_encoder("random:tiny", seed=0)
    encoder.packed_training = False  # the bucketed calls, which the spy sees (the key copy inherits it)
    method = MomentumQueue(MomentumQueueParams(), encoder.hidden_size)
    method.bind(encoder)
    key = cast(SentenceEncoder, method.key_encoder)
    with torch.no_grad():
        for p in key.parameters():  # a key encoder that has drifted from the online one
            p.add_(0.01 * torch.randn_like(p))
    sentences = ["a b", "a much longer sentence with many more tokens in it .", "c d e", "mid length one"]
    batch = encoder.tokenize(sentences * 2, max_length=32)
    encode = TrainingEncode(encoder, pooler, buckets)
    widths = record_widths(key)
    with torch.no_grad():
        keys = encode(batch, dropout=False, encoder=key)
        online = encode(batch, dropout=False)
    del key.features
    assert len(widths) == buckets  # the run's length buckets, on the key encoder
    key.eval()
    with torch.no_grad():
        direct = key.features(batch, pooler)  # a direct pooled forward of the key encoder
    torch.testing.assert_close(keys, direct, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(keys, online, atol=1e-4)
    with pytest.raises(TypeError, match="SentenceEncoder"):
        encode(batch, encoder=torch.nn.Linear(2, 2))


def test_cost_and_memory_count_the_key_encoders_pass(registered: None, data_root: Path) -> None:
    cfg = resolve_config("momentum_queue", None, "cpu", {"max_steps": 100}, data_root=data_root)
    simcse = resolve_config("simcse", None, "cpu", {"max_steps": 100}, data_root=data_root)
    measured = footprint(cfg.method, cfg.params, cfg.hidden_size)
    assert (measured.rows, measured.no_grad_rows) == (1.0, 1.0)
    model = CostModel(cpu_id="test-cpu")
    step_s = model.units(cfg)[0].step_s
    # one row with gradient (the queries) and one forward-only row (the keys) against SimCSE's two
    expected = 100 * step_s * (1.0 + NO_GRAD_ROW_COST - 2.0) / 2
    assert model.run_seconds(cfg) - model.run_seconds(simcse) == pytest.approx(expected)
    # memory: the keys keep no activations, so they count NO_GRAD_ROW_MEMORY of a row with gradient
    doubled = simcse.replace(batch_size=2 * simcse.batch_size)  # two more rows' tokens
    row = (memory.estimate_bytes(doubled) - memory.estimate_bytes(simcse)) / 2
    rows = 1.0 + memory.NO_GRAD_ROW_MEMORY
    # and the momentum encoder's weights: one frozen copy of the profile's MiniLM, fp32
    assert (measured.trained_copies, measured.frozen_copies) == (0, 1)
    copy_bytes = 4 * sum(p.numel() for p in load_encoder("random:minilm").parameters())
    assert memory.estimate_bytes(cfg) - memory.estimate_bytes(simcse) == pytest.approx(
        (rows - 2) * row + memory._MARGIN * copy_bytes, abs=2
    )
    assert memory.estimate_bytes(cfg) > memory.estimate_bytes(simcse) - row  # more than one row alone


def method_state_keys(cfg: RunConfig) -> list[str]:
    encoder = load_encoder("random:tiny", seed=0)
    method = MomentumQueue(MomentumQueueParams(), encoder.hidden_size)
    method.bind(encoder)
    return list(method.snapshot_state())


train_run = train_mod.train_run
