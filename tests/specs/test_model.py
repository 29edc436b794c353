"""What a spec holds: values written as the tables print them."""

from __future__ import annotations

from harness.specs.model import format_value


def test_format_value() -> None:
    assert [format_value(v) for v in (1.0, 0.02, 384, True, "sgw")] == ["1", "0.02", "384", "true", "sgw"]
