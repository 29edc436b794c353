"""Table and plot specs: they load, cite the papers' tables, and quote PAPER_TABLES.md exactly."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from paper_tables import PAPER_TABLES, parse_paper_tables
from spec_checks import (
    check_cites,
    check_claim_deltas,
    check_paper_numbers,
    check_reproduced_or_excerpt,
    check_spec,
    reproduces,
)

from harness.errors import ConfigError
from harness.specs.find import load_plot_specs, load_table_specs, plots_dir, table_spec_paths, tables_dir
from harness.specs.model import format_value
from harness.specs.parse import load_table_spec
from methods import build_params

REPO_ROOT = Path(__file__).resolve().parents[1]
CITED = [f"WhitenedCSE Table {i}" for i in range(1, 7)] + [f"SimCSE++ Table {i}" for i in range(1, 6)]
"""Every paper table the harness reproduces (SimCSE++ Table 6, a training time, is not a spec)."""


@pytest.fixture(scope="module")
def paper() -> dict[str, list[dict[str, Any]]]:
    assert PAPER_TABLES.is_file(), f"{PAPER_TABLES} is part of the repository"
    return parse_paper_tables(PAPER_TABLES.read_text(encoding="utf-8"))


def test_every_spec_loads() -> None:
    specs = load_table_specs()
    assert {s.name for s in specs} == {p.stem for p in table_spec_paths()}
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    started = set(re.findall(r"harness grid (\w+)", makefile))
    assert started and started <= {s.name for s in specs}  # the specs `make run` starts
    assert len(load_plot_specs()) == 2


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

NEW_SPEC = """
cites = "Foo Table 1"
title = "FooCSE against SimCSE"
scores = "sts"
columns = ["STSBenchmark", "SICKRelatedness", "avg"]

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
"""


def test_a_spec_of_a_new_source_needs_its_file_and_its_quoted_numbers(tmp_path: Path) -> None:
    """A new source = its section of quoted numbers (here a PAPER_TABLES-like file of its own) and its
    TOML spec: every spec check passes with nothing else changed, and a wrong number still fails."""
    quotes = tmp_path / "PAPER_TABLES.md"
    quotes.write_text(NEW_SOURCE, encoding="utf-8")
    paper = parse_paper_tables(quotes.read_text(encoding="utf-8"))
    (tmp_path / "tables").mkdir()
    path = tmp_path / "tables" / "foo_table1.toml"
    path.write_text(NEW_SPEC, encoding="utf-8")
    spec = load_table_spec(path)
    specs = [*load_table_specs(), spec]
    if PAPER_TABLES.is_file():
        paper = {**parse_paper_tables(PAPER_TABLES.read_text(encoding="utf-8")), **paper}
    check_spec(spec, specs, paper)
    assert check_claim_deltas(spec, paper) == 1
    assert load_table_specs(directory=tmp_path / "tables")[0].name == "foo_table1"  # found by the commands
    # an excerpt of the new table (the demo's kind of spec) passes while a spec reproduces the table
    excerpt_path = tmp_path / "tables" / "foo_demo.toml"
    excerpt_path.write_text(NEW_SPEC.split("[[rows]]", 2)[0] + "[[rows]]" + NEW_SPEC.split("[[rows]]", 2)[2])
    excerpt = load_table_spec(excerpt_path)
    check_spec(excerpt, [*specs, excerpt], paper)
    with pytest.raises(AssertionError, match="no spec reproduces Foo Table 1"):
        check_spec(excerpt, [s for s in specs if s is not spec], paper)
    # a misquoted number fails
    path.write_text(NEW_SPEC.replace("78.10", "78.01"), encoding="utf-8")
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


def test_format_value() -> None:
    assert [format_value(v) for v in (1.0, 0.02, 384, True, "sgw")] == ["1", "0.02", "384", "true", "sgw"]


BASE = """
cites = "WhitenedCSE Table 3"
title = "t"
scores = "sts"
columns = ["avg"]
"""


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("colums = []\n[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]", "colums", "unknown key 'colums'"),
        ("[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]\nsection=1", "rows[0].section", "expected str"),
        ("[[rows]]\nlabel='a'\nmethod='simcsx'\npaper=[1.0]", "rows[0].params", "unknown method 'simcsx'"),
        ("[[rows]]\nlabel='a'\nmethod='simcse'\nparams={temp=0.1}\npaper=[1.0]", "rows[0].params", "temp"),
        ("[[rows]]\nlabel='a'\nmethod='simcse'\nparams={temperature=-1}\npaper=[1.0]", "rows[0].params", ">"),
        (
            "[[rows]]\nlabel='a'\nmethod='simcse'\noverrides={max_step=0}\npaper=[1.0]",
            "max_step",
            "max_steps",
        ),
        ("[[rows]]\nlabel='a'\nmethod='simcse'\noverrides={seed=1}\npaper=[1.0]", "seed", "override"),
        ("[[rows]]\nlabel='a'\nmethod='simcse'\npaper=[1.0, 2.0]", "rows[0].paper", "expected 1 numbers"),
        ("[[rows]]\nlabel='a'\nquoted=true\nmethod='simcse'\npaper=[1.0]", "rows[0].method", "quoted"),
        ("[[rows]]\nlabel='a'\npaper=[1.0]", "rows[0].method", "quoted = true"),
        ("[[rows]]\nlabel='a'\nmethod='simcse'\nonly_profiles=['gpu']\npaper=[1.0]", "only_profiles", "gpu"),
        (
            "[[rows]]\nlabel='a'\nmethod='simcse'\nprofile_overrides={cpu={modle='x'}}\npaper=[1.0]",
            "modle",
            "model",
        ),
        (
            "[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]\n[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]",
            "rows",
            "dup",
        ),
        (
            "[[sweeps]]\nlabel='a'\nheader='h'\nmethod='whitenedcse'\nvary='num_group'\nvalues=[2]\npaper=[1.0]",
            "sweeps[0].values[0]",
            "num_group",
        ),
        ("", "rows", "needs [[rows]]"),
    ],
)
def test_spec_errors_name_file_and_key(tmp_path: Path, body: str, where: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BASE + body + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_table_spec(path)
    text = str(info.value)
    assert str(path) in text and where in text and message in text, text


def test_bad_column_and_score_set(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BASE.replace('["avg"]', '["MR"]') + "[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]\n")
    with pytest.raises(ConfigError, match="unknown column 'MR'"):
        load_table_spec(path)
    path.write_text("not toml = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_table_spec(path)


def test_spec_lookup_by_name_path_and_all() -> None:
    assert [p.stem for p in table_spec_paths(["whitenedcse_table3"])] == ["whitenedcse_table3"]
    assert table_spec_paths(["all"]) == table_spec_paths()
    assert table_spec_paths([str(tables_dir() / "simcsepp_table5.toml")])[0].name == "simcsepp_table5.toml"
    with pytest.raises(ConfigError, match="did you mean 'whitenedcse_table3'"):
        table_spec_paths(["whitenedcse_tabel3"])
    assert plots_dir().is_dir()
