"""The compiled training step (a GPU's path) computes what the eager step computes: the same losses
and the same updated weights within float tolerance, with every call at one padded width and no
read of a device value inside the step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from harness.config.run_config import resolve_config
from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_rate
from harness.run.step import TrainStep
from methods import get_method

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
