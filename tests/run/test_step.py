"""The optimiser step: a fused AdamW, the linear schedule, and the compiled step (a GPU's path) giving
the eager step's losses and weights at one padded width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_rate
from harness.run.step import TrainStep, host_reads, linear_schedule
from harness.store.run_config import resolve_config
from methods import REGISTRY, get_method


def test_adamw_is_fused_where_it_can_be_and_updates_as_the_default_does() -> None:
    from harness.run.step import make_adamw

    torch.manual_seed(0)
    start = [torch.randn(30, 20), torch.randn(20)]
    fused = [torch.nn.Parameter(t.clone()) for t in start]
    plain = [torch.nn.Parameter(t.clone()) for t in start]
    opt = make_adamw(fused, 1e-2, 0.01)
    ref = torch.optim.AdamW(plain, lr=1e-2, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8)
    assert opt.defaults["fused"] and not ref.defaults["fused"]
    for _ in range(5):
        grads = [torch.randn_like(t) for t in start]
        for a, b, g in zip(fused, plain, grads):
            a.grad, b.grad = g.clone(), g.clone()
        opt.step()
        ref.step()
    for a, b, t in zip(fused, plain, start):
        assert (a - t).abs().max() > 1e-3  # it moved
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # a dtype without a fused kernel here: the default implementation
    doubles = [torch.nn.Parameter(torch.randn(3, dtype=torch.float64))]
    assert not make_adamw(doubles, 1e-2, 0.0).defaults["fused"]


def test_linear_schedule() -> None:
    f = linear_schedule(10)
    assert [f(s) for s in (0, 5, 10, 12)] == [1.0, 0.5, 0.0, 0.0]
    g = linear_schedule(10, warmup=2)
    assert [g(s) for s in (0, 1, 2, 6, 10)] == [0.0, 0.5, 1.0, 0.5, 0.0]


# -- the compiled step ---------------------------------------------------------------------------------
# The compiled training step (a GPU's path) computes what the eager step computes: the same losses
# and the same updated weights within float tolerance, with every call at one padded width and no
# read of a device value inside the step.

SENTENCES = [
    "a man is playing a guitar .",
    "two dogs run through the snow on a cold morning .",
    "the stock market fell sharply today .",
    "a woman is slicing an onion .",
]


def _step(data_root: Path, compiled: bool) -> TrainStep:
    config = resolve_config("simcse", None, "smoke", {"max_steps": 2, "batch_size": 4}, data_root=data_root)
    encoder = load_encoder("random:tiny", seed=0)
    torch.manual_seed(0)  # the same MLP head on both sides
    method = get_method("simcse")(config.params, encoder.hidden_size)
    return TrainStep(encoder, method, config, total=2, compile=compiled)


@pytest.mark.filterwarnings("ignore")
def test_the_compiled_step_gives_the_eager_steps_losses_and_weights(data_root: Path) -> None:
    eager, compiled = _step(data_root, False), _step(data_root, True)
    assert compiled.encoder.compiled and not eager.encoder.compiled
    losses = {}
    for name, step in (("eager", eager), ("compiled", compiled)):
        with dropout_rate(step.encoder, 0.0):  # no random masks: the two must agree
            losses[name] = [float(step(SENTENCES, i)[0]) for i in (1, 2)]
    assert losses["compiled"] == pytest.approx(losses["eager"], rel=1e-4)
    for a, b in zip(eager.encoder.parameters(), compiled.encoder.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_a_compiled_step_pads_every_call_to_one_width_and_reads_nothing_back(data_root: Path) -> None:
    step = _step(data_root, True)
    widths: list[int] = []
    original = step.encoder.features

    def spy(batch: dict[str, torch.Tensor], pooler: str = "cls_before_pooler", *, compiled: bool = False):
        widths.append(int(batch["attention_mask"].shape[1]))
        return original(batch, pooler, compiled=compiled)

    step.encoder.features = spy  # type: ignore[method-assign]
    step(SENTENCES, 1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss, _ = step(SENTENCES[::-1], 2)
    assert set(widths) == {step.config.max_length}  # full width, whatever the sentences' lengths

    def in_optimizer(event: object) -> bool:  # the fused AdamW reads its host-side step counters
        parent = getattr(event, "cpu_parent", None)
        while parent is not None:
            if parent.name.startswith("aten::_fused_adam"):
                return True
            parent = parent.cpu_parent
        return False

    reads = [e for e in prof.events() if e.name == "aten::_local_scalar_dense" and not in_optimizer(e)]
    assert reads == []
    assert loss.requires_grad is False and loss.dim() == 0  # handed back detached, not read


# -- host reads ------------------------------------------------------------------------------------
# No method's step reads a device value back (a GPU step would wait for the device): every registered
# method with each of its smoke_params, on the path a GPU runs (the encoder unpacked). The one read
# left is torch.linalg.eigh's own solver status (whitening), which PyTorch does not leave on the device.

CASES = [(name, dict(p)) for name, cls in REGISTRY.items() for p in cls.smoke_params]
EIGH_STATUS = ": _finite_eigh"


def _method_step(data_root: Path, name: str, params: dict[str, Any]) -> TrainStep:
    config = resolve_config(name, params, "smoke", {"max_steps": 3, "batch_size": 4}, data_root=data_root)
    encoder = load_encoder("random:tiny", seed=0)
    encoder.packed_training = False  # the CPU's packed forward: a GPU runs the unpacked one
    torch.manual_seed(0)
    return TrainStep(encoder, get_method(name)(config.params, encoder.hidden_size), config, total=3)


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_no_method_reads_the_device_back_inside_a_step(
    data_root: Path, name: str, params: dict[str, Any]
) -> None:
    step = _method_step(data_root, name, params)
    step(SENTENCES, 1)  # the first step fills queues and running statistics
    reads = host_reads(lambda: step(SENTENCES[::-1], 2))
    assert [site for site in reads if not site.endswith(EIGH_STATUS)] == []
    assert len(reads) <= 2  # one eigh per run of equal-sized whitening groups


def test_a_host_read_inserted_into_a_step_is_found(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step = _method_step(data_root, "simcse", {})
    original = step.method.compute_loss

    def reading(encode: Any, batch: Any, at: int) -> Any:
        out = original(encode, batch, at)
        if float(out.loss) > -1.0:  # a tensor's value on the host: the step waits for the device
            pass
        return out

    monkeypatch.setattr(step.method, "compute_loss", reading)
    reads = host_reads(lambda: step(SENTENCES, 1))
    assert (
        len(reads) == 1 and reads[0].startswith("tests/run/test_step.py(") and reads[0].endswith(": reading")
    )
    assert host_reads(lambda: _method_step(data_root, "simcse", {})(SENTENCES, 1)) == []


def test_a_steps_device_checks_are_kept_for_the_loop(data_root: Path) -> None:
    step = _method_step(data_root, "whitenedcse", {"num_groups": 128})
    step(SENTENCES, 1)
    assert step.checks and all(check.numbers.device == step.encoder.device for check in step.checks)
    assert [int(check.numbers[0]) for check in step.checks] == [0] * len(step.checks)  # nothing wrong
