"""Fetching the papers' data (harness.config.fetch) without the network: the names asked for, what a
data root holds and the one line that says so, an archive unpacked only inside its folder and its
task folders found, an offline fetch that has nothing in its cache. (The download itself, against a
stand-in hub: tests/commands/test_data_cmd.py.)"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from harness.config import fetch
from harness.config.datasets import DATASETS
from harness.errors import ConfigError, DataError


def test_the_names_asked_for() -> None:
    assert fetch.check_names([]) == fetch.check_names(["all"]) == list(DATASETS)
    assert fetch.check_names(["wiki1m", "senteval", "wiki1m"]) == ["wiki1m", "senteval"]
    with pytest.raises(ConfigError, match=r"unknown dataset 'sentevall'.*did you mean 'senteval'"):
        fetch.check_names(["sentevall"])


def test_an_empty_data_root_holds_nothing_and_the_summary_says_what_is_missing(tmp_path: Path) -> None:
    results = fetch.check_data(tmp_path, ["all"])
    names = [(r.name, r.ok) for r in results]
    # the cpu, demo, night and smoke profiles' corpus is a dataset too (built from SNLI)
    assert names == [("senteval", False), ("wiki1m", False), ("nli", False)]
    assert results[2].detail == f"{tmp_path / 'corpus' / 'nli-sentences.txt'} not found"
    results = results[:2]
    assert results[0].detail == "77 of 77 files missing, 0 different" and len(results[0].problems) == 77
    assert results[1].detail == f"{tmp_path / 'corpus' / 'wiki1m_for_simcse.txt'} not found"
    line = fetch.summary(tmp_path, results)
    assert line.startswith(f"data root {tmp_path}: missing or wrong: senteval: 77 of 77 files missing")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "wiki1m_for_simcse.txt").write_text("a sentence .\n", encoding="utf-8")
    (wiki,) = fetch.check_data(tmp_path, ["wiki1m"])
    assert wiki.ok and wiki.detail.startswith("present, sha256 ")
    assert fetch.summary(tmp_path, [wiki]) == f"data root {tmp_path}: wiki1m {wiki.detail}"


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_unpacks_inside_its_folder_and_its_task_folders_are_found(tmp_path: Path) -> None:
    good = _tar(tmp_path / "good.tar", {"downstream/STS/a.txt": b"a", "downstream/SICK/b.txt": b"b"})
    fetch._unpack(good, tmp_path / "good")
    assert fetch._task_root(tmp_path / "good") == tmp_path / "good" / "downstream"
    bad = _tar(tmp_path / "bad.tar", {"../outside.txt": b"x"})
    with pytest.raises(
        DataError, match=r"bad.tar: member \.\./outside.txt lies outside the archive's folder"
    ):
        fetch._unpack(bad, tmp_path / "bad")
    assert not (tmp_path / "outside.txt").exists()
    (tmp_path / "empty" / "STS").mkdir(parents=True)
    with pytest.raises(DataError, match="no SentEval task folders"):
        fetch._task_root(tmp_path / "empty")


def test_a_fetch_replaces_a_data_folder_only_when_it_holds_nothing_the_archive_does_not(
    tmp_path: Path,
) -> None:
    from harness.atomic import WriteError, atomic_folder

    top = tmp_path / "unpacked"
    (top / "STS").mkdir(parents=True)
    target = tmp_path / "data" / "senteval"
    (target / "STS").mkdir(parents=True)
    (target / "MYTASK").mkdir()  # a task the user added
    shape = fetch._unpacked_shape(target, top)
    refused = pytest.raises(WriteError, match=f"{target} is not a senteval folder .*it holds MYTASK")
    with refused, atomic_folder(target, replace=shape):
        pass
    assert (target / "MYTASK").is_dir()
    (target / "MYTASK").rmdir()
    with atomic_folder(target, replace=fetch._unpacked_shape(target, top)) as building:
        (building / "STS").mkdir()
    assert [p.name for p in target.iterdir()] == ["STS"]


def test_an_offline_fetch_with_nothing_in_its_cache_downloads_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    (result,) = fetch.fetch(
        tmp_path / "data", ["wiki1m"], cache_dir=tmp_path / "cache", offline=True, log=lines.append
    )
    assert not result.ok and result.detail == "not downloaded: the hub is offline and it is not in the cache"
    assert lines == [
        f"wiki1m: fetching wiki1m_for_simcse.txt from the Hugging Face hub ({DATASETS['wiki1m'].description})"
    ]
    assert not (tmp_path / "data" / "corpus").exists()
