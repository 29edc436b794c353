"""Where specs are found: every shipped spec loads; a spec by name, path or ``all``, with a hint; two
spec files of one name (even in another case) collide, one file named twice is one spec."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.specs.find import load_plot_specs, load_table_specs, plots_dir, table_spec_paths, tables_dir
from tests.helpers import REPO_ROOT, SMOKE_SPEC


def test_every_spec_loads() -> None:
    specs = load_table_specs()
    assert {s.name for s in specs} == {p.stem for p in table_spec_paths()}
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    started = set(re.findall(r"harness grid (\w+)", makefile))
    assert started and started <= {s.name for s in specs}  # the specs `make run` starts
    assert len(load_plot_specs()) == 2


def test_spec_lookup_by_name_path_and_all() -> None:
    assert [p.stem for p in table_spec_paths(["whitenedcse_table3"])] == ["whitenedcse_table3"]
    assert table_spec_paths(["all"]) == table_spec_paths()
    assert table_spec_paths([str(tables_dir() / "simcsepp_table5.toml")])[0].name == "simcsepp_table5.toml"
    with pytest.raises(ConfigError, match="did you mean 'whitenedcse_table3'"):
        table_spec_paths(["whitenedcse_tabel3"])
    assert plots_dir().is_dir()


# -- two spec files of one name ------------------------------------------------------------------------
PLOT = REPO_ROOT / "plots" / "align_uniform_steps.toml"


def test_one_file_named_twice_is_one_spec(tmp_path: Path) -> None:
    assert [s.name for s in load_table_specs([str(SMOKE_SPEC), str(SMOKE_SPEC)])] == ["smoke_grid"]
    assert len(load_plot_specs([str(PLOT), str(PLOT)])) == 1


def test_names_that_differ_only_by_case_collide(tmp_path: Path) -> None:
    lower = tmp_path / "a" / "t.toml"
    upper = tmp_path / "b" / "T.toml"
    for path in (lower, upper):
        path.parent.mkdir()
        shutil.copy(SMOKE_SPEC, path)
    with pytest.raises(ConfigError, match="share the name"):
        load_table_specs([str(lower), str(upper)])
