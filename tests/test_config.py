"""Run configurations: profiles, resolution, validation and stable ids."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.config.profiles import PROFILES
from harness.config.run_config import RunConfig, resolve_config, resolve_run
from harness.config.settings import OVERRIDABLE, corpus_id, resolve_settings
from harness.errors import ConfigError, DataError, ModelLoadError
from methods.simcse import SimCSEParams
from methods.whitenedcse import WhitenedCSEParams

SENTENCES = [f"sentence number {i} is here ." for i in range(40)]


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "nli-sentences.txt").write_text("\n".join(SENTENCES) + "\n")
    (root / "corpus" / "wiki1m_for_simcse.txt").write_text("\n".join(SENTENCES[:20]) + "\n")
    return root


def smoke(data_root: Path, **overrides: object) -> RunConfig:
    params = overrides.pop("params", None)
    return resolve_config("simcse", params, "smoke", overrides, data_root=data_root)  # type: ignore[arg-type]


def test_profiles_have_the_documented_settings() -> None:
    assert {"smoke", "cpu", "paper"} <= set(PROFILES)
    assert PROFILES["smoke"]["model"] == "random:tiny"
    assert (PROFILES["smoke"]["batch_size"], PROFILES["smoke"]["max_steps"]) == (8, 4)
    assert PROFILES["smoke"]["final_tasks"] == "sts"
    cpu = PROFILES["cpu"]
    assert (cpu["model"], cpu["batch_size"], cpu["max_length"]) == ("minilm", 64, 32)
    assert (cpu["final_tasks"], cpu["transfer_mode"]) == ("sts", "fasttest")
    paper = PROFILES["paper"]
    assert (paper["model"], paper["batch_size"], paper["max_length"]) == ("bert-base-uncased", 64, 32)
    assert paper["max_steps"] is None and paper["eval_every"] == 125 and paper["lr"] == 3e-5
    assert (paper["final_tasks"], paper["transfer_mode"]) == ("all", "test")
    for profile in PROFILES.values():
        assert set(profile) <= set(OVERRIDABLE)


def test_resolution_fills_defaults_and_sorts_params(data_root: Path) -> None:
    config = smoke(data_root)
    assert isinstance(config.params, SimCSEParams)  # typed inside the program
    assert config.params == SimCSEParams(temperature=0.05, mlp=True)
    stored = config.to_dict()["params"]  # a dict only at the store / Ray boundary, keys sorted
    assert stored == {"mlp": True, "temperature": 0.05} and list(stored) == sorted(stored)
    assert config.threads == 1  # the smoke and cpu profiles fix the thread count
    assert config.corpus == str((data_root / "corpus" / "nli-sentences.txt").resolve())
    assert re.fullmatch(r"nli-sentences\.txt:[0-9a-f]{12}", config.corpus_id)
    assert (config.seed, config.grad_clip, config.weight_decay, config.warmup_steps) == (42, 1.0, 0.0, 0)
    assert config.train_pooler == config.eval_pooler == "cls_before_pooler"


def test_paper_profile_resolves_offline(data_root: Path) -> None:
    config = resolve_config("simcse", profile="paper", data_root=data_root)
    assert config.max_steps is None and config.model == "bert-base-uncased"
    assert config.corpus_id.startswith("wiki1m_for_simcse.txt:")


def test_strings_are_coerced(data_root: Path) -> None:
    config = smoke(data_root, batch_size="16", lr="1e-4", max_steps="epoch", params={"temperature": "0.1"})
    assert config.batch_size == 16 and config.lr == 1e-4 and config.max_steps is None
    assert config.params == SimCSEParams(temperature=0.1)
    assert smoke(data_root, max_steps="none").max_steps is None
    assert smoke(data_root, max_steps=0).max_steps == 0


def test_same_config_same_id(data_root: Path) -> None:
    a, b = smoke(data_root), smoke(data_root)
    assert a == b and a.run_id() == b.run_id() and a.group_id() == b.group_id()
    assert re.fullmatch(r"simcse-[0-9a-f]{12}", a.run_id())
    assert len({a, b}) == 1  # hashable (by run id) despite the params dict
    # Passing the defaults explicitly changes nothing.
    c = smoke(data_root, seed=42, lr=3e-5, params={"temperature": 0.05})
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
def test_result_affecting_changes_change_both_ids(data_root: Path, change: dict[str, object]) -> None:
    base = smoke(data_root)
    other = smoke(data_root, **change)
    assert other.run_id() != base.run_id()
    assert other.group_id() != base.group_id()


def test_seed_changes_run_id_not_group_id(data_root: Path) -> None:
    a, b = smoke(data_root), smoke(data_root, seed=7)
    assert a.run_id() != b.run_id()
    assert a.group_id() == b.group_id()


def test_corpus_enters_the_id_by_content_not_path(data_root: Path, tmp_path: Path) -> None:
    original = data_root / "corpus" / "nli-sentences.txt"
    moved = tmp_path / "elsewhere" / "nli-sentences.txt"
    moved.parent.mkdir()
    shutil.copy(original, moved)
    a, b = smoke(data_root), smoke(data_root, corpus=str(moved))
    assert a.corpus != b.corpus and a.run_id() == b.run_id()
    moved.write_text("\n".join(reversed(SENTENCES)) + "\n")
    assert corpus_id(moved) != corpus_id(original)
    assert smoke(data_root, corpus=str(moved)).run_id() != a.run_id()


def test_profile_label_is_not_in_the_id(data_root: Path) -> None:
    smoke_config = smoke(data_root)
    same = resolve_config(
        "simcse",
        None,
        "cpu",
        {
            k: v
            for k, v in smoke_config.settings_dict().items()
            if k not in ("corpus", "corpus_id", "profile")
        },
        data_root=data_root,
    )
    assert same.profile == "cpu" and same.run_id() == smoke_config.run_id()


def test_round_trip_through_json(data_root: Path) -> None:
    config = smoke(data_root, max_steps=None)
    data = json.loads(json.dumps(config.to_dict()))
    again = RunConfig.from_dict(data)
    assert again == config and again.run_id() == config.run_id()
    with pytest.raises(ConfigError, match="bogus"):
        RunConfig.from_dict({**data, "bogus": 1})


def test_unknown_profile_has_a_hint(data_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown profile 'smok'.*did you mean 'smoke'"):
        resolve_config("simcse", profile="smok", data_root=data_root)


def test_unknown_method_has_a_hint(data_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown method 'simcs'.*did you mean 'simcse'"):
        resolve_config("simcs", profile="smoke", data_root=data_root)


def test_misspelt_param_key(data_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"'temprature'.*did you mean 'temperature'"):
        smoke(data_root, params={"temprature": 0.1})


def test_misspelt_override_key(data_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown run setting 'batchsize'.*did you mean 'batch_size'"):
        smoke(data_root, batchsize=8)
    with pytest.raises(ConfigError, match="unknown run setting 'corpus_id'"):
        smoke(data_root, corpus_id="x")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"eval_every": 0}, "eval_every"),
        ({"batch_size": 1}, "batch_size"),
        ({"max_steps": -1}, "max_steps"),
        ({"lr": 0}, "lr"),
        ({"final_tasks": "al"}, "final_tasks"),
        ({"transfer_mode": "fast"}, "transfer_mode"),
        ({"eval_pooler": "mean"}, "eval_pooler"),
        ({"post_whiten": "zcaa"}, "post_whiten"),
        ({"batch_size": "many"}, "batch_size"),
        ({"params": {"temperature": -1}}, "temperature"),
        ({"params": {"temperature": "nan"}}, "temperature must be finite"),
        ({"lr": "inf"}, "lr must be finite"),
        ({"grad_clip": float("nan")}, "grad_clip must be finite"),
        ({"seed": -1}, "seed must be in 0 .. 2"),
        ({"seed": 2**32}, "seed must be in 0 .. 2"),
        ({"threads": 0}, "threads must be >= 1"),
        ({"precision": "fp16"}, "precision"),
    ],
)
def test_bad_values_name_the_field(data_root: Path, change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        smoke(data_root, **change)


def test_missing_corpus_is_a_data_error(data_root: Path) -> None:
    with pytest.raises(DataError, match="corpus"):
        smoke(data_root, corpus=str(data_root / "nope.txt"))


def test_group_counts_keep_their_shape_on_every_profile(data_root: Path) -> None:
    # random:tiny has d = 64: the default 384 groups (2 channels each at d = 768) become 32 groups.
    default = resolve_config("whitenedcse", None, "smoke", data_root=data_root).params
    assert isinstance(default, WhitenedCSEParams) and default.effective_groups(64) == 32
    ok = resolve_config(
        "whitenedcse", {"num_groups": 7, "group_scaling": "count"}, "smoke", data_root=data_root
    )
    assert ok.params == WhitenedCSEParams(num_groups=7, group_scaling="count")  # uneven groups are allowed
    with pytest.raises(ConfigError, match=r"num_groups=384 gives 384 groups, more than .* d=64"):
        resolve_config(
            "whitenedcse", {"num_groups": 384, "group_scaling": "count"}, "smoke", data_root=data_root
        )


def test_overrides_are_honoured_before_anything_reads_the_profile(data_root: Path) -> None:
    # The paper profile's default corpus is absent: an override must be enough (the seed, model and
    # budget all come from the same resolved settings; nothing resolves a throwaway config).
    (data_root / "corpus" / "wiki1m_for_simcse.txt").unlink()
    corpus = str(data_root / "corpus" / "nli-sentences.txt")
    settings = resolve_settings("paper", {"corpus": corpus, "seed": 7}, data_root)
    assert settings.seed == 7 and settings.corpus_id.startswith("nli-sentences.txt:")
    config = resolve_run("simcse", {"temperature": 0.1}, settings, seed=9)
    assert (
        config.seed == 9
        and config.params == SimCSEParams(temperature=0.1)
        and config.model == "bert-base-uncased"
    )
    with pytest.raises(DataError, match="wiki1m_for_simcse"):
        resolve_settings("paper", None, data_root)


def test_hidden_size_lookup_never_asks_an_offline_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import harness.config.models as enc

    enc.hidden_size_of.cache_clear()
    asked: list[str] = []

    def no_network(*args: object, **kwargs: object) -> None:
        asked.append("connect")
        raise OSError("no network in this test")

    from huggingface_hub import constants

    monkeypatch.setattr("socket.create_connection", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # restored afterwards
    assert enc.hidden_size_of("sentence-transformers/bert-base-nli-mean-tokens") == 768  # known table
    local = tmp_path / "enc"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"hidden_size": 96}))
    assert enc.hidden_size_of(str(local)) == 96  # a local config, read without transformers
    with pytest.raises(ModelLoadError, match="hub is offline or unreachable"):
        enc.hidden_size_of("someone/not-cached-anywhere")
    assert asked == []  # HF_HUB_OFFLINE: not even a connection attempt
    enc.hidden_size_of.cache_clear()


def test_a_flow_needs_a_width_its_levels_can_halve(data_root: Path, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 12}))
    overrides = {"model": str(tmp_path), "post_whiten": "flow"}
    with pytest.raises(ConfigError, match="divisible by 8, got d=12"):
        resolve_config("simcse", None, "smoke", overrides, data_root=data_root)
    whitened = resolve_config(
        "simcse", None, "smoke", {**overrides, "post_whiten": "pca"}, data_root=data_root
    )
    assert whitened.post_whiten == "pca"  # whitening suits any width
