"""The unit costs (harness.grid.plan.unit_costs): the encoder classes the built-in table prices, and
how trials sharing a GPU slow each other (a grid's estimate with them: tests/grid/plan/test_cost.py)."""

from __future__ import annotations

import pytest

from harness.config.models import TINY_MODEL
from harness.grid.plan.unit_costs import BUILTIN, COMPUTE, encoder_class, sharing_slowdown


def test_every_built_in_row_names_a_priced_encoder_class() -> None:
    assert BUILTIN and all(kind in COMPUTE for _device, kind, _precision in BUILTIN)
    assert encoder_class(TINY_MODEL) != encoder_class("bert-base-uncased")


def test_sharing_a_gpu_follows_the_measured_throughput() -> None:
    assert sharing_slowdown("bert-base-uncased", 1) == 1.0
    assert sharing_slowdown("bert-base-uncased", 4) == pytest.approx(4 * 14.8 / 49.4)
    assert sharing_slowdown("bert-base-uncased", 2) < 1.0  # two small-kernel trials overlap
