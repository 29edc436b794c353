"""``harness eval``'s job (harness.jobs.evaluate) without the command line: the inputs checked before
the encoder loads, one encoder scored into the record the command writes, the table it prints and
the scores that are not numbers. (The command: tests/commands/test_eval_cmd.py.)"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError, DataError
from harness.jobs.evaluate import EvalOptions, check_inputs, evaluate_encoder, format_table, non_finite


def test_the_inputs_are_checked_before_the_encoder_loads(mini_data_root: Path, tmp_path: Path) -> None:
    options = EvalOptions(
        str(tmp_path / "out.json"), "random:tiny", data_dir=str(mini_data_root), device="cpu"
    )
    inputs = check_inputs(options)
    assert (inputs.pooler, inputs.mode, inputs.device) == ("cls_before_pooler", "fasttest", "cpu")
    assert inputs.output == tmp_path / "out.json" and inputs.pipeline is None and inputs.whiten_corpus is None
    # the bound of a run's post_whiten_sentences, named by the flag
    with pytest.raises(ConfigError, match=r"^--whiten-sentences must be from 2 to 2147483647, got 1$"):
        check_inputs(dataclasses.replace(options, post_whiten="zca", whiten_sentences=1))
    with pytest.raises(ConfigError, match=r"^--mode: 'tset' is not one of 'fasttest', 'test' \(did you mean"):
        check_inputs(dataclasses.replace(options, mode="tset"))  # the run settings' rule (transfer_mode)
    with pytest.raises(ConfigError, match=r"^--pooler: 'mean' is not one of 'cls_before_pooler'"):
        check_inputs(dataclasses.replace(options, pooler="mean"))
    data = tmp_path / "data"
    shutil.copytree(mini_data_root / "senteval", data / "senteval")
    shutil.rmtree(data / "senteval" / "STS" / "STS12-en-test")
    with pytest.raises(DataError, match=r"STS data file not found: .*STS12-en-test.* \(and \d+ more\)"):
        check_inputs(EvalOptions(str(tmp_path / "out.json"), "random:tiny", data_dir=str(data), device="cpu"))
    assert not (tmp_path / "out.json").exists()


def test_one_encoder_scored_into_the_record_the_command_writes(mini_data_root: Path, tmp_path: Path) -> None:
    options = EvalOptions(
        str(tmp_path / "out.json"),
        "random:tiny",
        tasks="STSBenchmark",
        data_dir=str(mini_data_root),
        device="cpu",
    )
    done = evaluate_encoder(options)
    assert done.model == "random:tiny" and set(done.record) == {"sts", "meta", "details"}
    assert set(done.record["sts"]) == {"STSBenchmark", "avg"}
    meta = done.record["meta"]
    assert (
        meta["pooler"] == "cls_before_pooler"
        and meta["tasks"] == "STSBenchmark"
        and meta["st_layers"] is None
    )
    assert meta["data_root"] == str(mini_data_root) and meta["seconds"]["total"] > 0
    assert done.record["sts"] == done.report.results["sts"]


def test_a_cls_pooler_without_a_pooler_layer_is_one_line_before_anything_is_embedded(
    mini_data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.jobs.evaluate as job
    from harness.encoder.loading import load_encoder

    def no_pooler(name: str | None, device: str = "cpu") -> object:
        encoder = load_encoder(name, device)
        model: Any = encoder.model
        model.pooler = None
        return encoder

    monkeypatch.setattr(job, "load_encoder", no_pooler)
    options = EvalOptions(
        str(tmp_path / "o.json"), "random:tiny", pooler="cls", data_dir=str(mini_data_root), device="cpu"
    )
    with pytest.raises(ConfigError, match=r"^--pooler 'cls' reads the model's pooler layer, and encoder "):
        evaluate_encoder(options)


def test_the_printed_table_and_the_scores_that_are_not_numbers() -> None:
    results = {"sts": {"STS12": 61.234, "avg": 70.0}, "transfer": {"MR": 80.0}}
    assert format_table(results).splitlines() == [
        "STS",
        " STS12     avg",
        " 61.23   70.00",
        "TRANSFER",
        "    MR",
        " 80.00",
    ]
    bad = {"sts": {"STS12": math.nan, "avg": 1.0}, "transfer": {"MR": math.inf}, "meta": {"n": 3}}
    assert non_finite(bad) == ["sts.STS12", "transfer.MR"]
