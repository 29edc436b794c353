"""The precisions: what each computes on a device, the TF32 switch and its restoration, the loss
scaler of fp16, and a training step in each (the GPU paths run here on the CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness.config.choices import PRECISIONS
from harness.config.settings import resolve_settings
from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_rate
from harness.encoder.precision import arithmetic, describe, grad_scaler, matmul_arithmetic
from harness.errors import ConfigError
from harness.run import checkpoint as ckpt
from harness.run.step import TrainStep
from harness.store.run_config import resolve_config
from methods import get_method
from tests.helpers import SENTS


def test_autocast_takes_each_precision_to_its_dtype_on_the_cpu() -> None:
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    want = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    assert set(want) == set(PRECISIONS)
    for precision, dtype in want.items():
        with arithmetic(precision, "cpu"):
            assert (a @ b).dtype == dtype, precision
        assert (a @ b).dtype == torch.float32  # and back after the block


@pytest.mark.parametrize(("precision", "inside"), [("tf32", "tf32"), ("fp32", "ieee"), ("bf16", "ieee")])
def test_tf32_is_switched_on_for_cuda_alone_and_restored_after_the_block(precision: str, inside: str) -> None:
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    with matmul_arithmetic(precision, "cpu"):
        assert matmul.fp32_precision == before  # a CPU has no TF32: nothing switched
    with pytest.raises(KeyError), matmul_arithmetic(precision, "cuda"):
        assert matmul.fp32_precision == inside
        raise KeyError("an error inside the block still restores the setting")
    assert matmul.fp32_precision == before


def test_describe_says_what_each_precision_computes_where() -> None:
    assert describe("tf32", "cuda") == "fp32 with TF32 matrix products"
    assert describe("tf32", "cpu").startswith("fp32 (TF32 is a GPU mode")
    assert describe("fp32", "cuda") == "fp32 (TF32 off)" and describe("fp32", "cpu") == "fp32"
    assert "loss scaling" in describe("fp16", "cuda") and "bf16" in describe("bf16", "cpu")
    with pytest.raises(ValueError, match="fp64"):
        describe("fp64", "cpu")


def test_only_fp16_scales_the_loss() -> None:
    assert [p for p in PRECISIONS if grad_scaler(p, "cpu") is not None] == ["fp16"]


def test_the_precision_setting_takes_the_four_and_names_them_when_refusing(data_root: Path) -> None:
    for precision in PRECISIONS:
        assert resolve_settings("smoke", {"precision": precision}, data_root).precision == precision
    with pytest.raises(ConfigError, match="fp64") as err:
        resolve_settings("smoke", {"precision": "fp64"}, data_root)
    assert all(p in str(err.value) for p in PRECISIONS)
    assert resolve_settings("paper", {}, data_root, require_corpus=False).precision == "tf32"


def _step(data_root: Path, precision: str) -> TrainStep:
    config = resolve_config(
        "simcse",
        None,
        "smoke",
        {"max_steps": 3, "batch_size": 4, "precision": precision},
        data_root=data_root,
    )
    encoder = load_encoder("random:tiny", seed=0)
    torch.manual_seed(0)
    method = get_method("simcse")(config.params, encoder.hidden_size)
    return TrainStep(encoder, method, config, total=6)


def _train(step: TrainStep, steps: int = 3) -> list[float]:
    with dropout_rate(step.encoder, 0.0):
        return [float(step(SENTS[:4], i)[0]) for i in range(1, steps + 1)]


def test_tf32_on_a_cpu_trains_exactly_as_fp32(data_root: Path) -> None:
    fp32, tf32 = _step(data_root, "fp32"), _step(data_root, "tf32")
    assert _train(tf32) == _train(fp32)  # the same kernels on both sides: equal to the bit
    for a, b in zip(fp32.encoder.parameters(), tf32.encoder.parameters(), strict=True):
        assert torch.equal(a, b)


def test_an_fp16_step_scales_the_loss_and_trains_as_fp32_does_up_to_fp16_rounding(data_root: Path) -> None:
    fp32, fp16 = _step(data_root, "fp32"), _step(data_root, "fp16")
    assert fp32.scaler is None and fp16.scaler is not None
    initial = fp16.scaler.get_scale()
    losses32, losses16 = _train(fp32, 6), _train(fp16, 6)
    assert losses16 == pytest.approx(losses32, rel=0.05)
    # PyTorch's scaler halves its scale at each overflow (skipping that update), so it falls from 2**16
    # by powers of two until the scaled gradients fit fp16; then the weights move
    scale = fp16.scaler.get_scale()
    assert scale <= initial and float.is_integer(torch.log2(torch.tensor(scale)).item())
    start = load_encoder("random:tiny", seed=0).parameters()
    assert any(not torch.equal(a, b) for a, b in zip(fp16.encoder.parameters(), start, strict=True))


def _parts(step: TrainStep) -> dict[str, Any]:
    return {
        "encoder": step.encoder,
        "method": step.method,
        "optimizer": step.optimizer,
        "scheduler": step.scheduler,
    }


def test_a_checkpoint_keeps_the_loss_scale(data_root: Path) -> None:
    step, again = _step(data_root, "fp16"), _step(data_root, "fp16")
    assert step.scaler is not None and again.scaler is not None
    _train(step, 1)
    step.scaler.update(1024.0)  # as after overflows halved it
    times: dict[str, Any] = {"train_time": 0.0, "eval_time": 0.0}
    state = ckpt.training_state(
        config={}, step=2, **_parts(step), best={}, record={}, **times, scaler=step.scaler
    )
    assert again.scaler.get_scale() != 1024.0
    ckpt.restore_training_state(state, **_parts(again), best={}, record={}, scaler=again.scaler)
    assert again.scaler.get_scale() == 1024.0
    assert "scaler" not in ckpt.training_state(config={}, step=2, **_parts(step), best={}, record={}, **times)
