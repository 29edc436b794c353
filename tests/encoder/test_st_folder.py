"""A sentence-transformers folder read the way the harness embeds (harness.encoder.st_folder): its
pooling as the harness pooler (both spellings of the config), its Dense and Normalize modules applied
in order, and a module the harness cannot reproduce refused with one line. (A folder ``harness
export`` wrote, scored through sentence-transformers itself: tests/commands/test_export_cmd.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from harness.encoder.st_folder import DenseLayer, StPipeline, is_st_folder, read_st_folder
from harness.errors import ConfigError

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
DENSE = "sentence_transformers.models.Dense"
NORMALIZE = "sentence_transformers.models.Normalize"


def st_folder(root: Path, modules: list[tuple[str, str, dict[str, Any] | None]]) -> Path:
    """A folder with ``modules.json`` listing ``(type, path, config)``; each config written to its
    path's ``config.json``."""
    root.mkdir(parents=True)
    listed = []
    for idx, (kind, path, config) in enumerate(modules):
        listed.append({"idx": idx, "name": str(idx), "path": path, "type": kind})
        if config is not None:
            (root / path).mkdir(parents=True, exist_ok=True)
            (root / path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (root / "modules.json").write_text(json.dumps(listed), encoding="utf-8")
    return root


def test_pooling_dense_and_normalize_in_the_folders_order(tmp_path: Path) -> None:
    weight = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]])
    bias = np.array([0.5, 0.0, -1.0])
    folder = st_folder(
        tmp_path / "st",
        [
            (TRANSFORMER, "", None),
            (POOLING, "1_Pooling", {"pooling_mode_mean_tokens": True}),  # the older spelling
            (DENSE, "2_Dense", {"activation_function": "torch.nn.modules.linear.Identity"}),
            (NORMALIZE, "3_Normalize", None),
        ],
    )
    save_file({"linear.weight": weight, "linear.bias": bias}, str(folder / "2_Dense" / "model.safetensors"))
    assert is_st_folder(folder) and not is_st_folder(tmp_path) and not is_st_folder(None)
    pipeline = read_st_folder(folder)
    assert pipeline.pooler == "avg" and pipeline.layers[1] == "normalize"
    pooled = np.array([[1.0, 1.0], [2.0, -1.0]], dtype=np.float32)
    dense = pooled.astype(np.float64) @ weight.T + bias
    expected = dense / np.linalg.norm(dense, axis=1, keepdims=True)
    out = pipeline.apply(pooled)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_a_cls_folder_without_layers_is_the_harness_cls_before_pooler(tmp_path: Path) -> None:
    folder = st_folder(
        tmp_path / "st", [(TRANSFORMER, "", None), (POOLING, "1_Pooling", {"pooling_mode": "cls"})]
    )
    assert read_st_folder(folder) == StPipeline("cls_before_pooler")
    tanh = DenseLayer(np.eye(2), None, "torch.nn.modules.activation.Tanh")
    np.testing.assert_allclose(tanh(np.array([[0.5, -2.0]])), np.tanh([[0.5, -2.0]]))


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        ([(POOLING, "p", {"pooling_mode": "max"})], "pooling max has no harness pooler"),
        ([(POOLING, "p", {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True})], "cls+mean"),
        ([(TRANSFORMER, "", None)], "modules.json has no Pooling module"),
        (
            [(POOLING, "p", {"pooling_mode": "cls"}), ("my.module.Custom", "c", None)],
            "module my.module.Custom",
        ),
        ([(DENSE, "d", None)], "module sentence_transformers.models.Dense is not one the harness reproduces"),
        (
            [(POOLING, "p", {"pooling_mode": "cls"}), (DENSE, "d", {"activation_function": "torch.nn.ReLU"})],
            "Dense activation torch.nn.ReLU is not one the harness applies (Tanh, Identity)",
        ),
    ],
)
def test_what_the_harness_cannot_reproduce_is_one_line(
    tmp_path: Path, modules: list[tuple[str, str, dict[str, Any] | None]], message: str
) -> None:
    folder = st_folder(tmp_path / "st", modules)
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        read_st_folder(folder)
    assert "\n" not in str(caught.value)


def test_an_unreadable_module_list_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text("[not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"modules.json cannot be read: "):
        read_st_folder(tmp_path)
