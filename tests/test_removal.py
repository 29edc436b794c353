"""The one removal rule: inside the named folders, in the harness's shape, else left with a warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.removal import Shape, remove_owned

CHECKPOINT = Shape("checkpoint", r"checkpoint_\d{6}", folder=True, holds=(r"r1\.pt",), needs=("r1.pt",))


def folder_with(path: Path, *names: str) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_bytes(b"x")
    return path


def test_the_harness_s_own_folder_goes(tmp_path: Path) -> None:
    ours = folder_with(tmp_path / "store" / "checkpoint_000001", "r1.pt")
    assert remove_owned(ours, [tmp_path / "store"], CHECKPOINT)
    assert not ours.exists()


@pytest.mark.parametrize(
    ("where", "names", "why"),
    [
        ("elsewhere/checkpoint_000001", ("r1.pt",), "is not inside"),
        ("store/photos", ("r1.pt",), "its name is not"),
        ("store/checkpoint_000001", ("r1.pt", "thesis.tex"), "it holds thesis.tex"),
        ("store/checkpoint_000001", ("thesis.tex",), "it lacks r1.pt"),
    ],
)
def test_anything_else_is_left_with_one_warning_naming_it(
    tmp_path: Path, where: str, names: tuple[str, ...], why: str
) -> None:
    foreign = folder_with(tmp_path / where, *names)
    with pytest.warns(RuntimeWarning, match=f"left {foreign} alone.*{why}") as caught:
        assert not remove_owned(foreign, [tmp_path / "store"], CHECKPOINT)
    assert len(caught) == 1 and sorted(os.listdir(foreign)) == sorted(names)


def test_a_link_into_the_store_is_judged_as_a_link_and_not_followed(tmp_path: Path) -> None:
    user = folder_with(tmp_path / "user" / "checkpoint_000001", "r1.pt")
    (tmp_path / "store").mkdir()
    link = tmp_path / "store" / "checkpoint_000001"
    link.symlink_to(user)
    with pytest.warns(RuntimeWarning, match="it is a link"):
        assert not remove_owned(link, [tmp_path / "store"], CHECKPOINT)
    assert (user / "r1.pt").is_file()
    # the store itself reached through a link is still the store
    link.unlink()
    folder_with(link, "r1.pt")
    (tmp_path / "runs").symlink_to(tmp_path / "store")
    assert remove_owned(tmp_path / "runs" / "checkpoint_000001", [tmp_path / "store"], CHECKPOINT)


def test_a_file_needs_its_mark_and_to_be_the_one_made(tmp_path: Path) -> None:
    plot = Shape("forest plot", r"plot\.png", mark=b"Matplotlib")
    ours, theirs = tmp_path / "a" / "plot.png", tmp_path / "b" / "plot.png"
    for path, text in ((ours, b"\x89PNG Software Matplotlib"), (theirs, b"\x89PNG drawn by hand")):
        path.parent.mkdir()
        path.write_bytes(text)
    with pytest.warns(RuntimeWarning, match="its content is not that of a forest plot"):
        assert not remove_owned(theirs, [tmp_path], plot)
    # the right name and content, but not the file this process made (another process replaced it)
    with pytest.warns(RuntimeWarning, match="not the forest plot this process made"):
        assert not remove_owned(ours, [tmp_path], plot, made=theirs.stat())
    assert remove_owned(ours, [tmp_path], plot, made=ours.stat())
    assert not ours.exists() and theirs.exists()


def test_a_folder_that_must_be_empty_is_kept_quietly_while_it_holds_something(tmp_path: Path) -> None:
    shape = Shape("resume folder", "resume", folder=True, empty=True)
    folder = folder_with(tmp_path / "resume", "other.json")
    assert not remove_owned(folder, [tmp_path], shape)
    (folder / "other.json").unlink()
    assert remove_owned(folder, [tmp_path], shape) and not folder.exists()
    assert not remove_owned(folder, [tmp_path], shape)  # gone already: nothing to say
