"""A model folder is checked like data: tokenizer files present, loadable and consistent with the
model's vocabulary, ``max_length`` and the tokenizer's length within the encoder's positions; in
``check``, ``eval``, ``train`` and a grid's pre-flight, each failure one line and exit 2 (``check``:
one problem line, exit 1) before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.config.models import check_model_inputs, model_problems, packaged_model_dir
from harness.encoder.loading import check_loaded, load_encoder
from harness.errors import ConfigError, ModelLoadError
from tests.helpers import (
    SMOKE_SPEC,
    TOKENIZER_FILES,
    copy_packaged_tokenizer,
    edit_json,
    error_lines,
    make_data_root,
)


def bert_folder(folder: Path, positions: int = 512) -> Path:
    """A whole tiny BERT folder of ``positions`` positions: config, weights and the packaged
    tokenizer's files (whose stated length is 512)."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=positions,
    )
    BertModel(config).save_pretrained(folder)
    copy_packaged_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bert_folder(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def short_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 positions under a tokenizer that states 512: what evaluation embeds does not fit."""
    return bert_folder(tmp_path_factory.mktemp("models") / "short", positions=16)


def variant(
    tiny: Path, tmp_path: Path, *, drop_tokenizer: bool = False, vocab_size: int | None = None
) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny, folder)
    if drop_tokenizer:
        for name in TOKENIZER_FILES:
            (folder / name).unlink()
    if vocab_size is not None:
        edit_json(folder / "config.json", vocab_size=vocab_size)
    return folder


def test_a_whole_folder_has_no_problem(tiny_folder: Path) -> None:
    assert model_problems(str(tiny_folder), 32) == []
    check_model_inputs(str(tiny_folder), 32)


def test_a_folder_without_tokenizer_files_is_refused_everywhere(
    tiny_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = variant(tiny_folder, tmp_path, drop_tokenizer=True)
    data = make_data_root(tmp_path / "data")
    runs = tmp_path / "runs"
    with pytest.raises(ModelLoadError, match="no tokenizer files"):
        load_encoder(str(folder))

    assert (
        main(["eval", "--model", str(folder), "--data-dir", str(data), "--output", str(tmp_path / "e.json")])
        == 2
    )
    (line,) = error_lines(capsys)
    assert f"model {folder}: no tokenizer files" in line and not (tmp_path / "e.json").exists()

    train = ["train", "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main([*train, "--model", str(folder)]) == 2
    (line,) = error_lines(capsys)
    assert "no tokenizer files" in line and not (runs / "records").exists()

    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main(["grid", *common, "--override", f"model={folder}"]) == 2
    (line,) = error_lines(capsys)
    assert "no tokenizer files" in line
    assert (
        not (runs / "tune").exists() and not (runs / "grid.lock").exists() and not (runs / "records").exists()
    )

    assert main(["check", *common, "--override", f"model={folder}"]) == 1
    problems = [ln for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln and "SentEval" not in ln]
    assert len(problems) == 1 and "no tokenizer files" in problems[0]


def test_a_vocabulary_smaller_than_the_tokenizer_is_one_line(
    tiny_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = variant(tiny_folder, tmp_path, vocab_size=20000)
    data = make_data_root(tmp_path / "data")
    assert [str(p) for p in model_problems(str(folder))] == [
        f"model {folder}: its tokenizer has 30522 tokens, more than the 20000 rows of the model's embedding "
        "(vocab_size): ids past them cannot be embedded; use the model's own tokenizer"
    ]
    assert (
        main(["eval", "--model", str(folder), "--data-dir", str(data), "--output", str(tmp_path / "e.json")])
        == 2
    )
    (line,) = error_lines(capsys)
    assert "more than the 20000 rows" in line
    # the check after loading says the same of any encoder (a hub model has no folder to read first)
    (folder / "vocab.txt").unlink()
    (folder / "tokenizer.json").unlink()
    shutil.copy(packaged_model_dir() / "vocab.txt", folder / "vocab.txt")
    with pytest.raises(ModelLoadError, match="more than the 20000 rows"):
        load_encoder(str(folder))


def test_another_models_small_tokenizer_is_refused(tiny_folder: Path, tmp_path: Path) -> None:
    folder = variant(tiny_folder, tmp_path)
    for name in ("tokenizer.json", "vocab.txt"):
        (folder / name).unlink()
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", encoding="utf-8")
    (problem,) = model_problems(str(folder))
    assert "its tokenizer has 6 tokens, less than half of the model's 30522" in str(problem)


def test_max_length_beyond_the_positions_is_refused_before_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_data_root(tmp_path / "data")
    runs = tmp_path / "runs"
    line = "max_length 600 is more than the 512 positions of encoder random:tiny"
    with pytest.raises(ConfigError, match=line):
        check_model_inputs("random:tiny", 600)
    with pytest.raises(ConfigError, match="max_length 513 is more than the 512 positions of encoder minilm"):
        check_loaded(load_encoder("minilm"), 513)
    check_loaded(load_encoder("minilm"), 512)

    train = ["train", "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main([*train, "--max-length", "600"]) == 2
    (err,) = error_lines(capsys)
    assert line in err and not (runs / "records").exists()

    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main(["grid", *common, "--max-length", "600"]) == 2
    (err,) = error_lines(capsys)
    assert line in err and not (runs / "tune").exists() and not (runs / "records").exists()

    assert main(["check", *common, "--max-length", "600"]) == 1
    problems = [ln for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln and "SentEval" not in ln]
    assert len(problems) == 1 and line in problems[0]


def refused_by_train_grid_and_check(
    folder: Path, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``train``, ``grid`` (``--max-length 16``: within the folder's positions) refuse ``folder``
    with one line holding ``text`` before writing anything; ``check`` lists it as its one problem."""
    data = make_data_root(tmp_path / "data")
    runs = tmp_path / "runs"
    train = ["train", "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main([*train, "--model", str(folder), "--max-length", "16"]) == 2
    (line,) = error_lines(capsys)
    assert text in line and not (runs / "records").exists()

    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    common += ["--override", f"model={folder}", "--max-length", "16"]
    assert main(["grid", *common]) == 2
    (line,) = error_lines(capsys)
    assert text in line
    assert (
        not (runs / "tune").exists() and not (runs / "grid.lock").exists() and not (runs / "records").exists()
    )

    assert main(["check", *common]) == 1
    problems = [ln for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln and "SentEval" not in ln]
    assert len(problems) == 1 and text in problems[0]


def test_positions_fewer_than_the_tokenizers_length_are_refused_before_work(
    short_folder: Path,
    tiny_folder: Path,
    mini_data_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = (
        f"model {short_folder}: its tokenizer takes inputs of up to 512 tokens (model_max_length), more "
        "than the model's 16 positions (max_position_embeddings)"
    )
    loaded: list[str | None] = []
    import harness.jobs.evaluate as evaluate

    real_load = evaluate.load_encoder

    def load(name: str | None, **kwargs: Any) -> Any:
        loaded.append(name)
        return real_load(name, **kwargs)

    monkeypatch.setattr(evaluate, "load_encoder", load)
    out = tmp_path / "e.json"
    args = ["eval", "--tasks", "sts", "--model", str(short_folder), "--data-dir", str(mini_data_root)]
    assert main([*args, "--output", str(out)]) == 2
    (line,) = error_lines(capsys)
    assert text in line and loaded == [] and not out.exists()  # refused before the weights load
    refused_by_train_grid_and_check(short_folder, text, tmp_path, capsys)

    # a folder whose positions hold its tokenizer's length passes, and the whole folder evaluates
    fits = bert_folder(tmp_path / "fits", positions=8)
    capsys.readouterr()  # transformers' progress bar of the save
    tokenizer_config = json.loads((fits / "tokenizer_config.json").read_text(encoding="utf-8"))
    (fits / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, "model_max_length": 8}))
    assert model_problems(str(fits), 8) == []
    fits_out = tmp_path / "fits.json"  # passes the checks; a longer sentence is still one line
    args = ["eval", "--tasks", "STSBenchmark", "--model", str(fits), "--data-dir", str(mini_data_root)]
    assert main([*args, "--output", str(fits_out)]) == 2
    (line,) = error_lines(capsys)
    assert "tokens is longer than the 8 positions of encoder" in line and not fits_out.exists()
    args = ["eval", "--tasks", "STSBenchmark", "--model", str(tiny_folder), "--data-dir", str(mini_data_root)]
    assert main([*args, "--output", str(out)]) == 0 and loaded == [str(fits), str(tiny_folder)]


def test_a_tokenizer_that_cannot_load_is_refused_before_work(
    tiny_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = variant(tiny_folder, tmp_path)
    fast = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    fast["model"]["type"] = "NoSuchModel"  # its vocabulary still readable, the tokenizer not
    (folder / "tokenizer.json").write_text(json.dumps(fast), encoding="utf-8")
    text = f"model {folder}: its tokenizer cannot be loaded: "
    refused_by_train_grid_and_check(folder, text, tmp_path / "commands", capsys)
    with pytest.raises(ModelLoadError, match="its tokenizer cannot be loaded"):
        load_encoder(str(folder))
