"""Alignment, uniformity and the STS-B dev evaluation: closed forms and slow loop references."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from harness.evaluation.geometry import (
    StsbDevEval,
    alignment,
    alignment_torch,
    cosine_scores_torch,
    uniformity,
    uniformity_torch,
)
from harness.evaluation.sts import cosine_scores, read_stsb


def alignment_loop(x: np.ndarray, y: np.ndarray) -> float:
    total = 0.0
    for a, b in zip(x, y):
        a = a / np.linalg.norm(a)
        b = b / np.linalg.norm(b)
        total += sum((ai - bi) ** 2 for ai, bi in zip(a, b))
    return total / len(x)


def uniformity_loop(x: np.ndarray, t: float = 2.0) -> float:
    rows = [r / np.linalg.norm(r) for r in x]
    terms = [
        math.exp(-t * float(np.sum((rows[i] - rows[j]) ** 2)))
        for i, j in itertools.combinations(range(len(rows)), 2)
    ]
    return math.log(sum(terms) / len(terms))


def test_identical_pairs_have_zero_alignment() -> None:
    x = np.random.default_rng(0).standard_normal((10, 5))
    assert alignment(x, x) == pytest.approx(0.0, abs=1e-15)
    assert alignment(x, 3.0 * x) == pytest.approx(0.0, abs=1e-15)  # scale-free: rows are normalised


def test_antipodal_pairs() -> None:
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert alignment(x, -x) == pytest.approx(4.0)
    assert uniformity(np.array([[0.0, 1.0], [0.0, -1.0]])) == pytest.approx(-8.0, abs=1e-12)
    assert uniformity(np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("n", "d", "t"), [(2, 3, 2.0), (7, 4, 2.0), (40, 16, 2.0), (33, 8, 0.5)])
def test_against_loop_reference(n: int, d: int, t: float) -> None:
    rng = np.random.default_rng(n * 100 + d)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = x + 0.3 * rng.standard_normal((n, d)).astype(np.float32)
    assert alignment(x, y) == pytest.approx(
        alignment_loop(x.astype(np.float64), y.astype(np.float64)), rel=1e-10
    )
    want = uniformity_loop(x.astype(np.float64), t)
    assert uniformity(x, t) == pytest.approx(want, rel=1e-10, abs=1e-12)
    # Row blocks smaller than n must give the same answer.
    assert uniformity(x, t, block=3) == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_uniformity_is_stable_for_large_t() -> None:
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    # Pair distances^2: 4, 2, 2 -> log((e^{-4t} + 2 e^{-2t}) / 3), computed without underflow.
    t = 400.0
    want = -2 * t + math.log((math.exp(-2 * t) + 2) / 3)
    assert uniformity(x, t) == pytest.approx(want, rel=1e-12)


def test_bad_shapes() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        uniformity(np.ones((1, 3)))
    with pytest.raises(ValueError, match="shape"):
        alignment(np.ones((2, 3)), np.ones((3, 3)))


def test_dev_eval_against_direct_computation(mini_data_root: Path) -> None:
    senteval = mini_data_root / "senteval"
    calls: list[list[str]] = []
    rng = np.random.default_rng(0)
    table: dict[str, np.ndarray] = {}

    def embed(sentences: list[str]) -> np.ndarray:
        calls.append(sentences)
        return np.stack([table.setdefault(s, rng.standard_normal(8).astype(np.float32)) for s in sentences])

    dev_eval = StsbDevEval(senteval, batch_size=16)
    got = dev_eval(embed)
    pairs = read_stsb(senteval, "dev")
    embedded = [s for call in calls for s in call]
    assert len(embedded) == len(set(embedded)) == len(set(pairs.sent1) | set(pairs.sent2))

    e1 = np.stack([table[s] for s in pairs.sent1])
    e2 = np.stack([table[s] for s in pairs.sent2])
    positive = pairs.gold >= 4.0
    assert 0 < positive.sum() < len(pairs)
    assert got["stsb_dev"] == pytest.approx(100 * spearmanr(cosine_scores(e1, e2), pairs.gold)[0], abs=1e-9)
    assert got["align"] == pytest.approx(
        alignment_loop(e1[positive].astype(float), e2[positive].astype(float))
    )
    distinct = np.stack([table[s] for s in sorted(set(pairs.sent1) | set(pairs.sent2))]).astype(float)
    assert got["uniform"] == pytest.approx(uniformity_loop(distinct), rel=1e-9)
    # A second call re-embeds (the encoder changes during training) and gives the same numbers here.
    assert dev_eval(embed) == pytest.approx(got)


@pytest.mark.parametrize(("n", "d", "t", "block"), [(2, 3, 2.0, 1024), (40, 16, 2.0, 7), (33, 8, 0.5, 1024)])
def test_torch_geometry_equals_numpy(n: int, d: int, t: float, block: int) -> None:
    """The device path's alignment, uniformity and cosine (here on the CPU) equal the NumPy ones."""
    rng = np.random.default_rng(n * 10 + d)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = x + 0.3 * rng.standard_normal((n, d)).astype(np.float32)
    x[0] = 0.0  # a zero row: cosine 0, normalised to 0
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    assert float(alignment_torch(tx, ty)) == pytest.approx(alignment(x, y), rel=1e-12)
    assert float(uniformity_torch(tx, t, block)) == pytest.approx(uniformity(x, t), rel=1e-12, abs=1e-12)
    cosines = cosine_scores_torch(tx, ty)
    assert cosines.dtype == torch.float32
    np.testing.assert_allclose(cosines.numpy(), cosine_scores(x, y), rtol=1e-6, atol=1e-6)
    assert cosines[0] == 0.0


def test_dev_eval_on_the_device_path_equals_the_host_path(mini_data_root: Path) -> None:
    """The packaged encoder evaluated as a run on a GPU evaluates it (tokens cached, tensors left where they
    lie, scores computed by torch; here on the CPU) gives today's numbers within float tolerance, and
    the run's CPU path (cached tokens, NumPy scores) gives them bit for bit. (The tiny random encoder
    would not do: its cosines span 1e-4, where float32 rounding alone reorders the pairs.)"""
    from harness.encoder.loading import load_encoder
    from harness.encoder.model import TokenCache
    from harness.evaluation.runner import encoder_functions

    encoder = load_encoder("minilm")
    embed, token_lengths = encoder_functions(encoder, "cls_before_pooler")
    dev_eval = StsbDevEval(mini_data_root / "senteval", batch_size=16, token_lengths=token_lengths)
    today = dev_eval(embed)
    cache = TokenCache(encoder)

    def on_device(batch: list[str]) -> torch.Tensor:
        return encoder.embed_tensor(batch, "cls_before_pooler", tokens=cache)

    assert dev_eval(lambda batch: on_device(batch).numpy()) == today
    for _ in range(2):  # the second call embeds from the cached tokens
        got = dev_eval(on_device)
        assert got["stsb_dev"] == pytest.approx(today["stsb_dev"], abs=1e-6)
        assert got["align"] == pytest.approx(today["align"], rel=1e-9)
        assert got["uniform"] == pytest.approx(today["uniform"], rel=1e-9)
