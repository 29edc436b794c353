"""The SimCSE++ probes (noise and Barlow Twins): reductions to SimCSE, the losses they add, their
metrics and their parameters."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import methods.probes as probes
from harness.encoder.calls import EmbeddingEdit
from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods.probes import NoiseProbe, NoiseProbeParams
from tests.helpers import SENTS, assert_same, checked_params, loss_and_grads, make_method


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


@pytest.mark.parametrize(
    ("name", "overrides", "field"),
    [
        ("noise_probe", {"noise_var": -0.1}, "noise_var"),
        ("noise_probe", {"k_samples": 0}, "k_samples"),
        ("noise_probe", {"variant": "pos_noise"}, "variant"),
        ("barlow_probe", {"padding_rows": -1}, "padding_rows"),
        ("barlow_probe", {"bt_weight": -1.0}, "bt_weight"),
        ("barlow_probe", {"offdiag_weight": -1.0}, "offdiag_weight"),
    ],
)
def test_probe_bad_values_name_the_field(name, overrides, field):
    with pytest.raises(ConfigError, match=field):
        checked_params(name, **overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        {"variant": "pos_plus_noise", "noise_var": 0.0},
        {"variant": "neg_plus_noise", "noise_var": 0.0},
        {"variant": "pos_minus_noise", "k_samples": 1},
        {"variant": "neg_minus_noise", "k_samples": 1},
    ],
)
def test_noise_probes_without_noise_change_are_simcse(encoder, sents_batch, simcse_ref, overrides):
    method = make_method("noise_probe", encoder.hidden_size, **overrides)
    assert_same(loss_and_grads(method, encoder, sents_batch), simcse_ref)


def test_barlow_probe_with_zero_weight_is_simcse(encoder, sents_batch, simcse_ref):
    method = make_method("barlow_probe", encoder.hidden_size, bt_weight=0.0)
    assert_same(loss_and_grads(method, encoder, sents_batch), simcse_ref)


def test_barlow_probe_logs_correlation_rank(encoder, sents_batch):
    b = len(SENTS)
    out, _ = loss_and_grads(make_method("barlow_probe", encoder.hidden_size), encoder, sents_batch)
    assert 0 < float(out.metrics["corr_rank"]) <= b
    padded, _ = loss_and_grads(
        make_method("barlow_probe", encoder.hidden_size, padding_rows=100), encoder, sents_batch
    )
    assert float(padded.metrics["corr_rank"]) > b
    assert {"loss_infonce", "loss_bt"} <= set(padded.metrics)
    assert padded.loss.item() == pytest.approx(
        float(padded.metrics["loss_infonce"]) + float(padded.metrics["loss_bt"]), rel=1e-5
    )


@pytest.mark.parametrize(
    "variant", ["pos_plus_noise", "neg_plus_noise", "pos_minus_noise", "neg_minus_noise"]
)
def test_noise_probes_change_the_loss(encoder, sents_batch, simcse_ref, variant):
    method = make_method("noise_probe", encoder.hidden_size, variant=variant, k_samples=3)
    out, _ = loss_and_grads(method, encoder, sents_batch)
    assert torch.isfinite(out.loss)
    assert not torch.allclose(out.loss, simcse_ref[0].loss)


def test_barlow_probe_samples_rank_every_k_steps(encoder, sents_batch):
    method = make_method("barlow_probe", encoder.hidden_size, rank_every=5)
    encode = TrainingEncode(encoder)
    with torch.no_grad():
        sampled = [
            s for s in range(1, 12) if "corr_rank" in method.compute_loss(encode, sents_batch, s).metrics
        ]
    assert sampled == [1, 5, 10]
    never = make_method("barlow_probe", encoder.hidden_size, rank_every=0)
    with torch.no_grad():
        assert "corr_rank" not in never.compute_loss(encode, sents_batch, 1).metrics
