"""The optimiser step: a fused AdamW, the linear schedule, and the compiled step (a GPU's path) giving
the eager step's losses and weights at one padded width."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from harness.config.run_config import resolve_config
from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_rate
from harness.run.step import TrainStep, linear_schedule
from methods import get_method


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
