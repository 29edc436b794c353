"""A table spec's claims (harness.specs.claim): the label that names a claim's row wherever it is
shown (``<pair> on <metric>``) is unique within its table and reads as the table names its cells; the
paper a ``cites`` string names."""

from __future__ import annotations

from collections import Counter

from harness.reporting.claim_text import heading
from harness.specs.claim import Claim, paper_of
from harness.specs.find import load_table_specs


def test_every_claim_label_is_unique_within_its_table() -> None:
    claims = [c for spec in load_table_specs() for c in spec.claims]
    assert len(claims) >= 55
    twice = [key for key, n in Counter((c.spec, c.label) for c in claims).items() if n > 1]
    assert twice == []
    assert all(c.pair and c.metric and c.label.endswith(f" on {c.metric}") for c in claims)


def test_pairs_read_as_the_table_names_them() -> None:
    by = {(c.spec, c.better, c.worse): c for spec in load_table_specs() for c in spec.claims}
    assert (
        by[("simcsepp_table5", "STS-B dev [m=0.9]", "STS-B dev [m=0.5]")].label
        == "m = 0.9 > m = 0.5 on STS-B dev"
    )
    table4 = by[("whitenedcse_table4", "STS-Avg. (shuffled) [num_groups=32]", "w/o shuffled [num_groups=32]")]
    assert table4.label == "STS-Avg. (shuffled) > w/o shuffled at Group size = 32 on STS avg"
    transfer = by[("whitenedcse_table2", "WhitenedCSE-BERT-base", "SimCSE-BERT-base")]
    assert transfer.label == "WhitenedCSE-BERT-base > SimCSE-BERT-base on transfer avg"
    assert heading(table4) == (
        "WhitenedCSE Table 4 (Zhuo et al., ACL 2023): Number of groups and shuffling (STS average)"
    )


def test_the_label_falls_back_to_the_cell_keys_and_the_paper_is_read_off_cites() -> None:
    plain = Claim("t", "a [m=1]", "a [m=0]", "avg", 1.0, "a beats a")
    assert plain.label == "a [m=1] > a [m=0]"
    named = Claim("t", "a", "b", "avg", 1.0, "a beats b", pair="m = 1 > m = 0", metric="STS avg")
    assert named.label == "m = 1 > m = 0 on STS avg"
    assert paper_of("SimCSE++ Table 3") == "SimCSE++" and paper_of(" WhitenedCSE Table 4 ") == "WhitenedCSE"
    assert paper_of("a note") == "a note"
