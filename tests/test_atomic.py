"""harness.atomic: a file or folder is written whole or not at all (the old one kept, no temporary file
left), a failed write is one error naming the path and the cause, new files get the usual permissions;
an interrupt that comes during a write waits until it is whole."""

from __future__ import annotations

import errno
import os
import pickle
import signal
import time
from pathlib import Path

import pytest
import torch

from harness import atomic
from harness.atomic import WriteError, atomic_folder, atomic_write, write_text
from harness.removal import Shape

MODEL = Shape("model", "model", folder=True, needs=("weights",))


def test_a_text_write_replaces_the_target_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "record.json"
    with atomic_write(target) as handle:
        handle.write("new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


def test_a_symlinked_target_is_written_through_and_the_link_stays(tmp_path: Path) -> None:
    real = tmp_path / "kept" / "out.json"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "out.json"
    link.symlink_to(real)
    assert atomic.check_output_file(link, "--output") == real
    write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["out.json"]  # no temporary file left
    dangling = tmp_path / "later.json"
    dangling.symlink_to(real.parent / "later.json")
    write_text(dangling, "made\n")
    assert dangling.is_symlink() and (real.parent / "later.json").read_text() == "made\n"


def test_a_symlinked_folder_is_replaced_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "models" / "encoder"
    real.mkdir(parents=True)
    (real / "old.txt").write_text("old")
    link = tmp_path / "encoder"
    link.symlink_to(real)
    with atomic_folder(
        link, replace=Shape("encoder", "encoder", folder=True, needs=("old.txt",))
    ) as building:
        (building / "new.txt").write_text("new")
    assert link.is_symlink() and sorted(p.name for p in real.iterdir()) == ["new.txt"]
    folder_link = tmp_path / "to_a_folder.json"
    folder_link.symlink_to(real)
    with pytest.raises(WriteError, match="is a folder, not a file"):
        atomic.check_output_file(folder_link, "--output")


def test_a_failure_keeps_the_old_file_and_removes_the_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old\n")
    with pytest.raises(RuntimeError, match="boom"), atomic_write(target) as handle:
        handle.write("half of a new rec")
        assert [p.name for p in tmp_path.glob(".record.*.tmp")]  # written beside the target
        raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_bytes_for_torch_save_and_a_chosen_prefix(tmp_path: Path) -> None:
    target = tmp_path / "state.pt"
    with atomic_write(target, "wb", prefix=".scratch-") as handle:
        assert list(tmp_path.glob(".scratch-*.tmp"))
        torch.save({"x": torch.arange(3)}, handle)
    assert torch.equal(torch.load(target)["x"], torch.arange(3))
    assert not list(tmp_path.glob(".scratch-*"))


def test_a_failed_write_leaves_the_earlier_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = write_text(tmp_path / "out.json", "earlier\n")
    with pytest.raises(RuntimeError, match="boom"), atomic_write(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("boom")
    assert target.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_path_under_a_file_is_a_write_error_naming_it(tmp_path: Path) -> None:
    a_file = write_text(tmp_path / "a_file", "x")
    with pytest.raises(WriteError) as caught:
        write_text(a_file / "out.json", "{}")
    assert str(caught.value).startswith(f"cannot write {a_file / 'out.json'}: ")
    assert isinstance(caught.value, OSError)  # callers that tolerate a failed write still catch it
    copy = pickle.loads(pickle.dumps(caught.value))  # a Ray trial's error reaches the driver
    assert (str(copy), copy.errno, copy.path) == (str(caught.value), caught.value.errno, caught.value.path)


def test_a_half_built_folder_is_removed_and_an_earlier_one_kept(tmp_path: Path) -> None:
    target = tmp_path / "model"
    with pytest.raises(RuntimeError), atomic_folder(target) as building:
        (building / "weights").write_text("half")
        raise RuntimeError("the export failed")
    assert list(tmp_path.iterdir()) == []
    with atomic_folder(target) as building:
        (building / "weights").write_text("first")
    with pytest.raises(RuntimeError), atomic_folder(target, replace=MODEL) as building:
        (building / "weights").write_text("second, cut off")
        raise RuntimeError("the save failed")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (target / "weights").read_text() == "first"
    with atomic_folder(target, replace=MODEL) as building:
        (building / "weights").write_text("second")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (target / "weights").read_text() == "second"
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_folder(empty) as building:  # an empty folder is taken (export's DIR may be one)
        (building / "weights").write_text("third")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "model"]
    assert (empty / "weights").read_text() == "third"


def test_a_folder_replaced_must_be_the_harness_s_else_it_stays_and_the_write_is_refused(
    tmp_path: Path,
) -> None:
    target = tmp_path / "model"
    target.mkdir()
    (target / "thesis.tex").write_text("mine")
    built = []
    refused = pytest.raises(WriteError, match=f"{target} is not a model the harness wrote .it lacks weights")
    with refused, atomic_folder(target, replace=MODEL) as building:
        built.append(building)
    assert built == [] and [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (target / "thesis.tex").read_text() == "mine"


def test_only_a_failed_write_becomes_a_write_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError), atomic_write(tmp_path / "a.json") as handle:
        handle.write("x")
        try:
            raise OSError(errno.ENOENT, "an earlier, handled error")
        except OSError:
            raise ValueError("a bug of the caller") from None
    with pytest.raises(FileNotFoundError), atomic_folder(tmp_path / "model"):
        (tmp_path / "missing-input").read_text()  # a read inside the block is no failed write
    assert list(tmp_path.iterdir()) == []


def test_new_files_get_the_usual_permissions_and_replaced_ones_keep_theirs(tmp_path: Path) -> None:
    fresh = write_text(tmp_path / "fresh.md", "x")
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~atomic._UMASK
    fresh.chmod(0o640)
    write_text(fresh, "y")
    assert fresh.stat().st_mode & 0o777 == 0o640


# -- an interrupt (Ctrl-C, SIGTERM) waits until the write is whole -------------------------------------
def test_an_interrupt_waits_until_the_file_being_written_is_whole(tmp_path: Path) -> None:
    import pytest

    from harness.atomic import atomic_write
    from harness.grid.signals import sigterm_as_interrupt

    target = tmp_path / "checkpoint.bin"
    with pytest.raises(KeyboardInterrupt, match="signal 15"), sigterm_as_interrupt():
        with atomic_write(target, "wb") as handle:
            handle.write(b"first half ")
            os.kill(os.getpid(), signal.SIGTERM)  # handled here, in the main thread
            time.sleep(0.1)
            handle.write(b"second half")
        raise AssertionError("the interrupt came after the write, before this line")
    assert target.read_bytes() == b"first half second half"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.bin"]


def test_an_interrupted_export_leaves_its_folder_whole_or_absent(tmp_path: Path) -> None:
    import pytest

    from harness.atomic import atomic_folder
    from harness.grid.signals import sigterm_as_interrupt

    target = tmp_path / "exported"
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt(), atomic_folder(target) as building:
        (building / "config.json").write_text("{}")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        (building / "model.safetensors").write_bytes(b"weights")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["exported"]  # no temporary folder left
