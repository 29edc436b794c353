"""The package installs anywhere: the wheel holds every package and the specs, and a fresh virtual
environment outside the checkout runs ``harness methods`` and ``harness grid all --dry-run``."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT


def _pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_of_the_tree_is_listed_for_the_wheel() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(REPO_ROOT).parts)
        for top in ("harness", "methods")
        for p in (REPO_ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= listed, sorted(on_disk - listed)
    shipped = {name for name in listed if name.startswith("harness.specs.shipped.")}
    assert listed - on_disk == shipped  # nothing listed that does not exist


def test_the_python_it_says_it_needs_is_the_python_it_uses() -> None:
    """``tomllib`` and ``BaseException.add_note`` (both used) arrived in 3.11."""
    config = _pyproject()
    assert config["project"]["requires-python"] == ">=3.11"
    assert config["tool"]["ruff"]["target-version"] == "py311"
    assert config["tool"]["mypy"]["python_version"] == "3.11"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(REPO_ROOT),
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (found,) = out.glob("cse_harness-*.whl")
    return found


def test_the_wheel_ships_the_specs_and_the_quoted_numbers(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for spec in (REPO_ROOT / "tables").glob("*.toml"):
        assert f"harness/specs/shipped/tables/{spec.name}" in names
    for spec in (REPO_ROOT / "plots").glob("*.toml"):
        assert f"harness/specs/shipped/plots/{spec.name}" in names
    assert "harness/specs/shipped/tables/PAPER_TABLES.md" in names
    assert "harness/grid/tune/driver.py" in names and "methods/simcse.py" in names
    assert "harness/run/footprints.json" in names and "harness/config/senteval_sha256.json" in names


def test_an_install_outside_the_checkout_lists_the_methods_and_plans_every_table(
    wheel: Path, tmp_path: Path, data_root: Path
) -> None:
    """A clean environment (no site packages of its own but the dependencies', made visible by path,
    so nothing of the checkout is importable) with the wheel installed runs from another folder."""
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    target = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # the dependencies (torch, transformers, ray, ...) from this interpreter's site folder, added as
    # a plain path: its .pth files (the checkout's editable install among them) are not read
    dependencies = sysconfig.get_paths()["purelib"]
    (target / "dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_SPECS")}
    env["HARNESS_DATA"] = str(data_root)

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.run(
            [str(python), "-c", code, *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )

    where = subprocess.run(
        [str(python), "-c", "import harness, methods; print(harness.__file__); print(methods.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(REPO_ROOT) not in where and str(target) in where
    listed = harness("methods")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "simcse" in listed.stdout and "whitenedcse" in listed.stdout
    planned = harness("grid", "all", "--dry-run", "--runs-dir", str(tmp_path / "runs"))
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "all (distinct runs)" in planned.stdout and "whitenedcse_table1" in planned.stdout
