"""Dropout keep masks drawn from int64 numbers: bernoulli_'s masks and generator state, or bernoulli_."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness.encoder import keep_masks
from harness.encoder.keep_masks import _threshold, draw_keep_masks, fast_draw_matches

SHAPES = [((3, 5, 7), 0.9), ((2, 4, 1, 9), 0.9), ((1,), 0.4), ((6, 33), 1.0), ((4, 129), 0.5), ((2, 3), 0.05)]


def _reference(shapes: list[tuple[tuple[int, ...], float]]) -> list[torch.Tensor | None]:
    return [
        None if keep >= 1.0 else torch.empty(shape, dtype=torch.bool).bernoulli_(keep)
        for shape, keep in shapes
    ]


def _same(a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> bool:
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
        for x, y in zip(a, b)
    )


def test_this_build_draws_as_the_fast_path_assumes() -> None:
    # If a PyTorch upgrade changes its kernels this fails, and the masks fall back to bernoulli_.
    assert fast_draw_matches()


@pytest.mark.parametrize("fast", [True, False])
def test_the_masks_and_the_stream_are_bernoulli_s(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    monkeypatch.setattr(keep_masks, "_MATCHES", None if fast else False)
    torch.manual_seed(11)
    expected = _reference(SHAPES)
    after_expected = torch.rand(5)
    torch.manual_seed(11)
    got = draw_keep_masks(SHAPES, torch.device("cpu"))
    assert torch.equal(torch.rand(5), after_expected)
    assert _same(got, expected)
    assert got[3] is None
    assert all(m is None or (m.dtype == torch.bool and tuple(m.shape) == s) for m, (s, _) in zip(got, SHAPES))


def test_a_different_stream_position_gives_different_masks() -> None:
    # the control: the comparison above can fail
    torch.manual_seed(11)
    expected = _reference(SHAPES)
    torch.manual_seed(11)
    torch.rand(1)
    assert not _same(draw_keep_masks(SHAPES, torch.device("cpu")), expected)


def test_nothing_to_draw_draws_nothing() -> None:
    torch.manual_seed(3)
    assert draw_keep_masks([((4, 4), 1.0)], torch.device("cpu")) == [None]
    after = torch.rand(3)
    torch.manual_seed(3)
    assert torch.equal(torch.rand(3), after)


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.37, 1.0 - 0.1, 1.0 - 0.6, 0.1, 2.0**-60])
def test_the_integer_threshold_is_the_double_comparison(keep: float) -> None:
    t = _threshold(keep)
    for m in (t - 1, t, t + 1):
        if 0 <= m < 2**53:
            assert (m * 2.0**-53 < keep) == (m < t)


def test_a_build_that_draws_otherwise_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keep_masks, "_MATCHES", None)
    monkeypatch.setattr(keep_masks, "_LOW_53", (1 << 52) - 1)  # a different reading of the numbers
    assert not fast_draw_matches()


def test_training_steps_give_the_same_losses_and_weights_to_the_last_bit(
    data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packed training steps with masks drawn fast and with bernoulli_: identical, not just close."""
    from harness.encoder.loading import load_encoder
    from harness.run.step import TrainStep
    from harness.store.run_config import resolve_config
    from methods import get_method
    from tests.helpers import EMBED_SENTS

    sentences = [*EMBED_SENTS, "a", "one two three four five six seven eight nine ten eleven"] * 3
    config = resolve_config(
        "simcse", None, "smoke", {"max_steps": 3, "batch_size": 8, "length_buckets": 4}, data_root=data_root
    )
    results, used = [], []
    fast_draw = keep_masks._fast

    def counted(*args: Any) -> None:
        used.append(1)
        fast_draw(*args)

    monkeypatch.setattr(keep_masks, "_fast", counted)
    for fast in (True, False):
        monkeypatch.setattr(keep_masks, "_MATCHES", None if fast else False)
        encoder = load_encoder("random:tiny", seed=0)
        assert encoder.packed_training
        torch.manual_seed(0)
        step = TrainStep(encoder, get_method("simcse")(config.params, encoder.hidden_size), config, total=3)
        losses = [float(step(sentences[i : i + 8], i + 1)[0]) for i in range(3)]
        results.append((losses, [p.detach().clone() for p in encoder.parameters()], torch.get_rng_state()))
        assert (len(used) > 0) == fast  # the masks came the way this arm says
        used.clear()
    (fast_losses, fast_weights, fast_rng), (losses, weights, rng) = results
    assert fast_losses == losses and len(set(losses)) == 3
    assert all(torch.equal(a, b) for a, b in zip(fast_weights, weights, strict=True))
    assert torch.equal(fast_rng, rng)
