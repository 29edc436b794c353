"""The method contract (methods.base): the rows a step encodes, for every method."""

from __future__ import annotations

import torch

from tests.helpers import FakeEncode, fake_batch, make_method


def test_encoder_rows_per_method():
    cases = {
        ("simcse", ()): [(16, True)],
        ("whitenedcse", (("num_groups", 8),)): [(24, True)],
        ("whitenedcse", (("num_groups", 8), ("positive_source", "sgw"), ("num_positives", 4))): [(16, True)],
        ("simcsepp", ()): [(16, True), (8, False)],
        ("simcsepp", (("off_dropout", False),)): [(16, True)],
        ("noise_probe", (("variant", "neg_minus_noise"), ("k_samples", 3))): [(48, True)],
        ("barlow_probe", (("padding_rows", 5),)): [(16, True)],
    }
    for (name, overrides), expected in cases.items():
        encode = FakeEncode(32)
        out = make_method(name, 32, **dict(overrides)).compute_loss(encode, fake_batch(8), step=0)
        assert encode.calls == expected, name
        assert torch.isfinite(out.loss)
