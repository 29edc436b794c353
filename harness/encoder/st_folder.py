"""A sentence-transformers model folder read the way the harness embeds: its pooling and the layers
after it.

``harness eval --model DIR`` on a folder that sentence-transformers saved (``modules.json``) scores
the sentence embedding that folder defines, not the harness's default pooler: the ``Pooling``
module's mode becomes the harness pooler (``cls`` -> ``cls_before_pooler``, ``mean`` -> ``avg``) and
every ``Dense`` module after it (a trained head with Tanh, a whitening layer with Identity: what
``harness export`` writes) and ``Normalize`` are applied to the pooled embeddings, in order. A module
the harness cannot reproduce (another pooling mode, an unknown module or activation) is refused with
one line naming it, rather than scored as something else.

Both spellings of the pooling config are read: sentence-transformers >= 6 writes
``"pooling_mode": "cls"``, older versions ``"pooling_mode_cls_token": true``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import ConfigError

MODULES_FILE = "modules.json"

POOLING_MODES: dict[str, str] = {"cls": "cls_before_pooler", "mean": "avg"}
"""sentence-transformers pooling mode -> the harness pooler computing the same embedding."""

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "torch.nn.modules.activation.Tanh": np.tanh,
    "torch.nn.modules.linear.Identity": lambda x: x,
}
"""The Dense activations the harness applies (by the name sentence-transformers saves)."""


@dataclass(frozen=True)
class DenseLayer:
    """One ``Dense`` module: ``activation(x @ weight.T + bias)``, in float64."""

    weight: np.ndarray
    bias: np.ndarray | None
    activation: str

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.asarray(x, dtype=np.float64) @ self.weight.T
        if self.bias is not None:
            out = out + self.bias
        return ACTIVATIONS[self.activation](out)


@dataclass(frozen=True)
class StPipeline:
    """What a sentence-transformers folder does after its transformer."""

    pooler: str
    layers: tuple[DenseLayer | str, ...] = ()
    """Dense layers, and ``"normalize"`` for a ``Normalize`` module, in the folder's order."""

    def apply(self, pooled: np.ndarray) -> np.ndarray:
        """The folder's sentence embedding from the harness pooler's output (float32)."""
        out = np.asarray(pooled, dtype=np.float64)
        for layer in self.layers:
            if isinstance(layer, DenseLayer):
                out = layer(out)
            else:
                out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)


def is_st_folder(path: str | Path | None) -> bool:
    """Whether ``path`` is a folder sentence-transformers saved (it holds ``modules.json``)."""
    return path is not None and (Path(path).expanduser() / MODULES_FILE).is_file()


def _kind(entry: dict[str, Any]) -> str:
    """The module's class name (``...modules.pooling.Pooling`` -> ``Pooling``)."""
    return str(entry.get("type", "")).rsplit(".", 1)[-1]


def _pooling_mode(config: dict[str, Any]) -> list[str]:
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return [mode]
    if isinstance(mode, list):
        return [str(m) for m in mode]
    flags = {
        "cls": "pooling_mode_cls_token",
        "mean": "pooling_mode_mean_tokens",
        "max": "pooling_mode_max_tokens",
        "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
        "weightedmean": "pooling_mode_weightedmean_tokens",
        "lasttoken": "pooling_mode_lasttoken",
    }
    return [name for name, key in flags.items() if config.get(key)]


def _load_weights(folder: Path) -> dict[str, np.ndarray]:
    safetensors = folder / "model.safetensors"
    if safetensors.is_file():
        from safetensors.numpy import load_file

        return {k: np.asarray(v, dtype=np.float64) for k, v in load_file(str(safetensors)).items()}
    import torch

    state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return {k: v.double().numpy() for k, v in state.items()}


def _dense(folder: Path) -> DenseLayer:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    activation = str(config.get("activation_function", "torch.nn.modules.activation.Tanh"))
    if activation not in ACTIVATIONS:
        raise ConfigError(
            f"{folder}: Dense activation {activation} is not one the harness applies "
            f"({', '.join(a.rsplit('.', 1)[-1] for a in ACTIVATIONS)})"
        )
    weights = _load_weights(folder)
    return DenseLayer(weights["linear.weight"], weights.get("linear.bias"), activation)


def read_st_folder(path: str | Path) -> StPipeline:
    """The pooling and layers of the sentence-transformers folder ``path``.

    Raises:
        ConfigError: a module, pooling mode or activation the harness cannot reproduce (one line).
    """
    root = Path(path).expanduser()
    try:
        modules = json.loads((root / MODULES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{root / MODULES_FILE} cannot be read: {exc}") from None
    pooler: str | None = None
    layers: list[DenseLayer | str] = []
    for entry in sorted(modules, key=lambda e: int(e.get("idx", 0))):
        kind, folder = _kind(entry), root / str(entry.get("path", ""))
        if kind == "Transformer" and pooler is None and not layers:
            continue
        if kind == "Pooling" and pooler is None:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            modes = _pooling_mode(config)
            if len(modes) != 1 or modes[0] not in POOLING_MODES:
                raise ConfigError(
                    f"{root}: pooling {'+'.join(modes) or 'none'} has no harness pooler "
                    f"(it computes {', '.join(POOLING_MODES)}); evaluate it with --pooler"
                )
            pooler = POOLING_MODES[modes[0]]
        elif kind == "Dense" and pooler is not None:
            layers.append(_dense(folder))
        elif kind == "Normalize" and pooler is not None:
            layers.append("normalize")
        else:
            raise ConfigError(f"{root}: module {entry.get('type')} is not one the harness reproduces")
    if pooler is None:
        raise ConfigError(f"{root}: {MODULES_FILE} has no Pooling module")
    return StPipeline(pooler, tuple(layers))


__all__ = ["DenseLayer", "StPipeline", "is_st_folder", "read_st_folder"]
