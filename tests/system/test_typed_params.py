"""Typed parameters from spec to trial: a spec's value becomes the method's typed parameters ONCE.

The counters (the ``record_counts`` fixture) are the proof: a table spec's parameters are built
into their typed form once (when the spec is loaded) and checked once for every encoder; the grid
checks each once against the profile's encoder, whose hidden size it looks up once per
settings; the trial gets the very object (through Ray's pickling) and neither rebuilds nor re-checks
it.
"""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.run_config import RunConfig
from methods import get_method
from tests.helpers import spec_text, write_spec

SPEC = spec_text(
    """
[[rows]]
label = "whitened"
method = "whitenedcse"
params = {num_groups = 16}
paper = [1.0]

[[rows]]
label = "whitened, dev every step"
method = "whitenedcse"
params = {num_groups = 16}
overrides = {eval_every = 1}
paper = [1.0]

[[sweeps]]
label = "tau"
header = "temperature"
method = "simcse"
vary = "temperature"
values = [0.05, 0.1]
paper = [1.0, 2.0]
""",
    cites="A test table",
    title="Built once",
)


def test_a_spec_value_is_built_once_and_checked_once_per_encoder_up_to_the_trial(
    tmp_path: Path, corpus_root: Path, record_counts: Counter[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_spec(tmp_path / "once.toml", SPEC)
    spec = load_table_spec(path)
    loaded = Counter(record_counts)
    assert loaded == {
        ("built", "WhitenedCSEParams"): 2,  # one per row
        ("built", "SimCSEParams"): 3,  # the sweep's own run and one per value
        ("validate", "WhitenedCSEParams", None): 2,
        ("validate", "SimCSEParams", None): 3,
    }

    plan = expand([spec], "smoke", seeds=3, data_root=corpus_root)
    assert len(plan.runs) == 4 * 3
    added = Counter(record_counts)
    added.subtract(loaded)
    assert +added == {
        ("hidden_size_of", "random:tiny"): 2,  # two settings: the profile's, and eval_every = 1
        ("validate", "WhitenedCSEParams", 64): 2,  # each row's, once for d = 64 (not per seed)
        ("validate", "SimCSEParams", 64): 2,  # each sweep value's
    }
    records = {id(cell.configs[0].params) for cell in plan.cells}
    assert records == {id(run.typed) for _, run in spec.run_cells()}  # the spec's own typed parameters

    from harness.grid.tune import trial as tune
    from harness.store.run_store import RunStore

    given: list[RunConfig] = []

    def fake_train(config: RunConfig, data_root: Path, store: RunStore, **_: Any) -> dict[str, Any]:
        given.append(config)
        get_method(config.method)(config.params, 64)  # what harness.run.training does with them
        return {"status": "finished"}

    monkeypatch.setattr(tune.tune, "report", lambda metrics: None)
    trial = tune.TrialSpec(fake_train, corpus_root, tmp_path / "runs", "cpu", 1)
    before = Counter(record_counts)
    for run in plan.runs:
        shipped = pickle.loads(pickle.dumps({"run_entry": {"run": run.config, "run_id": run.run_id}}))
        tune.trial_body(shipped, spec=trial)
    assert record_counts == before  # no record rebuilt, none checked again, no width looked up
    assert [c.to_dict() for c in given] == [r.config.to_dict() for r in plan.runs]
