"""Table and plot specs: they load, cite the papers' tables, and quote PAPER_TABLES.md exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from paper_tables import PAPER_TABLES, number, paper_rows, parse_paper_tables

from harness.errors import ConfigError
from harness.specs import (
    PLOTS_DIR,
    TABLES_DIR,
    format_value,
    load_plot_specs,
    load_table_spec,
    load_table_specs,
    table_spec_paths,
)
from methods import build_params

CITED = [f"WhitenedCSE Table {i}" for i in range(1, 7)] + [f"SimCSE++ Table {i}" for i in range(1, 6)]
"""Every paper table the harness reproduces (SimCSE++ Table 6, a training time, is not a spec)."""


@pytest.fixture(scope="module")
def paper() -> dict[str, list[dict[str, Any]]]:
    if not PAPER_TABLES.is_file():
        pytest.skip(f"{PAPER_TABLES} not present")
    return parse_paper_tables(PAPER_TABLES.read_text(encoding="utf-8"))


def test_every_spec_loads() -> None:
    specs = load_table_specs()
    assert {s.name for s in specs} >= {"cpu_demo"}
    assert len(load_plot_specs()) == 2


def test_every_paper_table_has_a_spec_and_every_spec_cites_one(paper: dict[str, Any]) -> None:
    specs = load_table_specs()
    cited = {s.cites for s in specs}
    for table in CITED:
        assert table in paper, f"{table} missing from PAPER_TABLES.md"
        assert any(s.cites == table and s.name != "cpu_demo" for s in specs), f"no spec cites {table}"
    for spec in specs:
        assert spec.cites in paper, f"{spec.path}: cites unknown table {spec.cites!r}"
        for row in spec.rows:
            assert row.cites in paper, f"{spec.path}: row {row.label!r} cites unknown {row.cites!r}"
    assert cited <= set(paper)


@pytest.mark.parametrize("path", table_spec_paths(), ids=lambda p: p.stem)
def test_paper_numbers_equal_paper_tables(path: Path, paper: dict[str, Any]) -> None:
    spec = load_table_spec(path)
    for row in spec.rows:
        rows = paper_rows(paper[row.cites])
        assert row.label in rows, f"{path.name}: {row.label!r} is not a row of {row.cites}"
        header, numbers = rows[row.label]
        assert list(spec.column_labels) == header or len(spec.columns) == 1 or spec.name == "cpu_demo"
        if spec.name == "cpu_demo":
            continue
        assert list(row.paper) == numbers, f"{path.name}: {row.label}"
        assert row.ours == any(c[0] == f"* {row.label}" for t in paper[row.cites] for c in t["rows"]), (
            f"{path.name}: {row.label}: ours mark differs from the paper's *"
        )
    for sweep in spec.sweeps:
        matches = [t for t in paper[spec.cites] if t["header"][0] == sweep.header]
        assert matches, f"{path.name}: no table headed {sweep.header!r} in {spec.cites}"
        table = matches[0]
        assert [float(v) for v in sweep.values] == [number(h) for h in table["header"][1:]]
        assert sweep.label in [r[0] for r in table["rows"]]
        row = next(r for r in table["rows"] if r[0] == sweep.label)
        assert list(sweep.paper) == [number(c) for c in row[1:]], f"{path.name}: {sweep.label}"
    if spec.name != "cpu_demo":
        # every row of the paper's table appears in the spec, in the paper's order
        labels = [r.label for r in spec.rows] or [s.label for s in spec.sweeps]
        paper_labels = [
            c[0][2:] if c[0].startswith("* ") else c[0] for t in paper[spec.cites] for c in t["rows"]
        ]
        assert labels == paper_labels


def test_cpu_demo_numbers_match_the_cited_rows(paper: dict[str, Any]) -> None:
    spec = load_table_spec(TABLES_DIR / "cpu_demo.toml")
    for row in spec.rows:
        assert list(row.paper) == paper_rows(paper[row.cites])[row.label][1]


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
    assert table_spec_paths([str(TABLES_DIR / "simcsepp_table5.toml")])[0].name == "simcsepp_table5.toml"
    with pytest.raises(ConfigError, match="did you mean 'whitenedcse_table3'"):
        table_spec_paths(["whitenedcse_tabel3"])
    assert PLOTS_DIR.is_dir()
