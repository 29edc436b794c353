"""A saved encoder folder's sentence head: written beside the weights, and refused by the commands
that would read the encoder's pooler instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.encoder.saved import SENTENCE_HEAD_FILE, check_encoder_only, save_sentence_head
from harness.errors import ConfigError


def test_the_head_is_saved_as_cpu_weights_with_the_method_name(tmp_path: Path) -> None:
    torch.manual_seed(0)
    head = torch.nn.Linear(4, 3)
    save_sentence_head(tmp_path, "isbert", head)
    assert sorted(p.name for p in tmp_path.iterdir()) == [SENTENCE_HEAD_FILE]  # no temporary file left
    saved = torch.load(tmp_path / SENTENCE_HEAD_FILE, map_location="cpu", weights_only=True)
    assert saved["method"] == "isbert" and set(saved["state"]) == {"weight", "bias"}
    for key, value in head.state_dict().items():
        assert saved["state"][key].device.type == "cpu" and torch.equal(saved["state"][key], value)
        assert not saved["state"][key].requires_grad


def test_a_folder_without_a_head_is_an_encoder_alone(tmp_path: Path) -> None:
    check_encoder_only(tmp_path, "harness export")
    check_encoder_only(tmp_path / "not-there", "harness eval")


def test_a_folder_with_a_head_is_refused_naming_the_command_and_the_method(tmp_path: Path) -> None:
    save_sentence_head(tmp_path, "isbert", torch.nn.Linear(2, 2))
    with pytest.raises(ConfigError) as caught:
        check_encoder_only(tmp_path, "harness export")
    text = str(caught.value)
    assert text.startswith(f"harness export: {tmp_path} was saved by a isbert run")
    assert SENTENCE_HEAD_FILE in text and "\n" not in text


def test_an_unreadable_head_file_still_marks_the_folder(tmp_path: Path) -> None:
    (tmp_path / SENTENCE_HEAD_FILE).write_bytes(b"not a torch file")
    with pytest.raises(ConfigError, match=r"harness eval: .* was saved by a \? run"):
        check_encoder_only(tmp_path, "harness eval")
