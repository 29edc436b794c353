"""The table specs against the papers' quoted tables (PAPER_TABLES.md): every paper table has a spec,
every paper number and every claim's paper delta is the quoted one, and a new source needs its spec
and its quoted numbers only (tests/spec_checks.py holds the checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.specs.find import load_plot_specs, load_table_specs, table_spec_paths
from harness.specs.parse import load_table_spec
from methods import build_params
from tests.helpers import spec_text, write_spec
from tests.paper_tables import PAPER_TABLES, parse_paper_tables
from tests.spec_checks import (
    check_cites,
    check_claim_deltas,
    check_paper_numbers,
    check_reproduced_or_excerpt,
    check_spec,
    reproduces,
)


@pytest.fixture(scope="module")
def paper() -> dict[str, list[dict[str, Any]]]:
    assert PAPER_TABLES.is_file(), f"{PAPER_TABLES} is part of the repository"
    return parse_paper_tables(PAPER_TABLES.read_text(encoding="utf-8"))


CITED = [f"WhitenedCSE Table {i}" for i in range(1, 7)] + [f"SimCSE++ Table {i}" for i in range(1, 6)]
"""Every paper table the harness reproduces (SimCSE++ Table 6, a training time, is not a spec)."""


def test_every_paper_table_has_a_spec_and_every_spec_cites_one(paper: dict[str, Any]) -> None:
    specs = load_table_specs()
    for table in CITED:
        assert table in paper, f"{table} missing from PAPER_TABLES.md"
        assert any(reproduces(s, paper, table) for s in specs), f"no spec reproduces {table}"
    for spec in specs:
        check_cites(spec, paper)


@pytest.mark.parametrize("path", table_spec_paths(), ids=lambda p: p.stem)
def test_paper_numbers_equal_paper_tables(path: Path, paper: dict[str, Any]) -> None:
    spec = load_table_spec(path)
    check_paper_numbers(spec, paper)
    # every row of the paper's table appears in the spec, in the paper's order (or, for an excerpt
    # such as the `make run` demo, in another spec)
    check_reproduced_or_excerpt(spec, load_table_specs(), paper)


NEW_SOURCE = """
## Foo Table 1 \u2014 a made-up paper's STS results (Spearman x100)

| Model | STS-B | SICK-R | Avg. |
|---|---|---|---|
| GloVe (avg.) | 58.02 | 53.76 | 55.89 |
| SimCSE-BERT-base | 76.85 | 72.23 | 74.54 |
| * FooCSE-BERT-base | 78.10 | 73.00 | 75.55 |
"""


NEW_SPEC = spec_text(
    """
[[rows]]
label = "GloVe (avg.)"
quoted = true
paper = [58.02, 53.76, 55.89]

[[rows]]
label = "SimCSE-BERT-base"
method = "simcse"
paper = [76.85, 72.23, 74.54]

[[rows]]
label = "FooCSE-BERT-base"
ours = true
method = "simcsepp"
paper = [78.10, 73.00, 75.55]

[[claims]]
better = "FooCSE-BERT-base"
worse = "SimCSE-BERT-base"
text = "FooCSE beats SimCSE on STS avg"
""",
    cites="Foo Table 1",
    title="FooCSE against SimCSE",
    columns='["STSBenchmark", "SICKRelatedness", "avg"]',
)


def test_a_spec_of_a_new_source_needs_its_file_and_its_quoted_numbers(tmp_path: Path) -> None:
    """A new source = its section of quoted numbers (here a PAPER_TABLES-like file of its own) and its
    TOML spec: every spec check passes with nothing else changed, and a wrong number still fails."""
    quotes = tmp_path / "PAPER_TABLES.md"
    quotes.write_text(NEW_SOURCE, encoding="utf-8")
    paper = parse_paper_tables(quotes.read_text(encoding="utf-8"))
    path = write_spec(tmp_path / "tables" / "foo_table1.toml", NEW_SPEC)
    spec = load_table_spec(path)
    specs = [*load_table_specs(), spec]
    if PAPER_TABLES.is_file():
        paper = {**parse_paper_tables(PAPER_TABLES.read_text(encoding="utf-8")), **paper}
    check_spec(spec, specs, paper)
    assert check_claim_deltas(spec, paper) == 1
    assert load_table_specs(directory=tmp_path / "tables")[0].name == "foo_table1"  # found by the commands
    # an excerpt of the new table (the demo's kind of spec) passes while a spec reproduces the table
    excerpt_text = NEW_SPEC.split("[[rows]]", 2)[0] + "[[rows]]" + NEW_SPEC.split("[[rows]]", 2)[2]
    excerpt_path = write_spec(tmp_path / "tables" / "foo_demo.toml", excerpt_text)
    excerpt = load_table_spec(excerpt_path)
    check_spec(excerpt, [*specs, excerpt], paper)
    with pytest.raises(AssertionError, match="no spec reproduces Foo Table 1"):
        check_spec(excerpt, [s for s in specs if s is not spec], paper)
    # a misquoted number fails
    write_spec(path, NEW_SPEC.replace("78.10", "78.01"))
    with pytest.raises(AssertionError, match="FooCSE-BERT-base"):
        check_spec(load_table_spec(path), specs, paper)


def test_plot_series_are_table_runs() -> None:
    """`harness grid all` runs what the plots need: every series equals some table's run row."""
    runs = set()
    for spec in load_table_specs():
        for _key, run in spec.run_cells():
            if not run.overrides and run.only_profiles is None:
                runs.add((run.method, repr(build_params(run.method, dict(run.params)).to_dict())))
    for plot in load_plot_specs():
        for s in plot.series:
            assert (s.run.method, repr(build_params(s.run.method, dict(s.run.params)).to_dict())) in runs


# -- claims as data ---------------------------------------------------------------------------------
EXPECTED = {
    ("cpu_demo", "WhitenedCSE-BERT-base", "SimCSE-BERT-base"),
    ("cpu_demo", "SimCSE++-BERT-base", "SimCSE-BERT-base"),
    ("whitenedcse_table1", "WhitenedCSE-BERT-base", "SimCSE-BERT-base"),
    ("whitenedcse_table3", "Shuffled-Group-whitening", "Group-whitening"),
    ("whitenedcse_table3", "Group-whitening", "None (unsup. SimCSE)"),
    ("whitenedcse_table3", "None (unsup. SimCSE)", "ZCA-whitening"),
    ("whitenedcse_table3", "ZCA-whitening", "PCA-whitening"),
    ("whitenedcse_table5", "STS-Avg. [num_positives=3]", "STS-Avg. [num_positives=2]"),
    ("simcsepp_table1", "Neg. -Noise", "SimCSE"),
    ("simcsepp_table1", "SimCSE", "Pos. +Noise"),
    ("simcsepp_table1", "Pos. +Noise", "Pos. -Noise"),
    ("simcsepp_table2", "SimCSE-BERT-base", "+BarlowTwins (D=768)"),
    ("simcsepp_table2", "+704 artificial z", "+300 artificial z"),
    ("simcsepp_table3", "SimCSE++-BERT-base", "SimCSE-BERT-base"),
    ("simcsepp_table3", "+Off-Info", "SimCSE-BERT-base"),
    ("simcsepp_table3", "+DCL", "SimCSE-BERT-base"),
    ("simcsepp_table3", "SimCSE++-SBERT-base", "SimCSE-SBERT-base"),
    ("simcsepp_table4", "+DCL (NLI, tau_DCL = 0.05)", "+whitening (NLI)"),
    ("simcsepp_table5", "STS-B dev [m=0.9]", "STS-B dev [m=1.1]"),
    ("simcsepp_table5", "STS-B dev [lambda_dcl=0.1]", "STS-B dev [lambda_dcl=0.02]"),
    ("simcsepp_table5", "STS-B dev [tau_dcl=5]", "STS-B dev [tau_dcl=50]"),
}


def test_the_papers_claims_are_declared() -> None:
    declared = {(c.spec, c.better, c.worse) for s in load_table_specs() for c in s.claims}
    assert declared >= EXPECTED
    table4 = {(c.better, c.worse) for c in load_table_spec(Path("tables/whitenedcse_table4.toml")).claims}
    assert len(table4) == 8  # shuffled beats unshuffled at each of the 8 group counts


def test_every_paper_delta_equals_paper_tables(paper: dict[str, list[dict[str, Any]]]) -> None:
    checked = sum(check_claim_deltas(spec, paper) for spec in load_table_specs())
    assert checked >= 50
