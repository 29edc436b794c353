"""Rules about the repository that tests can enforce: registries, docs and tests agree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from methods import REGISTRY
from tests.helpers import REPO_ROOT, threshold_between
from tests.paper_tables import PAPER_TABLES, SHARED_PAPER_TABLES


def test_no_test_skips_because_an_in_repo_module_failed_to_import() -> None:
    # importorskip of our own code would hide a broken module as a skipped test.
    offenders = []
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"importorskip\(\s*['\"](\w+)", text):
            if match.group(1) in ("harness", "methods", "benchmarks"):
                offenders.append(f"{path.relative_to(REPO_ROOT)}: importorskip({match.group(1)}...)")
    assert not offenders, offenders


def test_the_quoted_numbers_are_the_teams_where_its_copy_is_beside_the_checkout() -> None:
    """The spec tests read the repository's copy of the papers' numbers, so they never skip; where
    the team's shared copy is beside the checkout the two are the same file, byte for byte."""
    assert PAPER_TABLES.is_file()
    if SHARED_PAPER_TABLES.is_file():
        assert PAPER_TABLES.read_bytes() == SHARED_PAPER_TABLES.read_bytes()


def test_readme_methods_table_lists_exactly_the_registry() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Methods", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    assert documented == set(REGISTRY)


def test_contributing_names_the_files_a_new_method_and_table_touch() -> None:
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    method_part = text.split("## Adding a method", 1)[1].split("\n## ", 1)[0]
    table_part = text.split("## Adding a table", 1)[1].split("\n## ", 1)[0]
    items = [line for line in method_part.splitlines() if re.match(r"^\d\. `", line)]
    named = {re.match(r"^\d\. `([^`]+)`", line).group(1) for line in items}  # type: ignore[union-attr]
    assert named == {"methods/<name>.py", "methods/__init__.py", "README.md", "tests/methods/test_<name>.py"}
    assert "harness/run/training.py" not in named  # the loop never changes for a new method
    tables = {m.group(1) for m in re.finditer(r"^\d\. `([^`]+)`", table_part, flags=re.MULTILINE)}
    assert tables == {"tables/<paper>_<table>.toml"}
    assert "`tables/PAPER_TABLES.md`" in table_part  # and the quoted numbers, for a new source
    quotes = (REPO_ROOT / "tables" / "PAPER_TABLES.md").resolve()
    assert quotes == PAPER_TABLES.resolve()  # the file the spec tests read
    # every file the method checklist names exists (placeholders aside)
    for name in named:
        if "<" not in name:
            assert (REPO_ROOT / name).exists(), name


# -- tests mirror the source tree --------------------------------------------------------------------
NO_TEST_MODULE = {
    "harness/__init__.py": "the version and the lazy harness.results (tests/test_results.py reads it so)",
    "harness/commands/__init__.py": "an empty package",
    "harness/config/__init__.py": "a package docstring",
    "harness/encoder/__init__.py": "a package docstring",
    "harness/evaluation/__init__.py": "a package docstring",
    "harness/grid/__init__.py": "a package docstring",
    "harness/grid/plan/__init__.py": "a package docstring",
    "harness/grid/preflight/__init__.py": "a package docstring",
    "harness/grid/progress/__init__.py": "a package docstring",
    "harness/grid/tune/__init__.py": "Ray's quiet environment, set on import (tests/grid/tune/ import it)",
    "harness/jobs/__init__.py": "a package docstring",
    "harness/postprocess/__init__.py": "a package docstring",
    "harness/stats/__init__.py": "a package docstring",
    "harness/reporting/__init__.py": "re-exports of the table reporter (tests/reporting/tables/)",
    "harness/reporting/tables/__init__.py": "a package docstring",
    "harness/run/__init__.py": "a package docstring",
    "harness/specs/__init__.py": "a package docstring",
    "harness/store/__init__.py": "a package docstring",
    "methods/__init__.py": "the method registry: tests/methods/test_registry.py",
    "harness/config/choices.py": "the choices' Literal types (tests/config/test_settings.py)",
    "harness/evaluation/embed.py": "the EmbedFn and LengthsFn types every evaluator takes",
    "harness/encoder/calls.py": "a method's encoder call, types only (tests/encoder/test_training_encode.py)",
    "harness/evaluation/reference.py": "SentEval's STS numbers (tests/evaluation/test_sts.py checks them)",
}
"""The source modules without a test module of their own, and why: package markers, and modules that
only hold types or constants, covered through other modules' tests."""


def mirrored_test(source: str) -> str:
    """The test module of a source module: ``harness/<pkg...>/<mod>.py`` -> ``tests/<pkg...>/test_<mod>.py``,
    ``methods/<mod>.py`` -> ``tests/methods/test_<mod>.py``."""
    parts = Path(source).parts
    if parts[0] == "harness":
        parts = parts[1:]
    return Path("tests", *parts[:-1], f"test_{Path(parts[-1]).stem}.py").as_posix()


def untested(sources: list[str], root: Path = REPO_ROOT) -> list[str]:
    """The source modules (paths from ``root``) neither listed in :data:`NO_TEST_MODULE` nor tested
    at :func:`mirrored_test`'s path, each named with the path its tests belong at."""
    return [
        f"{source} (its tests go in {mirrored_test(source)})"
        for source in sources
        if source not in NO_TEST_MODULE and not (root / mirrored_test(source)).is_file()
    ]


def _sources() -> list[str]:
    found = [*REPO_ROOT.glob("harness/**/*.py"), *REPO_ROOT.glob("methods/**/*.py")]
    return sorted(p.relative_to(REPO_ROOT).as_posix() for p in found)


def test_every_source_module_has_its_test_module_at_the_mirrored_path() -> None:
    assert untested(_sources()) == [], "add the test module, or (rarely) an entry to NO_TEST_MODULE"


def test_the_modules_without_a_test_module_are_still_there_and_still_without_one() -> None:
    sources = set(_sources())
    assert sorted(set(NO_TEST_MODULE) - sources) == [], "listed in NO_TEST_MODULE but gone"
    tested = [source for source in NO_TEST_MODULE if (REPO_ROOT / mirrored_test(source)).is_file()]
    assert tested == [], "these have a test module now: take them off NO_TEST_MODULE"


def test_the_mirror_rule_finds_a_module_without_its_tests(tmp_path: Path) -> None:
    """The rule's helpers find what they look for (a test that cannot fail is no test)."""
    assert mirrored_test("harness/grid/tune/driver.py") == "tests/grid/tune/test_driver.py"
    assert mirrored_test("harness/cli.py") == "tests/test_cli.py"
    assert mirrored_test("harness/commands/grid_cmd.py") == "tests/commands/test_grid_cmd.py"
    assert mirrored_test("methods/simcse.py") == "tests/methods/test_simcse.py"
    (tmp_path / "tests" / "grid" / "plan").mkdir(parents=True)
    (tmp_path / "tests" / "grid" / "plan" / "test_status.py").write_text("")
    sources = [
        "harness/grid/plan/status.py",
        "harness/grid/new_part.py",
        "harness/__init__.py",
        "methods/newcse.py",
    ]
    assert untested(sources, tmp_path) == [
        "harness/grid/new_part.py (its tests go in tests/grid/test_new_part.py)",
        "methods/newcse.py (its tests go in tests/methods/test_newcse.py)",
    ]


MODULE_LINES_MAX = 450
"""The most lines a source module may have (CONTRIBUTING.md): beyond it, split it by job."""


def too_long(sources: list[str], root: Path = REPO_ROOT) -> list[str]:
    """The source modules (paths from ``root``) over :data:`MODULE_LINES_MAX` lines, with their count."""
    counts = {source: len((root / source).read_text(encoding="utf-8").splitlines()) for source in sources}
    return [f"{source}: {n} lines" for source, n in counts.items() if n > MODULE_LINES_MAX]


def test_no_source_module_is_over_the_line_limit(tmp_path: Path) -> None:
    assert too_long(_sources()) == [], f"split these by job (at most {MODULE_LINES_MAX} lines a module)"
    (tmp_path / "long.py").write_text("x = 1\n" * (MODULE_LINES_MAX + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MODULE_LINES_MAX)
    assert too_long(["long.py", "short.py"], tmp_path) == [f"long.py: {MODULE_LINES_MAX + 1} lines"]


def test_every_test_folder_is_a_package() -> None:
    """tests/ is a package tree (modules ``tests.<folder>.test_<module>``), so that the test modules of
    two source modules of one name (tests/encoder/test_model.py, tests/specs/test_model.py) import
    side by side."""
    tests = REPO_ROOT / "tests"
    folders = {folder for path in tests.rglob("test_*.py") for folder in path.relative_to(tests).parents}
    missing = sorted(str(tests / f) for f in folders if not (tests / f / "__init__.py").is_file())
    assert missing == []


# -- tests that hold on every processor --------------------------------------------------------------
DATA_THRESHOLD = re.compile(
    r"\.(?:median|nanmedian|quantile|nanquantile|kthvalue)\("
    r"|\bnp\.(?:median|nanmedian|percentile|nanpercentile|quantile|nanquantile)\("
    r"|\bstatistics\.median"
)
"""Calls that return one of the data's own values (or an interpolation between two): a threshold set
there puts a value on the boundary, where the processor's rounding decides its side."""


def data_thresholds(root: Path) -> list[str]:
    """Every line of the test modules under ``root`` that takes a median or quantile of data, except
    in ``tests/helpers.py``, whose ``threshold_between`` puts a threshold in a gap between values."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "helpers.py" and path.parent.name == "tests":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if DATA_THRESHOLD.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(root).as_posix()}:{number}: {line.strip()}")
    return found


def test_no_test_sets_a_threshold_at_a_data_value() -> None:
    """docs/correctness.md "Tests on every processor": a data-derived threshold goes through
    ``tests.helpers.threshold_between``."""
    assert data_thresholds(REPO_ROOT / "tests") == []


def test_the_threshold_rule_finds_medians_and_quantiles(tmp_path: Path) -> None:
    lines = [  # written apart so that this file does not trip the rule itself
        "phi = float(sims." + "median())",
        "q = x." + "quantile(0.3)",
        "m = np." + "percentile(a, 50)  # ok?",
        "# sims." + "median() in a comment",
        "y = median_of(x)",
    ]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("\n".join(lines) + "\n")
    (tmp_path / "tests" / "helpers.py").write_text("v = x." + "median()\n")
    found = [f"tests/test_a.py:{i + 1}: {line}" for i, line in enumerate(lines[:3])]
    assert data_thresholds(tmp_path) == found


def test_threshold_between_keeps_every_value_away_from_the_boundary() -> None:
    values = torch.tensor([0.1, 0.2, 0.2, 0.3, 0.35, 0.5, 0.52, 0.9, 0.9, 0.91], dtype=torch.float64)
    phi = threshold_between(values)  # splits leaving 3 to 7 of the 10 below: the widest is 0.52 | 0.9
    assert phi == pytest.approx((0.52 + 0.9) / 2)
    assert float((values - phi).abs().min()) > 1e-6
    assert threshold_between(values, quantile=0.3) == pytest.approx((0.35 + 0.5) / 2)  # 0.52 | 0.9 leaves 7
    with pytest.raises(ValueError, match="no split"):
        threshold_between(torch.tensor([0.4]))
    with pytest.raises(ValueError, match="widest gap"):
        threshold_between(torch.tensor([0.4, 0.4 + 1e-9, 0.4 + 2e-9, 0.4 + 3e-9], dtype=torch.float64))


# -- the four-file promise of CONTRIBUTING.md, proved on a copy of the repository ---------------------
FOUR_FILE_TESTS = [
    "tests/methods/test_registry.py",
    "tests/methods/test_base.py",
    "tests/methods/test_params.py",
    "tests/run/test_footprint.py",
    "tests/methods/test_momentum_queue.py",
    "tests/system/test_cpu_runs.py",
    "tests/system/test_repository_rules.py",
]
"""The tests that read the registry (and the new method's own test), run on the copy."""
REGISTRY_DERIVED = [
    "test_registered_method_is_documented",  # the registry tests
    "test_unknown_key_is_rejected_with_a_suggestion",  # typed parameters
    "test_the_footprint_counts_what_a_step_encodes",  # rows with and without gradient, measured
    "test_the_footprint_counts_the_copies_bind_holds",  # whole encoder copies, for the memory estimate
    "test_the_footprint_counts_the_parameters_the_method_builds",  # heads and projectors, for the same
    "test_tiny_run",  # a CPU run through the training loop
    "test_cost_and_memory_count_rows_with_and_without_gradient",  # the grid's estimates
]
"""Registry-derived tests that must have run on the new method."""
COPIED = ["harness", "methods", "tests", "tables", "plots", "pyproject.toml", "README.md", "CONTRIBUTING.md"]


def _add_the_momentum_method(repo: Path) -> list[str]:
    """Add the test-only momentum method to ``repo`` by the files CONTRIBUTING.md lists; return them."""
    source = (REPO_ROOT / "tests" / "methods" / "momentum_method.py").read_text(encoding="utf-8")
    (repo / "methods" / "momentum_queue.py").write_text(source, encoding="utf-8")

    init = repo / "methods" / "__init__.py"
    text = init.read_text(encoding="utf-8")
    text = text.replace(
        "from methods.probes import",
        "from methods.momentum_queue import MomentumQueue\nfrom methods.probes import",
    )
    text = text.replace('    "noise_probe":', '    "momentum_queue": MomentumQueue,\n    "noise_probe":')
    assert text.count("MomentumQueue") == 2, "methods/__init__.py: the import and the registry line"
    init.write_text(text, encoding="utf-8")

    test = (REPO_ROOT / "tests" / "methods" / "test_stateful_method.py").read_text(encoding="utf-8")
    test = test.replace("from tests.methods.momentum_method import", "from methods.momentum_queue import")
    (repo / "tests" / "methods" / "test_momentum_queue.py").write_text(test, encoding="utf-8")

    readme = repo / "README.md"
    lines = readme.read_text(encoding="utf-8").split("\n")
    start = lines.index("## Methods")
    end = next(i for i in range(start + 1, len(lines) + 1) if i == len(lines) or lines[i].startswith("## "))
    last = max(i for i in range(start, end) if re.match(r"^\| `[a-z_]+` \|", lines[i]))
    lines.insert(
        last + 1,
        "| `momentum_queue` | a momentum key encoder and a negative queue | `momentum`, `queue_size` |",
    )
    readme.write_text("\n".join(lines), encoding="utf-8")
    return [
        "methods/momentum_queue.py",
        "methods/__init__.py",
        "tests/methods/test_momentum_queue.py",
        "README.md",
    ]


def test_a_stateful_method_is_added_by_the_four_files_contributing_lists(
    tmp_path: Path, data_root: Path
) -> None:
    """A copy of the repository gains the test-only momentum method (a frozen key encoder encoded
    through the run's pooler and buckets, a queue, rows without gradient: measured, not declared)
    through exactly the four
    files of CONTRIBUTING.md's "Adding a method", and every registry-derived test passes on it there:
    no test, loop, cost or memory code names the methods."""
    repo = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__", ".*_cache")
    for name in COPIED:  # the code, the tests and what they read (no data, runs or environments)
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, repo / name, ignore=skip, symlinks=True)
        else:
            shutil.copy2(REPO_ROOT / name, repo / name)
    touched = _add_the_momentum_method(repo)
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    method_part = text.split("## Adding a method", 1)[1].split("\n## ", 1)[0]
    listed = {m.group(1) for m in re.finditer(r"^\d\. `([^`]+)`", method_part, flags=re.MULTILINE)}
    assert {t.replace("momentum_queue", "<name>") for t in touched} == listed

    env = {**os.environ, "PYTHONPATH": str(repo), "HARNESS_DATA": str(data_root)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            *FOUR_FILE_TESTS,
            "-k",
            "not four_files",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = [line for line in result.stdout.splitlines() if "momentum_queue" in line and "PASSED" in line]
    for name in REGISTRY_DERIVED:
        assert any(f"::{name}[" in line for line in passed), f"{name} did not run on the new method"
    assert any("test_momentum_queue.py::" in line and "PASSED" in line for line in result.stdout.splitlines())
