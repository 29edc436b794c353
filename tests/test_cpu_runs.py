"""A short real run of every registered method on the cpu profile (the packaged encoder).

Marked slow (minutes of CPU): ``pytest -m slow tests/test_cpu_runs.py``. Each run trains two steps
at batch 64 on the real corpus, probes STS-B dev, and must finish with finite losses and a record.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.config import resolve_config
from harness.errors import DataError
from harness.paths import resolve_data_root
from harness.store import RunStore
from harness.train import train_run
from methods import REGISTRY

CASES: list[tuple[str, dict[str, Any]]] = [
    ("simcse", {}),
    ("whitenedcse", {"num_groups": 128}),
    ("whitenedcse", {"whitening": "zca", "num_positives": 2}),
    ("simcsepp", {}),
    ("noise_probe", {"variant": "neg_plus_noise"}),
    ("noise_probe", {"variant": "pos_minus_noise", "k_samples": 2}),
    ("barlow_probe", {"padding_rows": 320}),
]


def test_cases_cover_the_registry() -> None:
    assert {name for name, _ in CASES} == set(REGISTRY)


@pytest.mark.slow
@pytest.mark.parametrize(("method", "params"), CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_short_cpu_run(method: str, params: dict[str, Any], tmp_path: Path) -> None:
    try:
        data_root = resolve_data_root(None)
    except DataError as exc:
        pytest.skip(str(exc))
    config = resolve_config(
        method,
        params,
        profile="cpu",
        overrides={"max_steps": 2, "eval_every": 2, "final_tasks": "none"},
        data_root=data_root,
    )
    store = RunStore(tmp_path / "runs")
    record = train_run(config, data_root, store, log=None)
    assert record["status"] == "finished"
    assert (store.load(config.run_id()) or {}).get("status") == "finished"
    last = record["trajectory"][-1]
    assert last["step"] == 2
    assert math.isfinite(last["loss"])
    assert 0 < last["stsb_dev"] <= 100
