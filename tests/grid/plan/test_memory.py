"""The memory a grid trial asks Ray for: it covers what runs measured and grows with what a method holds."""

from __future__ import annotations

import pytest

from harness.grid.plan import memory
from harness.store.run_config import RunConfig, resolve_config
from methods.scd import SCDParams

GB = 2**30


def _config(method: str, params: dict[str, object], **overrides: object) -> RunConfig:
    return resolve_config(method, params, "night", {"precision": "bf16", **overrides})


def test_the_estimate_covers_what_was_measured_and_grows_with_the_encoder_rows() -> None:
    simcse = _config("simcse", {})
    probe = _config("noise_probe", {"variant": "pos_minus_noise", "k_samples": 10})
    # measured (docs/speed.md, "Where the code's constants come from"): whole runs with the final STS
    # evaluation peaked at 2.36 GB for SimCSE, 2.48 GB with 3 encoder rows, 5.3 GB for the K = 10
    # probe; training alone at 5.52 GB for the K = 10 probe in fp32. The estimate must not be below
    # any of them.
    assert memory.estimate_bytes(simcse) >= 2.36 * GB
    assert memory.estimate_bytes(_config("whitenedcse", {"num_positives": 3})) >= 2.48 * GB
    assert memory.estimate_bytes(probe) >= 5.52 * GB
    assert memory.estimate_bytes(_config("noise_probe", {"variant": "pos_plus_noise"})) == (
        memory.estimate_bytes(simcse)
    )  # two rows, like SimCSE
    half = _config("simcse", {}, batch_size=32)
    assert memory.estimate_bytes(half) < memory.estimate_bytes(simcse)
    # two K = 10 probes fit in a 24 GB node's Ray budget (~17.5 GB), three do not
    assert 2 * memory.estimate_bytes(probe) < 17.5 * GB < 3 * memory.estimate_bytes(probe)
    # on a GPU the activations are not host memory
    assert memory.estimate_bytes(probe, "cuda") < memory.estimate_bytes(simcse)


def test_memory_estimate_counts_the_projector_with_its_gradients_and_adam_moments(data_root):
    """The released 4096-4096-4096 projector is 35 M parameters on MiniLM (d = 384), more than the
    encoder: the night profile's estimate must hold it 4 times (weights, gradients, AdamW's moments)
    over a one-layer 8-wide projector's."""
    d, w = 384, 4096
    wide = resolve_config("scd", None, "night", {}, data_root=data_root)
    narrow = resolve_config("scd", {"projector": (8,)}, "night", {}, data_root=data_root)
    assert isinstance(wide.params, SCDParams) and wide.params.projector == (w, w, w)
    # Linear(d, w) with bias; twice BatchNorm(w) (weight and bias) and a bias-free Linear(w, w)
    wide_count = d * w + w + 2 * (2 * w + w * w)
    narrow_count = d * 8  # one bias-free Linear
    extra = memory.estimate_bytes(wide) - memory.estimate_bytes(narrow)
    assert extra == pytest.approx(memory._MARGIN * 4 * 4 * (wide_count - narrow_count), abs=2)
