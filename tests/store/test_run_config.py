"""Run configurations: resolution, typed parameters checked against the encoder, stable ids, JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.store.run_config import RunConfig, resolve_config
from methods.simcse import SimCSEParams
from methods.whitenedcse import WhitenedCSEParams
from tests.helpers import smoke_config


def test_resolution_fills_defaults_and_sorts_params(config_root: Path) -> None:
    config = smoke_config(config_root)
    assert isinstance(config.params, SimCSEParams)  # typed inside the program
    assert config.params == SimCSEParams(temperature=0.05, mlp=True)
    stored = config.to_dict()["params"]  # a dict only at the store / Ray boundary, keys sorted
    assert stored == {"mlp": True, "temperature": 0.05} and list(stored) == sorted(stored)
    assert config.threads == 1  # the smoke and cpu profiles fix the thread count
    assert config.corpus == str((config_root / "corpus" / "nli-sentences.txt").resolve())
    assert re.fullmatch(r"nli-sentences\.txt:[0-9a-f]{12}", config.corpus_id)
    assert (config.seed, config.grad_clip, config.weight_decay, config.warmup_steps) == (42, 1.0, 0.0, 0)
    assert config.train_pooler == config.eval_pooler == "cls_before_pooler"


def test_same_config_same_id(config_root: Path) -> None:
    a, b = smoke_config(config_root), smoke_config(config_root)
    assert a == b and a.run_id() == b.run_id() and a.config_id() == b.config_id()
    assert re.fullmatch(r"simcse-[0-9a-f]{12}", a.run_id())
    assert len({a, b}) == 1  # hashable (by run id) despite the params dict
    # Passing the defaults explicitly changes nothing.
    c = smoke_config(config_root, seed=42, lr=3e-5, params={"temperature": 0.05})
    assert c.run_id() == a.run_id()


@pytest.mark.parametrize(
    "change",
    [
        {"lr": 1e-4},
        {"batch_size": 16},
        {"max_length": 16},
        {"max_steps": 6},
        {"eval_every": 1},
        {"model": "minilm"},
        {"weight_decay": 0.01},
        {"grad_clip": 0.5},
        {"warmup_steps": 1},
        {"eval_pooler": "avg"},
        {"train_pooler": "avg"},
        {"transfer_mode": "test"},
        {"post_whiten": "zca"},
        {"precision": "bf16"},
        {"threads": 2},
        {"params": {"temperature": 0.1}},
        {"params": {"mlp": False}},
    ],
)
def test_result_affecting_changes_change_both_ids(config_root: Path, change: dict[str, object]) -> None:
    base = smoke_config(config_root)
    other = smoke_config(config_root, **change)
    assert other.run_id() != base.run_id()
    assert other.config_id() != base.config_id()


def test_seed_changes_run_id_not_config_id(config_root: Path) -> None:
    a, b = smoke_config(config_root), smoke_config(config_root, seed=7)
    assert a.run_id() != b.run_id()
    assert a.config_id() == b.config_id()


def test_profile_label_is_not_in_the_id(config_root: Path) -> None:
    smoke_run = smoke_config(config_root)
    same = resolve_config(
        "simcse",
        None,
        "cpu",
        {k: v for k, v in smoke_run.settings_dict().items() if k not in ("corpus", "corpus_id", "profile")},
        data_root=config_root,
    )
    assert same.profile == "cpu" and same.run_id() == smoke_run.run_id()


def test_round_trip_through_json(config_root: Path) -> None:
    config = smoke_config(config_root, max_steps=None)
    data = json.loads(json.dumps(config.to_dict()))
    again = RunConfig.from_dict(data)
    assert again == config and again.run_id() == config.run_id()
    with pytest.raises(ConfigError, match="bogus"):
        RunConfig.from_dict({**data, "bogus": 1})


def test_every_construction_checks_the_parameters_and_resolution_checks_them_once(
    config_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = smoke_config(config_root)
    stored = config.to_dict()
    bad = "^temperature must be from 0\\.001 to 1000 \\(a softmax temperature\\), got 1e-30$"
    with pytest.raises(ConfigError, match=bad):  # a stored record read back
        RunConfig.from_dict({**stored, "params": {**stored["params"], "temperature": 1e-30}})
    with pytest.raises(ConfigError, match=bad):  # a copy with a typed record
        config.replace(params=SimCSEParams(temperature=1e-30))
    with pytest.raises(ConfigError, match=bad):  # the constructor itself
        RunConfig(**{**stored, "params": {"temperature": 1e-30}})
    widths: list[int | None] = []
    real = SimCSEParams.validate

    def counted(self: SimCSEParams, hidden_size: int | None = None) -> None:
        widths.append(hidden_size)
        real(self, hidden_size)

    monkeypatch.setattr(SimCSEParams, "validate", counted)
    smoke_config(config_root)
    assert widths == [64]  # once per resolved run, against random:tiny's width
    widths.clear()
    assert RunConfig.from_dict(stored) == config and widths == [None]  # no width needed to read a record
    widths.clear()
    assert config.replace(seed=7).params is config.params and widths == []  # its own record: checked
    assert config.replace(params={"temperature": 0.1}).params == SimCSEParams(0.1) and widths == [None]


def test_unknown_method_has_a_hint(config_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown method 'simcs'.*did you mean 'simcse'"):
        resolve_config("simcs", profile="smoke", data_root=config_root)


def test_misspelt_param_key(config_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"'temprature'.*did you mean 'temperature'"):
        smoke_config(config_root, params={"temprature": 0.1})


def test_group_counts_keep_their_shape_on_every_profile(config_root: Path) -> None:
    # random:tiny has d = 64: the default 384 groups (2 channels each at d = 768) become 32 groups.
    default = resolve_config("whitenedcse", None, "smoke", data_root=config_root).params
    assert isinstance(default, WhitenedCSEParams) and default.effective_groups(64) == 32
    ok = resolve_config(
        "whitenedcse", {"num_groups": 7, "group_scaling": "count"}, "smoke", data_root=config_root
    )
    assert ok.params == WhitenedCSEParams(num_groups=7, group_scaling="count")  # uneven groups are allowed
    with pytest.raises(ConfigError, match=r"num_groups=384 gives 384 groups, more than .* d=64"):
        resolve_config(
            "whitenedcse", {"num_groups": 384, "group_scaling": "count"}, "smoke", data_root=config_root
        )


def test_a_flow_needs_a_width_its_levels_can_halve(config_root: Path, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 12}))
    overrides = {"model": str(tmp_path), "post_whiten": "flow"}
    with pytest.raises(ConfigError, match="divisible by 8, got d=12"):
        resolve_config("simcse", None, "smoke", overrides, data_root=config_root)
    whitened = resolve_config(
        "simcse", None, "smoke", {**overrides, "post_whiten": "pca"}, data_root=config_root
    )
    assert whitened.post_whiten == "pca"  # whitening suits any width
