"""benchmarks/bench_precision_losses.py: every precision trains from the same weights on the same
batches; on a CPU tf32 is fp32's arithmetic, so its losses equal fp32's to the bit, while bf16's
differ and stay near them; too few steps exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import bench_precision_losses


def test_losses_per_precision_against_fp32(
    linked_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "losses.json"
    argv = ["--model", "random:tiny", "--steps", "4", "--batch-size", "8", "--threads", "1"]
    argv += ["--precisions", "bf16,tf32", "--data-dir", str(linked_root), "--json", str(out)]
    assert bench_precision_losses.main(argv) == 0
    result = json.loads(out.read_text())
    losses = result["losses"]
    assert list(losses) == ["fp32", "bf16", "tf32"] and all(len(v) == 4 for v in losses.values())
    assert losses["tf32"] == losses["fp32"]  # a CPU has no TF32 products
    bf16 = result["against_fp32"]["bf16"]
    assert bf16["max_abs"] > 0
    # bf16 keeps 8 bits of mantissa: a loss moves by a small share of itself, not by its size
    assert bf16["max_abs"] < 0.05 * max(abs(v) for v in losses["fp32"])
    assert bf16["max_abs"] == max(abs(a - b) for a, b in zip(losses["fp32"], losses["bf16"], strict=True))
    assert "bf16 against fp32" in capsys.readouterr().out
    assert bench_precision_losses.main([*argv, "--steps", "1"]) == 2
    assert "at least 2 steps" in capsys.readouterr().err
