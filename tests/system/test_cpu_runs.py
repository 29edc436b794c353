"""Short runs of every registered method, with the parameter sets it declares (``Method.smoke_params``).

The cases come from :data:`methods.REGISTRY`, so a new method is covered by registering it. Each
case gets a two-step run of the tiny random encoder on a few STS-B dev pairs (default run), its
cost and memory estimates (default run), and a short real run on the cpu profile with the packaged
encoder, marked slow (minutes of CPU): ``pytest -m slow tests/system/test_cpu_runs.py``. Each run
trains two steps, evaluates on STS-B dev, and must finish with finite losses and a record.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.config.paths import resolve_data_root
from harness.encoder.loading import load_encoder
from harness.encoder.model import SentenceEncoder
from harness.errors import DataError
from harness.grid.plan import memory
from harness.grid.plan.cost import NO_GRAD_ROW_COST, CostModel
from harness.run.footprint import footprint
from harness.run.training import train_run
from harness.store.run_config import RunConfig, resolve_config
from harness.store.run_store import RunStore
from methods import REGISTRY, build_params, get_method
from tests.helpers import make_data_root

CASES: list[tuple[str, dict[str, Any]]] = [
    (name, dict(params)) for name, cls in REGISTRY.items() for params in cls.smoke_params
]
IDS = [f"{m}-{i}" for i, (m, _) in enumerate(CASES)]
RUN = {"max_steps": 2, "eval_every": 2, "final_tasks": "none"}


def test_every_registered_method_declares_valid_smoke_params() -> None:
    for name, cls in REGISTRY.items():
        assert cls.smoke_params, f"{name} declares no smoke_params"
    assert {name for name, _ in CASES} == set(REGISTRY)
    for name, params in CASES:
        for hidden in (64, 384):  # the tests' tiny encoder and the packaged one
            build_params(name, params).validate(hidden)


def _check_run(record: dict[str, Any], store: RunStore, run_id: str) -> None:
    assert record["status"] == "finished"
    assert (store.load(run_id) or {}).get("status") == "finished"
    last = record["trajectory"][-1]
    assert last["step"] == 2
    assert math.isfinite(last["loss"])
    assert -100 <= last["stsb_dev"] <= 100


@pytest.fixture
def tiny_data_root(mini_data_root: Path, tmp_path: Path) -> Path:
    """The first STS lines of the real data and a 40-sentence corpus."""
    sentences = [
        f"sentence {i} of the tiny corpus is about {'dogs' if i % 2 else 'cats'} ." for i in range(40)
    ]
    corpus = "\n".join(sentences) + "\n"
    return make_data_root(tmp_path / "data", mini_data_root / "senteval", link=True, corpus=corpus)


@pytest.mark.parametrize(("method", "params"), CASES, ids=IDS)
def test_tiny_run(method: str, params: dict[str, Any], tiny_data_root: Path, tmp_path: Path) -> None:
    config = resolve_config(method, params, profile="smoke", overrides=RUN, data_root=tiny_data_root)
    store = RunStore(tmp_path / "runs")
    record = train_run(config, tiny_data_root, store, log=None)
    _check_run(dict(record), store, config.run_id())


@pytest.mark.parametrize(("method", "params"), CASES, ids=IDS)
def test_cost_and_memory_count_rows_with_and_without_gradient(
    method: str, params: dict[str, Any], tiny_data_root: Path
) -> None:
    config = resolve_config(method, params, "cpu", {"max_steps": 100}, tiny_data_root)
    simcse = resolve_config("simcse", {}, "cpu", {"max_steps": 100}, tiny_data_root)
    measured = footprint(config.method, config.params, config.hidden_size)
    grad, no_grad = measured.rows, measured.no_grad_rows
    assert grad > 0 and no_grad >= 0
    model = CostModel(cpu_id="test-cpu")
    units, _ = model.units(config)
    extra = model.run_seconds(config) - model.run_seconds(simcse)
    assert extra == pytest.approx(100 * units.step_s * ((grad + NO_GRAD_ROW_COST * no_grad) / 2 - 1))
    # the memory estimate is linear in rows x batch x length: SimCSE at twice the batch = 2 more rows
    row = (
        memory.estimate_bytes(simcse.replace(batch_size=2 * simcse.batch_size))
        - memory.estimate_bytes(simcse)
    ) / 2
    rows = grad + memory.NO_GRAD_ROW_MEMORY * no_grad
    # and a whole encoder's fp32 weights (the cpu profile's MiniLM, counted on a model of its
    # shape) per extra copy the method holds, a trained one with its gradients and AdamW moments
    trained, frozen = measured.trained_copies, measured.frozen_copies
    extra_bytes = memory.estimate_bytes(config) - memory.estimate_bytes(simcse) - row * (rows - 2)
    copies = memory.TRAINED_COPY_SHARE * trained + frozen
    minilm = load_encoder("random:minilm")
    copy_bytes = 4 * sum(p.numel() for p in minilm.parameters()) if copies else 0
    # and its own heads and projectors against SimCSE's MLP, trained: 4 fp32 numbers per parameter
    # (those bind builds too, MoCoSE's; a whole trained encoder copy is counted above)
    own = [_own_trainable(c, minilm) for c in (config, simcse)]
    head_bytes = memory.TRAINED_COPY_SHARE * 4 * (own[0] - own[1])
    assert extra_bytes == pytest.approx(memory._MARGIN * (copies * copy_bytes + head_bytes), abs=2)


def _own_trainable(config: RunConfig, encoder: SentenceEncoder) -> int:
    """The method's trainable parameters once bound to ``encoder``, less its whole trained copies."""
    method = get_method(config.method)(config.params, encoder.hidden_size)
    method.bind(encoder)
    trained = footprint(config.method, config.params, config.hidden_size).trained_copies
    whole = sum(p.numel() for p in encoder.parameters())
    return sum(p.numel() for p in method.trainable_parameters()) - trained * whole


@pytest.mark.slow
@pytest.mark.parametrize(("method", "params"), CASES, ids=IDS)
def test_short_cpu_run(method: str, params: dict[str, Any], tmp_path: Path) -> None:
    try:
        data_root = resolve_data_root(None)
    except DataError as exc:
        pytest.skip(str(exc))
    config = resolve_config(method, params, profile="cpu", overrides=RUN, data_root=data_root)
    store = RunStore(tmp_path / "runs")
    record = train_run(config, data_root, store, log=None)
    _check_run(dict(record), store, config.run_id())
    assert 0 < record["trajectory"][-1]["stsb_dev"] <= 100
