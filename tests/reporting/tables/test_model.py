"""What a table cell holds: mean and sample sd, the chosen STS aggregate of a record, the measured
line's encoder name."""

from __future__ import annotations

import pytest

from harness.reporting.tables.model import RenderedTable, format_mean_std


def test_format_mean_std() -> None:
    assert format_mean_std([76.25]) == "76.25"
    assert format_mean_std([1.0, 3.0]) == "2.00 \u00b1 1.41"


def test_measured_lines_name_their_encoder(rendered: list[RenderedTable]) -> None:
    from harness.reporting.tables.model import encoder_name

    rows = rendered[0]
    labels = [(ln.kind, ln.label) for ln in rows.lines if ln.kind in ("paper", "measured")]
    # the paper line keeps the paper's label; the measured line below names encoder and profile
    assert labels[2:4] == [
        ("paper", "SimCSE-BERT-base"),
        ("measured", "measured: random tiny encoder (smoke)"),
    ]
    assert encoder_name("minilm") == "all-MiniLM-L6-v2"
    assert encoder_name("/models/my-encoder/") == "my-encoder"


# -- STS aggregates in tables ------------------------------------------------------------------------
AGG_RECORD = {
    "final": {
        "sts": {"STS12": 60.0, "STSBenchmark": 70.004, "avg": 65.0},
        "sts_aggregates": {"STS12": {"all": 60.0, "mean": 58.126, "wmean": 59.5}},
    }
}


def test_metric_reads_the_chosen_sts_aggregate() -> None:
    from harness.reporting.tables.model import _metric

    assert _metric(AGG_RECORD, "sts", "STS12") == 60.0
    assert _metric(AGG_RECORD, "sts", "STS12", "mean") == 58.126
    assert _metric(AGG_RECORD, "sts", "STS12", "wmean") == 59.5
    assert _metric(AGG_RECORD, "sts", "STSBenchmark", "mean") == 70.004  # not an STS12-16 year
    # avg recomputed the table's way: mean of the numbers rounded to 2 decimals
    assert _metric(AGG_RECORD, "sts", "avg", "mean") == pytest.approx((58.13 + 70.0) / 2)
    assert _metric(AGG_RECORD, "sts", "avg") == 65.0
    old = {"final": {"sts": {"STS12": 60.0, "avg": 60.0}}}  # a record from before aggregates
    assert _metric(old, "sts", "STS12", "mean") is None
