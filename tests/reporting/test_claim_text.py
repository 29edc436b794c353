"""How a claim's numbers and group read (harness.reporting.claim_text): a real minus and no signed
zero; a group headed by its paper table with the authors and the table's title."""

from __future__ import annotations

from harness.reporting.claim_text import MINUS, PAPER_CITATIONS, heading, number
from harness.specs.claim import Claim


def test_numbers_print_a_real_minus_and_no_signed_zero() -> None:
    assert number(-0.18) == f"{MINUS}0.18" and number(0.54) == "+0.54"
    assert number(-0.004) == f"{MINUS}0.004" and number(0.0) == "0.00" and number(-0.0001) == "0.00"
    assert number(0.24, sign=False) == "0.24" and number(None) == "--"


def test_a_group_is_headed_by_its_paper_table_with_the_authors() -> None:
    claim = Claim("whitenedcse_table4", "a", "b", "avg", 1.0, "a > b", cites="WhitenedCSE Table 4")
    assert heading(claim) == "WhitenedCSE Table 4 (Zhuo et al., ACL 2023)"
    titled = Claim("t", "a", "b", "avg", 1.0, "a > b", cites="SimCSE++ Table 5", title="Search")
    assert heading(titled) == f"SimCSE++ Table 5 ({PAPER_CITATIONS['SimCSE++']}): Search"
    unknown = Claim("t", "a", "b", "avg", 1.0, "a > b", cites="Other Table 1", title="T")
    assert heading(unknown) == "Other Table 1: T"  # no authors known: the cite alone
    assert heading(Claim("cpu_demo", "a", "b", "avg", 1.0, "a > b")) == "cpu_demo"  # no cites: the spec
