"""Reading a spec: every error names the file and the key; claims and aggregates are checked when
the spec loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.reporting.tables.model import RenderedTable
from harness.specs.parse import load_table_spec
from tests.helpers import SPECS, spec_text, write_spec


@pytest.mark.parametrize(
    ("where", "line"),
    [
        ("rows[0].params", "params = {temperature = inf}"),
        ("rows[0].params", "params = {positive_weights = [1.0, nan]}"),
    ],
)
def test_a_non_finite_spec_value_fails_when_the_spec_loads(tmp_path: Path, where: str, line: str) -> None:
    method = "whitenedcse" if "positive" in line else "simcse"
    body = f'[[rows]]\nlabel = "a"\nmethod = "{method}"\n{line}\npaper = [1.0]\n'
    path = write_spec(tmp_path / "bad.toml", spec_text(body))
    with pytest.raises(ConfigError, match=re.escape(where) + r": \w+ must be finite, got (inf|nan)"):
        load_table_spec(path)


def test_spec_sts_aggregate_key(tmp_path: Path, rendered: list[RenderedTable]) -> None:
    from harness.errors import ConfigError

    text = (SPECS / "report_rows.toml").read_text(encoding="utf-8")
    for value, ok in (('"wmean"', True), ('"median"', False)):
        path = write_spec(tmp_path / "agg.toml", f"sts_aggregate = {value}\n" + text)
        if ok:
            assert load_table_spec(path).sts_aggregate == "wmean"
        else:
            with pytest.raises(ConfigError, match=r"sts_aggregate.*median"):
                load_table_spec(path)
    assert load_table_spec(SPECS / "report_rows.toml").sts_aggregate == "all"
    assert any("'all' aggregate" in n for n in rendered[0].notes)


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ('better = "Group-whitening"\nworse = "Nope"', "'Nope' is not a run cell"),
        ('better = "Group-whitening"', "missing required key"),
        ('order = ["Group-whitening"]', "at least two cells"),
        ('best = "Group-whitening"', "not a sweep cell"),
        ('better = "Group-whitening"\nworse = "PCA-whitening"\ncolumn = "STS12"', "not a column"),
        ('better = "Group-whitening"\nworse = "PCA-whitening"\norder = ["a", "b"]', "exactly one of"),
        ('betterr = "Group-whitening"', "unknown key 'betterr'"),
    ],
)
def test_bad_claims_name_the_problem(tmp_path: Path, claims: str, message: str) -> None:
    spec = Path("tables/whitenedcse_table3.toml").read_text(encoding="utf-8").split("[[claims]]")[0]
    path = write_spec(tmp_path / "t.toml", spec + "\n[[claims]]\n" + claims + "\n")
    with pytest.raises(ConfigError, match=message):
        load_table_spec(path)


def test_a_claim_on_a_quoted_row_is_refused(tmp_path: Path) -> None:
    text = Path("tables/simcsepp_table3.toml").read_text(encoding="utf-8").split("[[claims]]")[0]
    path = write_spec(
        tmp_path / "t.toml", text + '\n[[claims]]\nbetter = "SimCSE-BERT-base"\nworse = "GloVe (avg.)"\n'
    )
    with pytest.raises(ConfigError, match=r"'GloVe \(avg.\)' is a quoted row"):
        load_table_spec(path)


BASE = spec_text("", cites="WhitenedCSE Table 3", title="t")


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("colums = []\n[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]", "colums", "unknown key 'colums'"),
        ("[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]\nsection=1", "rows[0].section", "expected str"),
        ("[[rows]]\nlabel='a'\nmethod='simcsx'\npaper=[1.0]", "rows[0].params", "unknown method 'simcsx'"),
        ("[[rows]]\nlabel='a'\nmethod='simcse'\nparams={temp=0.1}\npaper=[1.0]", "rows[0].params", "temp"),
        (
            "[[rows]]\nlabel='a'\nmethod='simcse'\nparams={temperature=-1}\npaper=[1.0]",
            "rows[0].params",
            "from 0.001 to 1000",
        ),
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
        (
            "[[rows]]\nlabel='a'\nquoted=true\npaper=[1e308]",
            "rows[0].paper[0]",
            "1e+308 is outside -100 .. 100, the range of sts scores",
        ),
        (
            "[[sweeps]]\nlabel='a'\nheader='h'\nmethod='simcse'\nvary='temperature'\nvalues=[0.1]\npaper=[-100.5]",
            "sweeps[0].paper[0]",
            "-100.5 is outside -100 .. 100",
        ),
    ],
)
def test_spec_errors_name_file_and_key(tmp_path: Path, body: str, where: str, message: str) -> None:
    path = write_spec(tmp_path / "bad.toml", BASE + body + "\n")
    with pytest.raises(ConfigError) as info:
        load_table_spec(path)
    text = str(info.value)
    assert str(path) in text and where in text and message in text, text


def test_a_papers_numbers_lie_on_the_scale_of_the_score_set(tmp_path: Path) -> None:
    # an accuracy is 0 .. 100: -5 is no transfer score (a correlation x 100 may be)
    transfer = BASE.replace('"sts"', '"transfer"').replace('["avg"]', '["MR", "avg"]')
    path = write_spec(
        tmp_path / "bad.toml", transfer + "[[rows]]\nlabel='a'\nquoted=true\npaper=[1e308, -5]\n"
    )
    with pytest.raises(
        ConfigError, match=r"rows\[0\]\.paper\[0\]: 1e\+308 is outside 0 \.\. 100, the range of"
    ):
        load_table_spec(path)
    write_spec(path, transfer + "[[rows]]\nlabel='a'\nquoted=true\npaper=[100, -5]\n")
    with pytest.raises(
        ConfigError, match=r"rows\[0\]\.paper\[1\]: -5 is outside 0 \.\. 100, the range of transfer"
    ):
        load_table_spec(path)
    write_spec(path, transfer + "[[rows]]\nlabel='a'\nquoted=true\npaper=[0, 100]\n")
    assert load_table_spec(path).rows[0].paper == (0.0, 100.0)
    write_spec(path, BASE + "[[rows]]\nlabel='a'\nquoted=true\npaper=[-100]\n")
    assert load_table_spec(path).rows[0].paper == (-100.0,)


def test_bad_column_and_score_set(tmp_path: Path) -> None:
    path = write_spec(
        tmp_path / "bad.toml",
        BASE.replace('["avg"]', '["MR"]') + "[[rows]]\nlabel='a'\nquoted=true\npaper=[1.0]\n",
    )
    with pytest.raises(ConfigError, match="unknown column 'MR'"):
        load_table_spec(path)
    write_spec(path, "not toml = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_table_spec(path)
