"""Bad input: one line naming the problem, exit status 2, no traceback, before any work is done."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from data_roots import make_data_root

from harness.cli import main
from harness.errors import DataError
from harness.evaluation.transfer import read_task
from harness.grid.plan import expand
from harness.specs.parse import load_table_spec
from harness.store.record import new_record
from harness.store.run_store import RunStore

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "tests" / "fixtures" / "specs" / "smoke_grid.toml"
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A data root with a corpus only (every case below fails before evaluation data is read)."""
    return make_data_root(tmp_path / "data")


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


NO_CUDA = not torch.cuda.is_available()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "temperature=inf"], "--set temperature must be finite, got 'inf'"),
        (["--set", "temperature=nan"], "--set temperature must be finite, got 'nan'"),
        (["--lr", "nan"], "lr must be finite, got nan"),
        (["--lr", "inf"], "lr must be finite, got inf"),
        (["--seed", "-1"], "--seed must be an integer from 0 to 4294967295"),
        (["--seed", str(2**32)], "--seed must be an integer from 0 to 4294967295"),
        (["--threads", "0"], "--threads must be >= 1, got 0"),
        (["--threads", "-2"], "--threads must be >= 1, got -2"),
        (["--device", "nonsense"], "--device 'nonsense' is not a torch device"),
        (["--device", "cuda:99"], "--device cuda:99"),
        pytest.param(
            ["--device", "cuda"],
            "no CUDA GPU is available here",
            marks=pytest.mark.skipif(not NO_CUDA, reason="this machine has a GPU"),
        ),
    ],
)
def test_train_rejects_bad_settings(
    flags: list[str], message: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    args = ["train", "--profile", "smoke", "--data-dir", str(root), "--output-dir", str(runs)]
    assert main([*args, *flags]) == 2
    assert message in one_error_line(capsys)
    assert not (runs / "records").exists()


def test_train_rejects_a_corpus_folder_and_an_unwritable_store(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train", "--profile", "smoke", "--data-dir", str(root)]
    assert main([*args, "--corpus", str(tmp_path), "--output-dir", str(tmp_path / "r")]) == 2
    assert f"corpus {tmp_path} is a folder, not a file" in one_error_line(capsys)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert main([*args, "--output-dir", str(a_file)]) == 2
    assert f"--output-dir {a_file} is a file, not a folder" in one_error_line(capsys)


def test_eval_checks_its_output_and_device_before_evaluating(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    args = ["eval", "--tasks", "sts", "--data-dir", str(root)]
    # (the STS files are missing here too: the output is checked first, before any data or model)
    assert main([*args, "--output", str(a_file / "out.json")]) == 2
    assert f"the folder of --output {a_file} is a file, not a folder" in one_error_line(capsys)
    assert main([*args, "--output", str(tmp_path), "--device", "cpu"]) == 2
    assert f"--output {tmp_path} is a folder, not a file" in one_error_line(capsys)
    assert main([*args, "--output", str(tmp_path / "o.json")]) == 2
    assert "STS data file not found" in one_error_line(capsys)  # the next check, still before the model
    assert main([*args, "--output", str(tmp_path / "o.json"), "--device", "bogus"]) == 2
    assert "--device 'bogus' is not a torch device" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lr", "inf"], "override lr must be finite, got inf"),
        (["--override", "warmup_steps=nan"], "override warmup_steps must be finite, got 'nan'"),
    ],
)
def test_grid_rejects_non_finite_overrides(
    flags: list[str], message: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["grid", str(SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs")]
    assert main([*args, *flags]) == 2
    assert message in one_error_line(capsys)


def test_grid_rejects_bad_spec_files(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_utf8 = tmp_path / "latin.toml"
    not_utf8.write_bytes(SPEC.read_bytes().replace(b"Smoke grid", b"Smoke gr\xeed"))
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    args = ["--smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs"), "--dry-run"]
    assert main(["grid", str(not_utf8), *args]) == 2
    assert f"table spec {not_utf8} is not valid UTF-8 (byte" in one_error_line(capsys)
    assert main(["grid", str(folder), *args]) == 2
    assert f"table spec {folder} is a folder" in one_error_line(capsys)


def test_grid_checks_the_corpus_before_ray_starts(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad_corpus.txt"
    bad.write_text("one sentence .\n\nanother .\n" * 10)
    runs = tmp_path / "runs"
    args = ["grid", str(SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*args, "--override", f"corpus={bad}"]) == 2
    line = one_error_line(capsys)
    assert f"corpus {bad}: line 2 is empty" in line
    assert not (runs / "records").exists() and not (runs / "tune").exists()
    assert not (runs / "grid.lock").exists()


def test_a_finished_record_without_scores_is_reported_and_run_again(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    plan = expand([load_table_spec(SPEC)], "smoke", data_root=root)
    store = RunStore(runs)
    hollow = new_record(plan.runs[0].config)
    hollow["status"] = "finished"  # but "final" is empty
    store.save(hollow)
    good = new_record(plan.runs[1].config)
    good["status"] = "finished"
    good["final"] = {"sts": {"avg": 50.0}}
    store.save(good)
    args = ["grid", str(SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*args, "--dry-run", "--skip-failed"]) == 0
    out = capsys.readouterr().out
    assert f"warning: {plan.runs[0].run_id}: record says finished but has no final sts scores" in out
    assert f"[todo] {plan.runs[0].run_id}" in out and f"[done] {plan.runs[1].run_id}" in out


# -- transfer data: an empty file or split is named, never scored ------------------------------------
def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_an_empty_binary_file_is_a_data_error(tmp_path: Path) -> None:
    write(tmp_path / "MR" / "rt-polarity.pos", "a fine film .\nwonderful .\n")
    write(tmp_path / "MR" / "rt-polarity.neg", "")
    with pytest.raises(
        DataError, match=r"MR: the label-0 file is empty \(no sentences\): .*rt-polarity\.neg"
    ):
        read_task(tmp_path, "MR")
    write(tmp_path / "MR" / "rt-polarity.neg", "dull .\n")
    text = read_task(tmp_path, "MR")
    assert len(text.splits["all"]) == 3 and set(np.unique(text.splits["all"].labels)) == {0, 1}


@pytest.mark.parametrize(
    ("task", "files", "empty", "message"),
    [
        (
            "SST2",
            {f"SST/binary/sentiment-{s}": "good .\t1\nbad .\t0\n" for s in ("train", "dev", "test")},
            "SST/binary/sentiment-dev",
            "SST2: the dev split is empty",
        ),
        (
            "TREC",
            {"TREC/train_5500.label": "NUM:date when is it ?\n", "TREC/TREC_10.label": "HUM:ind who ?\n"},
            "TREC/TREC_10.label",
            "TREC: the test split is empty",
        ),
        (
            "MRPC",
            {f"MRPC/msr_paraphrase_{s}.txt": MRPC_HEADER + "1\t1\t2\ta .\tb .\n" for s in ("train", "test")},
            "MRPC/msr_paraphrase_test.txt",
            "MRPC: the test split is empty",
        ),
    ],
)
def test_an_empty_split_names_the_task_and_file(
    task: str, files: dict[str, str], empty: str, message: str, tmp_path: Path
) -> None:
    for name, text in files.items():
        write(tmp_path / name, text)
    read_task(tmp_path, task)  # the full files read
    header = MRPC_HEADER if task == "MRPC" else ""
    write(tmp_path / empty, header)
    with pytest.raises(DataError, match=rf"{message} \(no sentences\): .*{Path(empty).name}"):
        read_task(tmp_path, task)


def test_finite_check_helpers() -> None:
    from harness.config.inputs import check_finite_overrides

    check_finite_overrides({"a": 1.0, "b": "text", "c": "3e-5", "d": None}, "x")
    for bad in (math.inf, -math.inf, math.nan, "inf", "-Infinity", "NaN", "1e999"):
        with pytest.raises(Exception, match="must be finite"):
            check_finite_overrides({"k": bad}, "x")


def test_grid_refuses_a_runs_folder_it_cannot_write_before_ray_starts(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "runs"
    a_file.write_text("not a folder")
    args = ["grid", str(SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(a_file)]
    assert main(args) == 2
    assert f"runs folder {a_file} is a file, not a folder" in one_error_line(capsys)


@pytest.mark.parametrize("command", ["tables", "claims", "plots"])
def test_reporters_reject_bad_spec_files(
    command: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_utf8 = tmp_path / "latin.toml"
    not_utf8.write_bytes(SPEC.read_bytes().replace(b"Smoke grid", b"Smoke gr\xeed"))
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    args = ["--profile", "smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs")]
    assert main([command, str(not_utf8), *args]) == 2
    assert "is not valid UTF-8 (byte" in one_error_line(capsys)
    assert main([command, str(folder), *args]) == 2
    assert "is a folder" in one_error_line(capsys)
