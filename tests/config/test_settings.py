"""Run settings: profile and overrides resolved, coerced and validated, the corpus in the id by content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.config.settings import corpus_id, resolve_settings
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
        ({"seed": 1.5}, r"^seed: 1\.5 is not a valid int$"),
        ({"seed": True}, r"^seed: True is not a valid int$"),
        ({"seed": "\u0664\u0662"}, r"^seed: '\u0664\u0662' is not a valid int$"),
        ({"seed": "4_2"}, r"^seed: '4_2' is not a valid int$"),
        ({"lr": "\u0661e-4"}, r"^lr: '\u0661e-4' is not a valid float$"),
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
