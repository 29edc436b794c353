"""The HTML report's claims section: harness claims as a table, other claims files as they are."""

from __future__ import annotations

import json
from pathlib import Path


def test_report_claims_from_json(tmp_path: Path) -> None:
    from harness.reporting.report import claims_html

    assert "No claims computed." in claims_html(tmp_path)
    (tmp_path / "claims.json").write_text('{"claims": [{"id": "c1", "holds": true}]}', encoding="utf-8")
    text = claims_html(tmp_path)
    assert "&quot;id&quot;: &quot;c1&quot;" in text and "No claims" not in text
    (tmp_path / "claims.md").write_text("markdown wins", encoding="utf-8")
    assert "markdown wins" in claims_html(tmp_path)


def test_report_shows_harness_claims_as_a_table(tmp_path: Path) -> None:
    from harness.reporting.report import claims_html

    claims = {
        "claims": [
            {
                "spec": "cpu_demo",
                "text": "A beats <B>",
                "paper_delta": 2.53,
                "mean": -0.74,
                "ci95": [-1.2, -0.28],
                "n": 3,
                "verdict": "reversed",
                "mdd80": 0.6,
            }
        ]
    }
    (tmp_path / "claims.json").write_text(json.dumps(claims), encoding="utf-8")
    (tmp_path / "claims.md").write_text("the markdown", encoding="utf-8")
    text = claims_html(tmp_path)
    assert '<table class="results claims">' in text and "the markdown" not in text
    assert "A beats &lt;B&gt;" in text and "[\u22121.20, \u22120.28]" in text
    assert "+2.53" in text and ">reversed<" in text
