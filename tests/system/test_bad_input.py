"""Bad input through the command line: one line naming the problem, exit status 2, no traceback,
before any work is done (or, for a bad record, a warning line and everything else still rendered)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest
import torch

import harness.run.checkpoint as ckpt
from harness.cli import main
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from tests.helpers import (
    NIGHT,
    NIGHT_RECORDS,
    SMOKE_SPEC,
    check_argv,
    make_data_root,
    make_record,
    manifest_of,
    one_error_line,
)

NO_CUDA = not torch.cuda.is_available()
NIGHT_FLAGS = ["--profile", "night", "--override", "precision=bf16", "--override", "eval_precision=bf16"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A data root with a corpus only (every case below fails before evaluation data is read)."""
    return make_data_root(tmp_path / "data")


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``: exit 2, nothing on stdout (no plan), one error line; that line."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out[:500]
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def grid_argv(root: Path, tmp_path: Path, *flags: str) -> list[str]:
    """``harness grid --smoke`` of the smoke grid, runs in ``tmp_path / "runs"``."""
    return [
        "grid",
        str(SMOKE_SPEC),
        "--smoke",
        "--data-dir",
        str(root),
        "--runs-dir",
        str(tmp_path / "runs"),
        *flags,
    ]


def test_tables_claims_and_report_render_around_a_bad_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(NIGHT_RECORDS, runs / "records")
    manifest = manifest_of(NIGHT)
    assert "simcsepp_table3" in json.dumps(manifest)
    bad = sorted((runs / "records").glob("*.json"))[2]
    data = json.loads(bad.read_text(encoding="utf-8"))
    data["final"]["sts"] = "oops"
    bad.write_text(json.dumps(data), encoding="utf-8")
    common = ["simcsepp_table3", *NIGHT_FLAGS, "--runs-dir", str(runs)]
    line = f"run record {bad}: skipping field(s) of the wrong type: final.sts (a str, not an object)"
    for argv in (
        ["tables", *common, "--out", str(tmp_path / "tables")],
        ["claims", *common, "--out", str(tmp_path / "claims")],
        ["report", *common, "--results", str(tmp_path)],
    ):
        with pytest.warns(RuntimeWarning) as caught:
            assert main(argv) == 0
        assert {str(w.message) for w in caught} == {line}
    assert "Traceback" not in capsys.readouterr().err
    assert (tmp_path / "tables" / "simcsepp_table3.tex").is_file() and (tmp_path / "report.html").is_file()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "temperature=inf"], "--set temperature must be finite, got 'inf'"),
        (["--set", "temperature=nan"], "--set temperature must be finite, got 'nan'"),
        (["--lr", "nan"], "--lr must be finite, got 'nan'"),
        (["--lr", "inf"], "--lr must be finite, got 'inf'"),
        (["--seed", "-1"], "seed must be from 0 to 4294967295 (NumPy's range), got -1"),
        (["--seed", str(2**32)], "seed must be from 0 to 4294967295 (NumPy's range), got 4294967296"),
        (["--seed", "\u0664\u0662"], "--seed: '\u0664\u0662' is not a valid int"),
        (["--max-steps", "1e15"], "--max-steps: '1e15' is not a valid int"),
        (["--max-steps", str(10**15)], "max_steps must be from 0 to 10000000 (or none = one epoch), got"),
        (["--threads", "0"], "threads must be from 1 to 1024 (or none = torch's default), got 0"),
        (["--threads", "-2"], "threads must be from 1 to 1024 (or none = torch's default), got -2"),
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
    args = ["train", "--profile", "smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*args, *flags]) == 2
    assert message in one_error_line(capsys)
    assert not (runs / "records").exists()


def test_train_rejects_a_corpus_folder_and_an_unwritable_store(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train", "--profile", "smoke", "--data-dir", str(root)]
    assert main([*args, "--corpus", str(tmp_path), "--runs-dir", str(tmp_path / "r")]) == 2
    assert f"corpus {tmp_path} is a folder, not a file" in one_error_line(capsys)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert main([*args, "--runs-dir", str(a_file)]) == 2
    assert f"--runs-dir {a_file} is a file, not a folder" in one_error_line(capsys)


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
        (["--lr", "inf"], "override lr must be finite, got 'inf'"),
        (["--override", "warmup_steps=nan"], "override warmup_steps must be finite, got 'nan'"),
    ],
)
def test_grid_rejects_non_finite_overrides(
    flags: list[str], message: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs")]
    assert main([*args, *flags]) == 2
    assert message in one_error_line(capsys)


def test_grid_rejects_bad_spec_files(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_utf8 = tmp_path / "latin.toml"
    not_utf8.write_bytes(SMOKE_SPEC.read_bytes().replace(b"Smoke grid", b"Smoke gr\xeed"))
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
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*args, "--override", f"corpus={bad}"]) == 2
    line = one_error_line(capsys)
    assert f"corpus {bad}: line 2 is empty" in line
    assert not (runs / "records").exists() and not (runs / "tune").exists()
    assert not (runs / "grid.lock").exists()


def test_grid_checks_what_the_runs_ask_of_the_corpus_before_ray_starts(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*args, "--post-whiten", "zca", "--post-whiten-sentences", "1000000"]) == 2
    line = one_error_line(capsys)
    assert "post_whiten_sentences 1000000 is more than the " in line and line.endswith(": nothing was run")
    assert not (runs / "records").exists() and not (runs / "tune").exists()


def test_grid_refuses_a_runs_folder_it_cannot_write_before_ray_starts(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "runs"
    a_file.write_text("not a folder")
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(a_file)]
    assert main(args) == 2
    assert f"runs folder {a_file} is a file, not a folder" in one_error_line(capsys)


def test_a_finished_record_without_scores_is_reported_and_run_again(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    plan = expand([load_table_spec(SMOKE_SPEC)], "smoke", data_root=root)
    store = RunStore(runs)
    store.save(make_record(plan.runs[0].config))  # finished, but "final" is empty
    store.save(make_record(plan.runs[1].config, final={"sts": {"avg": 50.0}}))
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*args, "--dry-run", "--skip-failed"]) == 0
    out = capsys.readouterr().out
    assert f"warning: {plan.runs[0].run_id}: record says finished but has no final sts scores" in out
    assert f"[todo] {plan.runs[0].run_id}" in out and f"[done] {plan.runs[1].run_id}" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--seeds", "100000000"], "--seeds must be at most 1000, got 100000000: each seed is a whole run"),
        (["--seeds", "0"], "--seeds must be >= 1, got 0"),
        (["--cpus-per-trial", "0"], "--cpus-per-trial must be >= 1, got 0"),
        (["--cpus-per-trial", "-2"], "--cpus-per-trial must be >= 1, got -2"),
        (["--gpus-per-trial", "-1"], "--gpus-per-trial must be finite and >= 0, got -1.0"),
        (["--threads", "0"], "threads must be from 1 to 1024 (or none = torch's default), got 0"),
        (["--threads", "100000"], "threads must be from 1 to 1024 (or none = torch's default), got 100000"),
        (["--max-steps", str(10**15)], "max_steps must be from 0 to 10000000 (or none = one epoch), got"),
    ],
)
def test_grid_and_check_refuse_out_of_range_options_before_any_plan(
    flags: list[str], message: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.perf_counter()
    assert message in refused(grid_argv(root, tmp_path, *flags, "--dry-run"), capsys)
    assert message in refused(grid_argv(root, tmp_path, *flags), capsys)
    assert message in refused(check_argv(root, tmp_path / "r", *flags), capsys)
    assert time.perf_counter() - t0 < 30  # not hours of planning
    assert not (tmp_path / "runs").exists() and not (tmp_path / "r").exists()


def test_the_largest_seed_count_is_still_planned(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(grid_argv(root, tmp_path, "--seeds", "1000", "--dry-run")) == 0
    assert "2000 distinct runs" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gpus-per-trial", "-1"], "--gpus-per-trial must be finite and >= 0, got -1"),
        (["--gpus-per-trial", "nan"], "--gpus-per-trial must be finite"),
        (["--gpus-per-trial", "1.5"], "a fraction <= 1 or a whole number"),
        (["--cpus-per-trial", "0"], "--cpus-per-trial must be >= 1"),
        # without grpc (ray[client]) ray:// is refused at once; with it (tensorboard brings it), the
        # head must answer
        (
            ["--address", "ray://head:10001"],
            "no Ray head reachable there" if importlib.util.find_spec("grpc") else "ray[client] extra",
        ),
        (["--address", "127.0.0.1:1"], "no Ray head reachable there"),
        (["--address", "nonsense"], "expected HOST:PORT"),
    ],
)
def test_bad_ray_requests_fail_at_once_with_one_line(
    flags: list[str], message: str, linked_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["grid", str(SMOKE_SPEC), "--profile", "smoke", "--runs-dir", str(tmp_path / "runs")]
    t0 = time.monotonic()
    assert main([*args, "--data-dir", str(linked_root), *flags]) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "runs" / "grid.lock").exists()


@pytest.mark.parametrize("value", ["oops", "-5", "nan", "inf"])
def test_a_bad_checkpoint_interval_in_the_environment_is_one_line(
    value: str,
    root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ckpt.EVERY_ENV, value)
    message = "HARNESS_CHECKPOINT_EVERY_S must be a number of seconds >= 0 (0 = at every evaluation)"
    message += f", got {value!r}"
    assert message in refused(grid_argv(root, tmp_path, "--dry-run"), capsys)
    assert message in refused(check_argv(root, tmp_path / "r"), capsys)
    train = ["train", "--profile", "smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "t")]
    assert message in refused(train, capsys)
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("command", ["tables", "claims", "plots"])
def test_reporters_reject_bad_spec_files(
    command: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_utf8 = tmp_path / "latin.toml"
    not_utf8.write_bytes(SMOKE_SPEC.read_bytes().replace(b"Smoke grid", b"Smoke gr\xeed"))
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    args = ["--profile", "smoke", "--data-dir", str(root), "--runs-dir", str(tmp_path / "runs")]
    assert main([command, str(not_utf8), *args]) == 2
    assert "is not valid UTF-8 (byte" in one_error_line(capsys)
    assert main([command, str(folder), *args]) == 2
    assert "is a folder" in one_error_line(capsys)


@pytest.mark.parametrize("command", ["tables", "claims", "plots", "report"])
def test_a_misspelt_runs_folder_writes_nothing(
    command: str, root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    earlier = results / "tables" / "tables.md"
    earlier.write_text("the tables of last night\n")
    missing = tmp_path / "rnus"
    out = {"tables": results / "tables", "claims": results / "claims", "plots": results / "plots"}
    argv = [command, *([] if command == "plots" else [str(SMOKE_SPEC)]), "--profile", "smoke"]
    argv += ["--data-dir", str(root), "--runs-dir", str(missing)]
    argv += ["--results", str(results)] if command == "report" else ["--out", str(out[command])]
    line = refused(argv, capsys)
    assert line == (
        f"harness {command}: error: runs folder {missing} does not exist (is --runs-dir spelt right?): "
        "nothing written"
    )
    assert earlier.read_text() == "the tables of last night\n"
    assert sorted(p.name for p in results.rglob("*")) == ["tables", "tables.md"]
    assert not missing.exists()


def test_a_runs_folder_without_records_is_said_on_one_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    argv = ["tables", str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main([*argv, "--out", str(tmp_path / "tables")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: runs folder {runs} holds no run records: every cell shows --"]
