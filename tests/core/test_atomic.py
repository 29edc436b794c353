"""harness.atomic.atomic_write: the whole new file or the old one, never a half, never a stray temp file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.atomic import atomic_write


def test_a_text_write_replaces_the_target_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "record.json"
    with atomic_write(target) as handle:
        handle.write("new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["record.json"]


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
    with atomic_write(target, "wb", prefix=".probe-") as handle:
        assert list(tmp_path.glob(".probe-*.tmp"))
        torch.save({"x": torch.arange(3)}, handle)
    assert torch.equal(torch.load(target)["x"], torch.arange(3))
    assert not list(tmp_path.glob(".probe-*"))
