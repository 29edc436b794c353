"""What a grid's trials hand back to the driver (no Ray here): records as report text, and the
driver's notes of resume checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.grid import relay
from harness.store.run_store import RunStore


def test_a_record_travels_as_strict_json_and_only_records_are_taken() -> None:
    record = {"run_id": "r1", "status": "finished", "final": {"sts": {"avg": float("nan")}}}
    text = relay.encode_record(record)
    assert relay.decode_record(text) == {
        "run_id": "r1",
        "status": "finished",
        "final": {"sts": {"avg": None}},
    }
    for other in (None, 3, "", "not json", '{"status": "finished"}', "[1, 2]"):
        assert relay.decode_record(other) is None


def test_a_record_that_arrives_twice_is_one_record(tmp_path: Path) -> None:
    """The driver saves each record a report carried; the same attempt twice is one record."""
    store = RunStore(tmp_path / "runs")
    running = {"run_id": "r1", "status": "running", "config": {}, "started_at": "t0", "host": "node-b"}
    finished = {**running, "status": "finished", "final": {"sts": {"avg": 1.0}}}
    for record in (running, running, finished, finished):
        store.save(relay.decode_record(relay.encode_record(record)) or {})
    assert store.records() == [finished] and store.attempts("r1") == []


def test_checkpoint_notes_are_kept_and_forgotten(tmp_path: Path) -> None:
    runs, storage = tmp_path / "runs", tmp_path / "storage"
    earlier = storage / "grid-1" / "r1_0001" / "checkpoint_000002"
    current = storage / "grid-2" / "r2_0001" / "checkpoint_000001"
    for folder in (earlier, current):
        folder.mkdir(parents=True)
        (folder / f"{folder.parent.name.split('_')[0]}.pt").write_bytes(b"state")
    assert relay.earlier_checkpoint(runs, "r1") is None
    relay.remember_checkpoint(runs, "r1", str(earlier), str(storage), 2)
    relay.remember_checkpoint(runs, "r2", str(current), str(storage), 1)
    assert relay.earlier_checkpoint(runs, "r1") == {"path": str(earlier), "storage": str(storage), "step": 2}
    # r1 finished in a later grid: the earlier grid's checkpoint goes with the note
    relay.forget_checkpoint(runs, "r1", str(storage), keep_under=str(storage / "grid-2"))
    assert not earlier.exists() and relay.earlier_checkpoint(runs, "r1") is None
    # r2's checkpoint is the running grid's own: Ray Tune prunes it, the note goes
    relay.forget_checkpoint(runs, "r2", str(storage), keep_under=str(storage / "grid-2"))
    assert current.is_dir() and not (runs / relay.RESUME_DIR).exists()
    (runs / relay.RESUME_DIR).mkdir()
    relay.index_path(runs, "r3").write_text("{broken")
    assert relay.earlier_checkpoint(runs, "r3") is None


# A note is a file anyone may copy or edit: the folder it names goes only when it is a checkpoint of
# this grid's storage in the shape Tune stores it; anything else stays, with one warning naming it.
def user_folder(path: Path, *names: str) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_text("mine")
    return path


def test_a_note_naming_a_folder_of_the_user_is_forgotten_but_the_folder_stays(tmp_path: Path) -> None:
    runs, storage = tmp_path / "runs", tmp_path / "tune"
    user = user_folder(tmp_path / "thesis", "chapter1.tex")
    relay.remember_checkpoint(runs, "r1", str(user), str(tmp_path / "elsewhere"), 2)
    with pytest.warns(RuntimeWarning, match=f"left {user} alone.*not inside {storage}") as caught:
        relay.forget_checkpoint(runs, "r1", str(storage))
    assert len(caught) == 1 and (user / "chapter1.tex").read_text() == "mine"
    assert relay.earlier_checkpoint(runs, "r1") is None and not (runs / relay.RESUME_DIR).exists()


@pytest.mark.parametrize(
    ("name", "files", "why"),
    [
        ("checkpoint_000002", ("r1.pt", "notes.txt"), "it holds notes.txt"),
        ("checkpoint_000002", ("r2.pt",), "it lacks r1.pt"),
        ("results", ("r1.pt",), "its name is not"),
    ],
)
def test_a_folder_in_the_storage_goes_only_in_the_shape_of_the_run_s_checkpoint(
    tmp_path: Path, name: str, files: tuple[str, ...], why: str
) -> None:
    storage = tmp_path / "tune"
    folder = user_folder(storage / "grid-1" / "r1_0001" / name, *files)
    note = {"path": str(folder), "storage": str(storage), "step": 2}
    with pytest.warns(RuntimeWarning, match=f"left {folder} alone.*{why}"):
        relay.drop_checkpoint(note, "r1", str(storage))
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    ours = user_folder(storage / "grid-1" / "r1_0001" / "checkpoint_000003", "r1.pt", ".metadata.json")
    relay.drop_checkpoint({**note, "path": str(ours)}, "r1", str(storage))
    assert not ours.exists()


def test_a_storage_given_as_a_uri_follows_the_same_rule(tmp_path: Path) -> None:
    storage = f"file://{tmp_path / 'tune'}"
    ours = user_folder(tmp_path / "tune" / "g" / "r1_0001" / "checkpoint_000001", "r1.pt")
    theirs = user_folder(tmp_path / "tune" / "g" / "r1_0001" / "checkpoint_000002", "r1.pt", "mine.txt")
    outside = user_folder(tmp_path / "data" / "checkpoint_000001", "r1.pt")
    with pytest.warns(RuntimeWarning) as caught:
        for folder, noted in ((theirs, storage), (outside, storage), (outside, f"file://{tmp_path}")):
            relay.drop_checkpoint({"path": str(folder), "storage": noted}, "r1", storage)
    said = [str(w.message) for w in caught]
    assert len(said) == 3 and "it holds mine.txt" in said[0]
    assert all(f"not inside this grid's storage {storage}" in line for line in said[1:])
    assert theirs.is_dir() and outside.is_dir()
    relay.drop_checkpoint({"path": str(ours), "storage": storage}, "r1", storage)
    assert not ours.exists()


def test_a_note_or_resume_folder_that_is_not_the_driver_s_file_is_left(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    user = tmp_path / "user.json"
    user.write_text("{}")
    (runs / relay.RESUME_DIR).mkdir(parents=True)
    relay.index_path(runs, "r1").symlink_to(user)
    with pytest.warns(RuntimeWarning, match="r1.json alone.*it is a link"):
        relay.forget_checkpoint(runs, "r1", str(tmp_path / "tune"))
    assert relay.index_path(runs, "r1").is_symlink() and user.is_file()
    relay.index_path(runs, "r1").unlink()
    (runs / relay.RESUME_DIR).rmdir()
    (tmp_path / "empty").mkdir()
    (runs / relay.RESUME_DIR).symlink_to(tmp_path / "empty")
    with pytest.warns(RuntimeWarning, match="resume alone.*it is a link"):
        relay.forget_checkpoint(runs, "r1", str(tmp_path / "tune"))
    assert (tmp_path / "empty").is_dir()
