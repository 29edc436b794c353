"""Full disks and unwritable outputs: one line naming the path and the cause, and no file a user had
before is changed (every write goes through :mod:`harness.atomic`).

The fault-injection tests mount a small tmpfs (as root; skipped otherwise) and fill it while a
command works: during ``harness eval``, ``tables``, ``export`` and (marked slow) a smoke grid. They
hash every file on it before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.atomic import WriteError, write_text
from harness.cli import main
from harness.store.run_store import RunStore
from tests.helpers import NIGHT, REPO_ROOT, SMOKE_SPEC, make_data_root, one_error_line

FILLER = ".filler"


NIGHT_TABLES = ["cpu_demo", "--profile", "night", "--runs-dir", str(NIGHT / "runs")]


Mount = Callable[..., Path]


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Mount]:
    """``mount(size, read_only=False)``: a fresh tmpfs under ``tmp_path``, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def make(size: str = "2m", read_only: bool = False) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    try:
        yield make
    finally:
        for where in reversed(mounted):
            subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def fill(disk: Path) -> None:
    """Write zeros to ``disk`` until it is full."""
    fd = os.open(disk / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 1 << 12, 1):  # down to the last byte
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` but the filler, by relative path: its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != FILLER
    }


def leftovers(folder: Path) -> list[Path]:
    """Temporary files or folders of the atomic writes, and empty files, left under ``folder``."""
    return [
        p
        for p in folder.rglob("*")
        if p.name.endswith(".tmp") or (p.is_file() and p.name != FILLER and p.stat().st_size == 0)
    ]


def filling(disk: Path, fn: Callable[..., Any], *, before: bool) -> Callable[..., Any]:
    """``fn`` that fills ``disk`` before it runs (``before``) or once it has returned."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            fill(disk)
        result = fn(*args, **kwargs)
        if not before:
            fill(disk)
        return result

    return wrapped


def no_work(message: str) -> Callable[..., Any]:
    """A stand-in for work that must not start: calling it fails the test with ``message``."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError(message)

    return refuse


# -- the helper ------------------------------------------------------------------------------------
WRITES = re.compile(
    r"\.write_text\(|\.write_bytes\(|\bopen\([^)]*['\"][wax]b?\+?['\"]|\.savefig\(|torch\.save\(|json\.dump\("
    r"|shutil\.(copy|move)|\.save_pretrained\(|os\.open\(|\.touch\("
)


ALLOWED = {
    (
        "harness/run/process_memory.py",
        'Path("/proc/self/clear_refs").write_text(',
    ): "a kernel knob, not a file",
    ("harness/run/dev_cache.py", "json.dump("): "into an atomic_write handle",
    ("harness/run/checkpoint.py", "torch.save("): "into an atomic_write handle",
    ("harness/encoder/saved.py", "torch.save("): "into an atomic_write handle",
    ("harness/run/final.py", "hf_model.save_pretrained("): "into an atomic_folder",
    ("harness/run/final.py", "encoder.tokenizer.save_pretrained("): "into an atomic_folder",
    ("harness/store/run_store.py", "os.open("): "an attempt number's reservation",
    ("harness/grid/lock.py", "os.open("): "the grid lock",
    ("harness/grid/slots.py", "mine.touch("): "a trial's empty marker on the node's slot board",
    (
        "harness/grid/plan/calibrate_here.py",
        'log.open("w"',
    ): "a calibration process's stderr, in a temporary folder",
    ("harness/config/fetch.py", "shutil.copyfileobj("): "into an atomic_write handle",
    ("harness/config/fetch.py", "shutil.move("): "into an atomic_folder",
    ("harness/config/inputs.py", "os.open("): "an input file read without blocking (a FIFO is refused)",
}


def test_every_file_the_harness_writes_goes_through_the_atomic_helper() -> None:
    offenders = []
    for path in sorted((REPO_ROOT / "harness").rglob("*.py")):
        name = str(path.relative_to(REPO_ROOT))
        if name == "harness/atomic.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if (
                WRITES.search(code)
                and not any(name == file and pattern in code for file, pattern in ALLOWED)
                and not code.strip().startswith(('"', "``", ":"))
            ):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, offenders


# -- unwritable outputs, found before any work -----------------------------------------------------
@pytest.mark.parametrize(
    ("command", "out", "message"),
    [
        (["tables", *NIGHT_TABLES, "--out"], "{file}/tables", "tables output folder {file}/tables cannot be"),
        (["tables", *NIGHT_TABLES, "--out"], "{file}", "tables output folder {file} is a file, not a folder"),
        (["claims", *NIGHT_TABLES, "--out"], "{file}/claims", "claims output folder {file}/claims cannot be"),
        (["plots", "--profile", "night", "--runs-dir", str(NIGHT / "runs"), "--out"], "{file}", "is a file"),
        (["report", *NIGHT_TABLES, "--out"], "{file}/report.html", "the folder of report --out {file} is a"),
        (["report", *NIGHT_TABLES, "--out"], "{tmp}", "report --out {tmp} is a folder, not a file"),
    ],
)
def test_reporters_check_their_output_before_reading_records(
    command: list[str],
    out: str,
    message: str,
    a_file: Path,
    tmp_path: Path,
    data_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unread = no_work("records were read before the output was checked")
    monkeypatch.setattr("harness.reporting.tables.build.build_tables", unread)
    monkeypatch.setattr("harness.reporting.claims.build_claims", unread)
    monkeypatch.setattr("harness.reporting.plots.collect_series", unread)
    fill_in = {"file": str(a_file), "tmp": str(tmp_path)}
    args = [*command, out.format(**fill_in), "--data-dir", str(data_root)]
    assert main(args) == 2
    assert message.format(**fill_in) in one_error_line(capsys)
    assert a_file.read_text() == "not a folder\n"


def _fake_saved_run(runs: Path) -> str:
    """A finished record with a (fake) kept checkpoint: enough for export's checks."""
    store = RunStore(runs)
    store.save({"run_id": "r1", "status": "finished", "config": {"eval_pooler": "cls"}})
    checkpoint = store.checkpoint_dir("r1")
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    return "r1"


def test_export_checks_its_folder_before_exporting(
    a_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        "harness.commands.export_cmd.export_model", no_work("exported before the folder was checked")
    )
    run_id = _fake_saved_run(tmp_path / "runs")
    args = ["--runs-dir", str(tmp_path / "runs")]
    assert main(["export", run_id, str(a_file / "model"), *args]) == 2
    assert f"the folder of DIR {a_file} is a file, not a folder" in one_error_line(capsys)
    assert main(["export", run_id, str(a_file), *args]) == 2
    assert f"{a_file} exists and is not an empty folder" in one_error_line(capsys)


def test_read_only_outputs_are_refused_before_any_work(
    mount: Mount,
    tmp_path: Path,
    data_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    read_only = mount("1m", read_only=True)

    unstarted = no_work("work started before the output was checked")
    monkeypatch.setattr("harness.jobs.evaluate.run_evaluation", unstarted)
    monkeypatch.setattr("harness.reporting.tables.build.build_tables", unstarted)
    monkeypatch.setattr("harness.commands.export_cmd.export_model", unstarted)
    eval_args = ["eval", "--model", "random:tiny", "--tasks", "STS12", "--device", "cpu"]
    assert main([*eval_args, "--data-dir", str(data_root), "--output", str(read_only / "out.json")]) == 2
    assert f"the folder of --output {read_only} cannot be written: read-only file system" in one_error_line(
        capsys
    )
    tables = ["tables", *NIGHT_TABLES, "--data-dir", str(data_root), "--out", str(read_only / "tables")]
    assert main(tables) == 2
    assert f"tables output folder {read_only / 'tables'} cannot be written: read-only" in one_error_line(
        capsys
    )
    run_id = _fake_saved_run(tmp_path / "runs")
    assert main(["export", run_id, str(read_only / "m"), "--runs-dir", str(tmp_path / "runs")]) == 2
    assert f"the folder of DIR {read_only} cannot be written: read-only" in one_error_line(capsys)


def test_a_full_disk_is_refused_before_evaluating(
    mount: Mount, data_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    disk = mount("2m")
    out = write_text(disk / "out.json", '{"earlier": true}\n')
    fill(disk)

    monkeypatch.setattr("harness.jobs.evaluate.run_evaluation", no_work("evaluated on a full disk"))
    args = [
        "eval",
        "--model",
        "random:tiny",
        "--tasks",
        "STS12",
        "--device",
        "cpu",
        "--data-dir",
        str(data_root),
    ]
    assert main([*args, "--output", str(out)]) == 2
    line = one_error_line(capsys)
    assert f"the folder of --output {disk} cannot be written: the disk is full (0 bytes free" in line
    assert out.read_text() == '{"earlier": true}\n'


def test_a_grid_lock_that_is_a_folder_is_one_line_before_ray_starts(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_data_root(tmp_path / "data", data_root / "senteval", link=True)
    runs = tmp_path / "runs"
    (runs / "grid.lock").mkdir(parents=True)
    args = ["grid", str(SMOKE_SPEC), "--smoke", "--data-dir", str(root), "--runs-dir", str(runs)]
    assert main(args) == 2
    assert f"the grid lock {runs / 'grid.lock'} is a folder, not a file" in one_error_line(capsys)
    assert not (runs / "records").exists()


# -- a disk that fills up while a command works ----------------------------------------------------
def test_a_torch_checkpoint_on_a_full_disk_is_one_write_error(mount: Mount) -> None:
    import torch

    from harness.run.checkpoint import save_checkpoint

    disk = mount("1m")
    target = disk / "resume" / "run.pt"
    save_checkpoint(target, {"weights": torch.zeros(10)})
    before = snapshot(disk)
    fill(disk)
    with pytest.raises(WriteError) as caught:
        save_checkpoint(target, {"weights": torch.zeros(100_000)})
    assert str(caught.value) == f"cannot write {target}: no space left on the device; {target} is unchanged"
    assert snapshot(disk) == before
    assert leftovers(disk) == []


def test_eval_on_a_disk_that_fills_up_keeps_the_earlier_output(
    mount: Mount, mini_data_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.jobs import evaluate as runner  # where harness eval calls the runner

    disk = mount("2m")
    out = write_text(disk / "results" / "out.json", '{"earlier": true}\n')
    write_text(disk / "results" / "notes.md", "kept\n")
    before = snapshot(disk)
    monkeypatch.setattr(runner, "run_evaluation", filling(disk, runner.run_evaluation, before=False))
    args = ["eval", "--model", "random:tiny", "--tasks", "STS12", "--device", "cpu"]
    assert main([*args, "--data-dir", str(mini_data_root), "--output", str(out)]) == 1
    captured = capsys.readouterr()
    assert "STS12" in captured.out  # the scores were shown
    assert captured.err.strip() == (
        f"harness eval: error: cannot write {out}: no space left on the device; {out} is unchanged; "
        "the scores above were not saved"
    )
    assert snapshot(disk) == before
    assert leftovers(disk) == []


def test_tables_on_a_disk_that_fills_up_keep_the_earlier_files(
    mount: Mount, data_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.reporting.tables import build as tables

    disk = mount("2m")
    for name in ("tables/cpu_demo.tex", "tables/tables.md", "claims/claims.md", "claims/claims.json"):
        write_text(disk / name, f"earlier {name}\n")
    before = snapshot(disk)
    monkeypatch.setattr(tables, "build_tables", filling(disk, tables.build_tables, before=False))
    args = ["tables", *NIGHT_TABLES, "--data-dir", str(data_root), "--out", str(disk / "tables")]
    assert main(args) == 2
    target = disk / "tables" / "cpu_demo.tex"
    assert one_error_line(capsys) == (
        f"harness tables: error: cannot write {target}: no space left on the device; {target} is unchanged"
    )
    assert snapshot(disk) == before
    assert leftovers(disk) == []


def test_export_on_a_disk_that_fills_up_leaves_nothing_behind(
    mount: Mount,
    tmp_path: Path,
    linked_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.commands import export_cmd
    from harness.run.training import train_run
    from harness.store.run_config import resolve_config

    root = linked_root
    config = resolve_config(
        "simcse", None, "smoke", {"max_steps": 2, "eval_every": 2, "final_tasks": "none"}, root
    )
    store = RunStore(tmp_path / "runs")
    train_run(config, root, store, log=None, save_checkpoint=True)
    disk = mount("16m")
    write_text(disk / "models" / "earlier" / "config.json", "{}\n")
    before = snapshot(disk)
    export = export_cmd.export_model
    monkeypatch.setattr(export_cmd, "export_model", filling(disk, export, before=True))
    out = disk / "models" / "new"
    assert main(["export", config.run_id(), str(out), "--runs-dir", str(store.root)]) == 2
    assert one_error_line(capsys) == f"harness export: error: cannot write {out}: no space left on the device"
    assert not out.exists()
    assert snapshot(disk) == before
    assert leftovers(disk) == []
    (disk / FILLER).unlink()  # room again: the same export now works into the same folder
    monkeypatch.setattr(export_cmd, "export_model", export)
    assert main(["export", config.run_id(), str(out), "--runs-dir", str(store.root)]) == 0
    assert (out / "harness_run.json").is_file()


def test_train_on_a_disk_that_fills_up_stops_with_one_line(
    mount: Mount,
    linked_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.run import checkpoint

    root = linked_root
    disk = mount("2m")
    runs = disk / "runs"
    RunStore(runs).save({"run_id": "earlier-run", "status": "finished", "config": {}})
    before = snapshot(disk)
    monkeypatch.setattr(checkpoint, "save_checkpoint", filling(disk, checkpoint.save_checkpoint, before=True))
    monkeypatch.setenv(checkpoint.EVERY_ENV, "0")  # a checkpoint at the first evaluation point
    args = ["train", "--profile", "smoke", "--max-steps", "4", "--eval-every", "2", "--final-tasks", "none"]
    assert main([*args, "--data-dir", str(root), "--runs-dir", str(runs)]) == 1
    line = one_error_line(capsys)
    assert line.startswith(f"harness train: error: cannot write {runs}/")
    assert "no space left on the device" in line and "the same command resumes it once there is room" in line
    after = snapshot(disk)
    assert {k: after.get(k) for k in before} == before
    assert leftovers(disk) == []


def test_a_grid_on_a_disk_that_fills_up_keeps_every_earlier_file(mount: Mount, mini_data_root: Path) -> None:
    """A smoke grid whose runs folder fills up once its trials have started: they fail with the
    cause, the grid exits 1 without a traceback, and nothing that was on the disk changed."""
    disk = mount("4m")
    root = make_data_root(disk.parent / "data", mini_data_root / "senteval", link=True)
    runs = disk / "runs"
    RunStore(runs).save(
        {"run_id": "earlier-run", "status": "finished", "config": {}, "final": {"sts": {"avg": 1.0}}}
    )
    write_text(disk / "results" / "tables" / "tables.md", "earlier tables\n")
    before = snapshot(disk)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    cmd = [sys.executable, "-m", "harness.cli", "grid", str(SMOKE_SPEC), "--smoke"]
    cmd += ["--runs-dir", str(runs), "--data-dir", str(root)]
    grid = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def fill_once_trials_run() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and grid.poll() is None:
            if len(list((runs / "records").glob("*.json"))) > 1:
                fill(disk)
                return
            time.sleep(0.05)

    filler = threading.Thread(target=fill_once_trials_run)
    filler.start()
    out, err = grid.communicate(timeout=600)
    filler.join()
    assert grid.returncode == 1, out + err
    assert "Traceback" not in err and "Traceback" not in out
    assert "no space left on the device" in out, out + err
    after = snapshot(disk)
    assert {k: after.get(k) for k in before} == before
    ray_own = {"ray", "tune"}  # Ray's session files and Ray Tune's experiment folder are Ray's to write
    assert [p for p in leftovers(runs) if not ray_own & set(p.relative_to(runs).parts)] == []
    for folder in ray_own:
        shutil.rmtree(runs / folder, ignore_errors=True)
