"""The papers' literal forms, each behind a switch whose default keeps the earlier behaviour."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import methods.probes as probes
from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from methods import build_params
from methods.base import EmbeddingEdit
from methods.losses import correlation_rank, cross_correlation, dcl_loss, multi_positive_l2
from methods.probes import NoiseProbe, NoiseProbeParams
from methods.whitenedcse import WhitenedCSEParams
from methods.whitening import RunningWhitening


def test_l2_printed_form_on_hand_values() -> None:
    # anchors e1, e2; positive 1 = the anchors (s = 1), positive 2 = the anchors swapped (s = 0); tau 1.
    h = torch.eye(2, dtype=torch.float64)
    pos = torch.stack([h, h.flip(0)], dim=1)
    e = math.e
    # printed Eq. 8: -log[(exp(-1) + exp(-0)) / (1 + e)] = -log(1 / e) = 1 for each row.
    assert multi_positive_l2(h, pos, 1.0, form="printed").item() == pytest.approx(1.0, rel=1e-12)
    w = (0.5, 2.0)
    expected = math.log((1 + e) / (0.5 / e + 2.0))
    assert multi_positive_l2(h, pos, 1.0, w, form="printed").item() == pytest.approx(expected, rel=1e-12)
    # the default form is unchanged: -log((e + 1) / (1 + e)) = 0
    assert multi_positive_l2(h, pos, 1.0).item() == pytest.approx(0.0, abs=1e-12)


def test_whitenedcse_l2_form_switch_reaches_the_loss() -> None:
    params = build_params("whitenedcse", {"loss": "l2", "l2_form": "printed"})
    assert params == WhitenedCSEParams(loss="l2", l2_form="printed")
    assert build_params("whitenedcse") == WhitenedCSEParams(l2_form="softmax")


def test_uncentred_cross_correlation_on_hand_values_and_rank_bounds() -> None:
    z1 = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    z2 = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    # C_kl = sum_b z1_bk z2_bl / (||z1_.k|| ||z2_.l||)
    expected = torch.tensor(
        [[2 / (math.sqrt(2) * 2), 2 / (math.sqrt(2) * math.sqrt(2))], [0.0, 1 / math.sqrt(2)]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(cross_correlation(z1, z2, centre=False), expected)
    g = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(4, 8, generator=g, dtype=torch.float64),
        torch.randn(4, 8, generator=g, dtype=torch.float64),
    )
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b))) == 3  # centred: B - 1
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b, centre=False))) == 4  # uncentred: B
    pad = torch.randn(2, 8, generator=g, dtype=torch.float64)
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b, pad))) == 5  # B + M - 1
    assert int(torch.linalg.matrix_rank(cross_correlation(a, b, pad, centre=False))) == 6  # B + M
    # the probe's own rank, also of a bf16 matrix (CUDA's autocast makes one; matrix_rank refuses it)
    assert correlation_rank(cross_correlation(a, b, pad)) == 5
    assert correlation_rank(torch.diag(torch.tensor([1.0, 2.0, 0.0, 3.0])).to(torch.bfloat16)) == 3


def test_dcl_divisor_is_the_biased_batch_size() -> None:
    # C = BN(z1)^T BN(z2) / B / tau is the Pearson correlation matrix over tau (B divisor, biased BN).
    g = torch.Generator().manual_seed(1)
    z1 = torch.randn(16, 3, generator=g, dtype=torch.float64)
    z2 = z1 + 0.3 * torch.randn(16, 3, generator=g, dtype=torch.float64)
    corr = torch.corrcoef(torch.cat([z1, z2], dim=1).T)[:3, 3:] / 5.0
    ref = torch.nn.functional.cross_entropy(corr, torch.arange(3))
    assert dcl_loss(z1, z2, tau_dcl=5.0, eps=1e-12).item() == pytest.approx(ref.item(), rel=1e-8)
    # a (B - 1) divisor would be the same loss at tau * (B - 1) / B: the documented equivalence
    unbiased = torch.nn.functional.cross_entropy(corr * 16 / 15, torch.arange(3))
    assert dcl_loss(z1, z2, tau_dcl=5.0 * 15 / 16, eps=1e-12).item() == pytest.approx(
        unbiased.item(), rel=1e-8
    )


class CountingEncode:
    """Records how many rows each encoder call had, and returns distinct rows."""

    def __init__(self, encode: TrainingEncode) -> None:
        self.encode = encode
        self.hidden_size = encode.hidden_size
        self.rows: list[int] = []

    def __call__(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: torch.nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> Any:
        self.rows.append(int(batch["input_ids"].shape[0]))
        return self.encode(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)

    def tokens(
        self,
        batch: dict[str, torch.Tensor],
        *,
        dropout: bool | float = True,
        encoder: torch.nn.Module | None = None,
        embeddings: EmbeddingEdit | None = None,
    ) -> Any:
        self.rows.append(int(batch["input_ids"].shape[0]))
        return self.encode.tokens(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)


@pytest.mark.parametrize("variant", ["pos_minus_noise", "neg_minus_noise"])
def test_minus_noise_independent_samples(variant: str) -> None:
    encoder = load_encoder("random:tiny", seed=0)
    encoder.train()
    batch = encoder.tokenize(["a b c", "d e f", "g h i"], max_length=16)
    k = 3
    for independent, rows in ((False, 3 * 2 * k), (True, 3 * (2 * k + 2))):
        params = NoiseProbeParams.from_overrides(
            {"variant": variant, "k_samples": k, "k_independent": independent}
        )
        method = NoiseProbe(params, encoder.hidden_size)
        seen: dict[str, torch.Tensor] = {}

        def spy(*args: torch.Tensor, seen: dict[str, torch.Tensor] = seen, **kwargs: float) -> torch.Tensor:
            seen["args"] = torch.stack([a.detach() for a in args[:4]])
            return args[0].sum() * 0

        counting = CountingEncode(TrainingEncode(encoder))

        original = probes.split_info_nce
        probes.split_info_nce = spy  # type: ignore[assignment]
        try:
            torch.manual_seed(0)
            method.compute_loss(counting, batch, step=1)
        finally:
            probes.split_info_nce = original
        assert counting.rows == [rows]
        means = seen["args"][:2] if variant == "pos_minus_noise" else seen["args"][2:]
        singles = seen["args"][2:] if variant == "pos_minus_noise" else seen["args"][:2]
        # recompute the head outputs of every view to see which views the singles are
        torch.manual_seed(0)
        views = method.head(method.encode_views(TrainingEncode(encoder), batch, rows // 3)).detach()
        torch.testing.assert_close(means[0], views[:, :k].mean(dim=1))
        torch.testing.assert_close(means[1], views[:, k : 2 * k].mean(dim=1))
        if independent:
            torch.testing.assert_close(singles[0], views[:, 2 * k])
            torch.testing.assert_close(singles[1], views[:, 2 * k + 1])
        else:
            torch.testing.assert_close(singles[0], views[:, 0])
            torch.testing.assert_close(singles[1], views[:, k])


def test_running_whitening_previous_statistics_follow_eq13() -> None:
    g = torch.Generator().manual_seed(3)
    x1 = torch.randn(32, 3, generator=g, dtype=torch.float64)
    x2 = torch.randn(32, 3, generator=g, dtype=torch.float64) * 2 + 1
    current = RunningWhitening(3, "zca", momentum=0.5, eps=0.0)
    previous = RunningWhitening(3, "zca", momentum=0.5, eps=0.0, stats="previous")
    out_c1, _ = current(x1)
    out_p1, _ = previous(x1)
    torch.testing.assert_close(out_c1, out_p1)  # the first batch uses its own statistics either way
    out_p2, _ = previous(x2)
    # batch 2 is whitened with batch 1's statistics (the running estimate before batch 2)
    mu1 = x1.mean(0)
    cov1 = (x1 - mu1).T @ (x1 - mu1) / 32
    evals, evecs = torch.linalg.eigh(cov1)
    w1 = evecs @ torch.diag(evals.rsqrt()) @ evecs.T
    torch.testing.assert_close(out_p2, (x2 - mu1) @ w1)
    # and both modules hold the same running estimates afterwards (0.5 * batch 1 + 0.5 * batch 2)
    current(x2)
    torch.testing.assert_close(previous.running_mean, current.running_mean)
    torch.testing.assert_close(previous.running_cov, current.running_cov)
    torch.testing.assert_close(previous.running_mean, 0.5 * mu1 + 0.5 * x2.mean(0))
