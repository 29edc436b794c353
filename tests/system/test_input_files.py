"""One definition of what a corpus, spec and data file may be (a regular file, readable, bounded,
UTF-8 text), the same in check, grid, train, eval and every reporter; and every runs-folder child a
grid or run writes into checked before Ray starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.config.inputs import SPEC_MAX_BYTES, read_input_bytes, read_input_text
from harness.errors import ConfigError, DataError
from harness.run.data import read_corpus
from tests.helpers import SMOKE_SPEC, error_lines, make_data_root

pytestmark = pytest.mark.usefixtures("no_hang")  # tests/system/conftest.py


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    return path


def test_the_one_definition(tmp_path: Path, fifo: Path) -> None:
    with pytest.raises(DataError, match=r"corpus .*pipe.txt is not a regular file but a FIFO"):
        read_input_bytes(fifo, "corpus", 100)
    with pytest.raises(DataError, match="corpus /dev/zero is not a regular file but a character device"):
        read_input_bytes("/dev/zero", "corpus", 100)
    with pytest.raises(DataError, match="corpus not found: "):
        read_input_bytes(tmp_path / "absent", "corpus", 100)
    with pytest.raises(DataError, match=f"corpus {tmp_path} is a folder, not a file"):
        read_input_bytes(tmp_path, "corpus", 100)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x\n" * 100)
    with pytest.raises(DataError, match="is 200 bytes, more than the 100 bytes a corpus may hold"):
        read_input_bytes(big, "corpus", 100)
    utf16 = tmp_path / "u16.toml"
    utf16.write_text('title = "x"\n', encoding="utf-16")
    with pytest.raises(ConfigError, match=r"not valid UTF-8 .*it looks like UTF-16; save it as UTF-8"):
        read_input_text(utf16, "table spec", SPEC_MAX_BYTES, ConfigError)
    binary = tmp_path / "b.toml"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match="it looks like a binary file"):
        read_input_text(binary, "table spec", SPEC_MAX_BYTES, ConfigError)
    with pytest.raises(DataError, match="not a regular file but a FIFO"):
        read_corpus(fifo)


@pytest.mark.parametrize("corpus", ["fifo", "/dev/zero"])
def test_check_grid_train_and_eval_agree_on_a_corpus_that_is_no_file(
    corpus: str, fifo: Path, mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = str(fifo) if corpus == "fifo" else corpus
    data = make_data_root(tmp_path / "data", mini_data_root / "senteval")
    runs = tmp_path / "runs"
    said = "is not a regular file but a"
    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main(["check", *common, "--override", f"corpus={corpus}"]) == 1
    problems = [ln for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln and "corpus" in ln]
    assert len(problems) == 1 and f"corpus {corpus} {said}" in problems[0], problems
    assert main(["grid", *common, "--override", f"corpus={corpus}", "--dry-run"]) == 0  # planned, not read
    capsys.readouterr()
    assert main(["grid", *common, "--override", f"corpus={corpus}"]) == 2
    (line,) = error_lines(capsys)
    assert f"corpus {corpus} {said}" in line
    train = ["train", "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main([*train, "--corpus", corpus]) == 2
    (line,) = error_lines(capsys)
    assert f"corpus {corpus} {said}" in line
    assert not (runs / "records").exists()
    evaluate = ["eval", "--data-dir", str(data), "--output", str(tmp_path / "e.json"), "--tasks", "sts"]
    assert main([*evaluate, "--post-whiten", "zca", "--whiten-corpus", corpus]) == 2
    (line,) = error_lines(capsys)
    assert f"corpus {corpus} {said}" in line


@pytest.mark.parametrize("command", ["tables", "claims", "plots", "report", "grid", "check"])
@pytest.mark.parametrize("kind", ["utf-16", "binary", "fifo", "large"])
def test_every_command_reads_a_spec_file_the_same_way(
    command: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.toml"
    if kind == "utf-16":
        spec.write_text(SMOKE_SPEC.read_text(encoding="utf-8"), encoding="utf-16")
        said = "looks like UTF-16"
    elif kind == "binary":
        spec.write_bytes(b"\x00\x01\x02" * 100)
        said = "looks like a binary file"
    elif kind == "fifo":
        os.mkfifo(spec)
        said = "not a regular file but a FIFO"
    else:
        spec.write_text("# padding\n" * (SPEC_MAX_BYTES // 10 + 1), encoding="utf-8")
        said = "more than the 1.0 MiB a "
    runs = tmp_path / "runs"
    (runs / "records").mkdir(parents=True)
    argv = [command, str(spec), "--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(tmp_path)]
    if command == "plots":
        argv[1:2] = []
        argv.append(str(spec))  # a plot spec: the same reader
    out = {"report": ["--results", str(tmp_path / "out")], "grid": [], "check": []}
    assert main([*argv, *out.get(command, ["--out", str(tmp_path / "out")])]) == 2
    (line,) = error_lines(capsys)
    assert f"spec {spec}" in line and said in line, line
    assert not (tmp_path / "out").exists()


def test_a_senteval_file_that_is_a_fifo_is_a_problem_not_a_hang(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_data_root(tmp_path / "data", mini_data_root / "senteval")
    dev = data / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv"
    dev.unlink()
    os.mkfifo(dev)
    common = [str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data)]
    common += ["--runs-dir", str(tmp_path / "runs")]
    assert main(["check", *common]) == 1
    problems = [ln for ln in capsys.readouterr().out.splitlines() if "PROBLEM" in ln]
    assert problems and all(f"STS data file {dev} is not a regular file but a FIFO" in p for p in problems)
    assert main(["grid", *common]) == 2
    assert "is not a regular file but a FIFO" in "\n".join(error_lines(capsys))


@pytest.mark.parametrize(
    ("child", "flags", "said"),
    [
        ("records", [], "records folder {runs}/records: {runs}/records is a file, not a folder"),
        ("resume", [], "resume folder {runs}/resume: {runs}/resume is a file, not a folder"),
        ("tune", [], "Ray Tune's storage {runs}/tune: {runs}/tune is a file, not a folder"),
        (
            "store",
            ["--storage", "{tmp}/store/deeper"],
            "Ray Tune's storage {tmp}/store/deeper: {tmp}/store is a file",
        ),
        (
            "checkpoints",
            ["--save-model"],
            "saved encoders folder {runs}/checkpoints: {runs}/checkpoints is a file",
        ),
    ],
)
def test_a_file_where_the_grid_writes_a_folder_is_refused_before_ray_starts(
    child: str,
    flags: list[str],
    said: str,
    mini_data_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = make_data_root(tmp_path / "data", mini_data_root / "senteval")
    runs = tmp_path / "runs"
    runs.mkdir()
    (tmp_path / "store").write_text("")
    if child != "store":
        (runs / child).write_text("in the way\n")
    flags = [f.format(tmp=tmp_path) for f in flags]
    common = [str(SMOKE_SPEC), "--smoke", "--data-dir", str(data), "--runs-dir", str(runs), *flags]
    assert main(["grid", *common]) == 2
    (line,) = error_lines(capsys)
    assert said.format(runs=runs, tmp=tmp_path) in line and line.endswith("nothing was run"), line
    assert not (runs / "grid.lock").exists()
    assert not [p for p in runs.iterdir() if p.is_dir()]  # no tune/, records/, resume/ made


def test_a_runs_own_entry_in_the_way_is_named(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_data_root(tmp_path / "data", mini_data_root / "senteval")
    runs = tmp_path / "runs"
    common = [str(SMOKE_SPEC), "--smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main(["grid", *common, "--dry-run"]) == 0
    run_ids = [
        ln.split()[1] for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("[todo]")
    ]
    assert len(run_ids) == 2
    (runs / "checkpoints").mkdir(parents=True)
    (runs / "checkpoints" / run_ids[0]).write_text("not an encoder\n")
    (runs / "resume" / f"{run_ids[1]}.json").mkdir(parents=True)
    assert main(["grid", *common, "--save-model"]) == 2
    (line,) = error_lines(capsys)
    assert "is a folder where run" in line or "is a file where run" in line
    assert "(and 1 more: `harness check` lists them)" in line
    argv = ["check", str(SMOKE_SPEC), "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert f"{runs}/resume/{run_ids[1]}.json is a folder where run {run_ids[1]} keeps a file" in out


def test_train_checks_its_runs_folder_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_data_root(tmp_path / "data")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "resume").write_text("in the way\n")
    args = ["train", "--profile", "smoke", "--data-dir", str(data), "--runs-dir", str(runs)]
    assert main(args) == 2
    (line,) = error_lines(capsys)
    assert f"resume folder {runs}/resume: {runs}/resume is a file, not a folder" in line
    assert not (runs / "records").exists()


def test_a_byte_order_mark_is_not_text_and_a_paper_number_is_finite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.specs.parse import load_table_spec

    spec = tmp_path / "bom.toml"
    spec.write_text(SMOKE_SPEC.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert load_table_spec(spec).title == "Smoke grid"  # was: "not valid TOML: Invalid statement"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("first sentence .\nsecond sentence .\n", encoding="utf-8-sig")
    assert read_corpus(corpus)[0] == "first sentence ."
    for value in ("nan", "inf", "-inf"):
        bad = tmp_path / f"{value}.toml"
        bad.write_text(SMOKE_SPEC.read_text(encoding="utf-8").replace("[76.85, 76.25]", f"[{value}, 76.25]"))
        with pytest.raises(ConfigError, match=r"rows\[0\].paper\[0\]: expected a finite number, got"):
            load_table_spec(bad)
