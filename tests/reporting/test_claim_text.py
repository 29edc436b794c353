"""How a claim's numbers and group read (harness.reporting.claim_text): a real minus and no signed
zero; a group headed by its paper table with the authors and the table's title."""

from __future__ import annotations

from harness.reporting.claim_text import MINUS, number


def test_numbers_print_a_real_minus_and_no_signed_zero() -> None:
    assert number(-0.18) == f"{MINUS}0.18" and number(0.54) == "+0.54"
    assert number(-0.004) == f"{MINUS}0.004" and number(0.0) == "0.00" and number(-0.0001) == "0.00"
    assert number(0.24, sign=False) == "0.24" and number(None) == "--"
