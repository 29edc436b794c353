"""Run settings: profile and overrides resolved, coerced and validated, the corpus in the id by content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.config.settings import (
    check_post_whiten_sentences,
    corpus_id,
    corpus_problems,
    flag_label,
    resolve_settings,
)
from harness.errors import ConfigError, DataError
from harness.store.run_config import resolve_config, resolve_run
from methods.simcse import SimCSEParams
from tests.helpers import CONFIG_SENTENCES, corpus_text, smoke_config


def test_paper_profile_resolves_offline(config_root: Path) -> None:
    config = resolve_config("simcse", profile="paper", data_root=config_root)
    assert config.max_steps is None and config.model == "bert-base-uncased"
    assert config.corpus_id.startswith("wiki1m_for_simcse.txt:")


def test_strings_are_coerced(config_root: Path) -> None:
    config = smoke_config(
        config_root, batch_size="16", lr="1e-4", max_steps="epoch", params={"temperature": "0.1"}
    )
    assert config.batch_size == 16 and config.lr == 1e-4 and config.max_steps is None
    assert config.params == SimCSEParams(temperature=0.1)
    assert smoke_config(config_root, max_steps="none").max_steps is None
    assert smoke_config(config_root, max_steps=0).max_steps == 0


def test_corpus_enters_the_id_by_content_not_path(config_root: Path, tmp_path: Path) -> None:
    original = config_root / "corpus" / "nli-sentences.txt"
    moved = tmp_path / "elsewhere" / "nli-sentences.txt"
    moved.parent.mkdir()
    shutil.copy(original, moved)
    a, b = smoke_config(config_root), smoke_config(config_root, corpus=str(moved))
    assert a.corpus != b.corpus and a.run_id() == b.run_id()
    moved.write_text(corpus_text(reversed(CONFIG_SENTENCES)))
    assert corpus_id(moved) != corpus_id(original)
    assert smoke_config(config_root, corpus=str(moved)).run_id() != a.run_id()


def test_unknown_profile_has_a_hint(config_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown profile 'smok'.*did you mean 'smoke'"):
        resolve_config("simcse", profile="smok", data_root=config_root)


def test_misspelt_override_key(config_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown run setting 'batchsize'.*did you mean 'batch_size'"):
        smoke_config(config_root, batchsize=8)
    with pytest.raises(ConfigError, match="unknown run setting 'corpus_id'"):
        smoke_config(config_root, corpus_id="x")


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
        ({"seed": -1}, r"^seed must be from 0 to 4294967295 \(NumPy's range\), got -1$"),
        ({"seed": 2**32}, r"^seed must be from 0 to 4294967295 \(NumPy's range\), got 4294967296$"),
        ({"seed": 1.5}, r"^override seed: 1\.5 is not a valid int$"),
        ({"seed": True}, r"^override seed: True is not a valid int$"),
        ({"seed": "\u0664\u0662"}, r"^override seed: '\u0664\u0662' is not a valid int$"),
        ({"seed": "4_2"}, r"^override seed: '4_2' is not a valid int$"),
        ({"lr": "\u0661e-4"}, r"^override lr: '\u0661e-4' is not a valid float$"),
        ({"threads": 0}, r"^threads must be from 1 to 1024 \(or none = torch's default\), got 0$"),
        ({"threads": "1025"}, r"^threads must be from 1 to 1024 .*got 1025$"),
        ({"max_steps": "1000000000000000"}, r"^max_steps must be from 0 to 10000000 .*got 10{15}$"),
        ({"max_steps": 1e15}, r"^max_steps must be from 0 to 10000000 .*got 10{15}$"),
        ({"max_steps": 2**70}, r"^max_steps must be from 0 to 10000000 "),
        ({"warmup_steps": 2**70}, r"^warmup_steps must be from 0 to 10000000, "),
        ({"eval_every": 10**8}, r"^eval_every must be from 1 to 10000000, "),
        ({"batch_size": 2**70}, r"^batch_size must be from 2 to 2147483647 "),
        ({"precision": "fp64"}, "precision"),
    ],
)
def test_bad_values_name_the_field(config_root: Path, change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        smoke_config(config_root, **change)


def test_missing_corpus_is_a_data_error(config_root: Path) -> None:
    with pytest.raises(DataError, match="corpus"):
        smoke_config(config_root, corpus=str(config_root / "nope.txt"))


def test_overrides_are_honoured_before_anything_reads_the_profile(config_root: Path) -> None:
    # The paper profile's default corpus is absent: an override must be enough (the seed, model and
    # budget all come from the same resolved settings; nothing resolves a throwaway config).
    (config_root / "corpus" / "wiki1m_for_simcse.txt").unlink()
    corpus = str(config_root / "corpus" / "nli-sentences.txt")
    settings = resolve_settings("paper", {"corpus": corpus, "seed": 7}, config_root)
    assert settings.seed == 7 and settings.corpus_id.startswith("nli-sentences.txt:")
    config = resolve_run("simcse", {"temperature": 0.1}, settings, seed=9)
    assert (
        config.seed == 9
        and config.params == SimCSEParams(temperature=0.1)
        and config.model == "bert-base-uncased"
    )
    with pytest.raises(DataError, match="wiki1m_for_simcse"):
        resolve_settings("paper", None, config_root)


def test_a_coercion_error_names_where_the_value_came_from(config_root: Path) -> None:
    with pytest.raises(ConfigError, match=r"^override lr must be finite, got 'inf'$"):
        resolve_settings("smoke", {"lr": "inf"}, config_root)
    with pytest.raises(ConfigError, match=r"^--max-steps: '1e15' is not a valid int$"):
        resolve_settings("smoke", {"max_steps": "1e15"}, config_root, label=flag_label)
    with pytest.raises(ConfigError, match=r"^--lr must be finite, got 'nan'$"):
        resolve_settings("smoke", {"lr": "nan"}, config_root, label=flag_label)
    # text takes any text: what it names is checked where it is used (a model, a corpus file)
    with pytest.raises(DataError, match="inf"):
        resolve_settings("smoke", {"corpus": "inf"}, config_root)


def test_a_warm_up_longer_than_the_run_is_refused(config_root: Path) -> None:
    assert smoke_config(config_root, warmup_steps=4).warmup_steps == 4  # smoke: 4 steps
    with pytest.raises(ConfigError, match=r"^warmup_steps 5 is more than the run's max_steps 4: the "):
        smoke_config(config_root, warmup_steps=5)
    for profile in ("cpu", "demo", "night", "paper", "smoke"):  # every profile stays valid
        resolve_settings(profile, require_corpus=False)
    epoch = smoke_config(config_root, max_steps=None, warmup_steps=3, batch_size=8)
    assert corpus_problems(epoch, 24) == []  # 3 steps of 8
    (problem,) = corpus_problems(epoch, 23)
    assert str(problem).startswith("warmup_steps 3 is more than the run's 2 steps (one epoch of 23 sentences")


def test_post_processing_needs_enough_corpus_sentences_and_more_than_the_width(config_root: Path) -> None:
    plain = smoke_config(config_root, post_whiten_sentences=500)
    assert corpus_problems(plain, 100, 64) == []  # no post-processing: the count is not read
    flow = smoke_config(config_root, post_whiten="flow", post_whiten_sentences=50)
    assert corpus_problems(flow, 100, 64) == []  # a flow fits on any count
    many = smoke_config(config_root, post_whiten="flow", post_whiten_sentences=500)
    (problem,) = corpus_problems(many, 100)
    assert str(problem).startswith("post_whiten_sentences 500 is more than the 100 sentences of corpus")
    zca = smoke_config(config_root, post_whiten="zca", post_whiten_sentences=64)
    (problem,) = corpus_problems(zca, 100, 64)
    assert str(problem).startswith("post_whiten_sentences 64 is not more than the encoder's width 64: zca")
    pca = smoke_config(config_root, post_whiten="pca", post_whiten_sentences=65)
    assert corpus_problems(pca, 100, 64) == []


def test_one_bound_for_the_post_processing_sentences_of_a_run_and_of_eval() -> None:
    check_post_whiten_sentences("--whiten-sentences", 2)
    with pytest.raises(ConfigError, match=r"^--whiten-sentences must be from 2 to 2147483647, got 1$"):
        check_post_whiten_sentences("--whiten-sentences", 1)
    with pytest.raises(ConfigError, match=r"^post_whiten_sentences must be from 2 to 2147483647, got 1$"):
        check_post_whiten_sentences("post_whiten_sentences", 1)
