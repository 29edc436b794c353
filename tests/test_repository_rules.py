"""Rules about the repository that tests can enforce: registries, docs and tests agree."""

from __future__ import annotations

import re
from pathlib import Path

from methods import REGISTRY

ROOT = Path(__file__).resolve().parents[1]


def test_no_test_skips_because_an_in_repo_module_failed_to_import() -> None:
    # importorskip of our own code would hide a broken module as a skipped test.
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"importorskip\(\s*['\"](\w+)", text):
            if match.group(1) in ("harness", "methods", "benchmarks"):
                offenders.append(f"{path.relative_to(ROOT)}: importorskip({match.group(1)}...)")
    assert not offenders, offenders


def test_readme_methods_table_lists_exactly_the_registry() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Methods", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    assert documented == set(REGISTRY)


def test_contributing_names_the_files_a_new_method_and_table_touch() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    method_part = text.split("## Adding a method", 1)[1].split("\n## ", 1)[0]
    table_part = text.split("## Adding a table", 1)[1].split("\n## ", 1)[0]
    items = [line for line in method_part.splitlines() if re.match(r"^\d\. `", line)]
    named = {re.match(r"^\d\. `([^`]+)`", line).group(1) for line in items}  # type: ignore[union-attr]
    assert named == {"methods/<name>.py", "methods/__init__.py", "README.md", "tests/methods/test_<name>.py"}
    assert "harness/train.py" not in named  # the loop never changes for a new method
    assert "tables/<paper>_<table>.toml" in table_part
    # every file the method checklist names exists (placeholders aside)
    for name in named:
        if "<" not in name:
            assert (ROOT / name).exists(), name
