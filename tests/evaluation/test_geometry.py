"""Alignment, uniformity and the STS-B dev probe: closed forms and slow loop references."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from harness.evaluation.geometry import StsbDevProbe, alignment, uniformity
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


def test_probe_against_direct_computation(mini_data_root: Path) -> None:
    senteval = mini_data_root / "senteval"
    calls: list[list[str]] = []
    rng = np.random.default_rng(0)
    table: dict[str, np.ndarray] = {}

    def embed(sentences: list[str]) -> np.ndarray:
        calls.append(sentences)
        return np.stack([table.setdefault(s, rng.standard_normal(8).astype(np.float32)) for s in sentences])

    probe = StsbDevProbe(senteval, batch_size=16)
    got = probe(embed)
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
    assert probe(embed) == pytest.approx(got)
