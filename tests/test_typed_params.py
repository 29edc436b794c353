"""Typed parameters from spec to trial: a spec's value becomes the method's record ONCE.

The counters below are the proof: a table spec's parameters are built into their typed record once
(when the spec is loaded) and checked once for every encoder; the grid checks each record once
against the profile's encoder, whose hidden size it looks up once per settings; the trial gets the
very record (through Ray's pickling) and neither rebuilds nor re-checks it.
"""

from __future__ import annotations

import pickle
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import harness.config.settings
from harness.config.run_config import RunConfig, resolve_run
from harness.config.settings import resolve_settings
from harness.errors import ConfigError
from harness.grid.plan import expand
from harness.specs.parse import load_table_spec
from methods import get_method
from methods.base import MethodParams
from methods.simcse import SimCSEParams
from methods.whitenedcse import WhitenedCSEParams

SPEC = """
cites = "A test table"
title = "Built once"
scores = "sts"
columns = ["avg"]

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
"""


@pytest.fixture()
def corpus_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "nli-sentences.txt").write_text("a fixture sentence .\n" * 64, encoding="utf-8")
    return root


@pytest.fixture()
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[Any]:
    """Counts record constructions, ``validate`` calls per (record class, width) and width lookups."""
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


def test_a_spec_value_is_built_once_and_checked_once_per_encoder_up_to_the_trial(
    tmp_path: Path, corpus_root: Path, counts: Counter[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "once.toml"
    path.write_text(SPEC, encoding="utf-8")
    spec = load_table_spec(path)
    loaded = Counter(counts)
    assert loaded == {
        ("built", "WhitenedCSEParams"): 2,  # one per row
        ("built", "SimCSEParams"): 3,  # the sweep's own run and one per value
        ("validate", "WhitenedCSEParams", None): 2,
        ("validate", "SimCSEParams", None): 3,
    }

    plan = expand([spec], "smoke", seeds=3, data_root=corpus_root)
    assert len(plan.runs) == 4 * 3
    added = Counter(counts)
    added.subtract(loaded)
    assert +added == {
        ("hidden_size_of", "random:tiny"): 2,  # two settings: the profile's, and eval_every = 1
        ("validate", "WhitenedCSEParams", 64): 2,  # each row's record, once for d = 64 (not per seed)
        ("validate", "SimCSEParams", 64): 2,  # each sweep value's record
    }
    records = {id(cell.configs[0].params) for cell in plan.cells}
    assert records == {id(run.record) for _, run in spec.run_cells()}  # the spec's own records

    from harness.grid.tune import trial as tune
    from harness.store.run_store import RunStore

    given: list[RunConfig] = []

    def fake_train(config: RunConfig, data_root: Path, store: RunStore, **_: Any) -> dict[str, Any]:
        given.append(config)
        get_method(config.method)(config.params, 64)  # what harness.run.training does with the record
        return {"status": "finished"}

    monkeypatch.setattr(tune.tune, "report", lambda metrics: None)
    trial = tune.TrialSpec(fake_train, corpus_root, tmp_path / "runs", "cpu", 1)
    before = Counter(counts)
    for run in plan.runs:
        shipped = pickle.loads(pickle.dumps({"run_entry": {"run": run.config, "run_id": run.run_id}}))
        tune.trial_body(shipped, spec=trial)
    assert counts == before  # no record rebuilt, none checked again, no width looked up
    assert [c.to_dict() for c in given] == [r.config.to_dict() for r in plan.runs]


def test_a_record_built_elsewhere_is_checked_once_when_it_is_resolved(counts: Counter[Any]) -> None:
    params = WhitenedCSEParams(num_groups=16)
    settings = resolve_settings("smoke", require_corpus=False)  # random:tiny, d = 64
    config = resolve_run("whitenedcse", params, settings)
    assert counts["validate", "WhitenedCSEParams", 64] == 1
    get_method("whitenedcse")(config.params, 64)
    get_method("whitenedcse")(config.params, 64)
    assert counts["validate", "WhitenedCSEParams", 64] == 1  # the method trusts the resolved record
    assert params == WhitenedCSEParams(num_groups=16) and "_validated_for" not in params.__dict__


@pytest.mark.parametrize(
    ("where", "line"),
    [
        ("rows[0].params", "params = {temperature = inf}"),
        ("rows[0].params", "params = {positive_weights = [1.0, nan]}"),
    ],
)
def test_a_non_finite_spec_value_fails_when_the_spec_loads(tmp_path: Path, where: str, line: str) -> None:
    path = tmp_path / "bad.toml"
    method = "whitenedcse" if "positive" in line else "simcse"
    path.write_text(
        f'cites = "x"\ntitle = "x"\nscores = "sts"\ncolumns = ["avg"]\n'
        f'[[rows]]\nlabel = "a"\nmethod = "{method}"\n{line}\npaper = [1.0]\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=re.escape(where) + r": \w+ must be finite, got (inf|nan)"):
        load_table_spec(path)
