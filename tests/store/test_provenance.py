"""Where a record comes from: the UTC clock to the second, the code version (git describe, else the
package's), and whether the checkout has uncommitted changes."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from harness.store import provenance
from harness.store.provenance import code_version
from tests.helpers import REPO_ROOT


def test_now_is_utc_to_the_second() -> None:
    text = provenance.now_iso()
    stamp = datetime.fromisoformat(text)
    assert text.endswith("+00:00") and stamp.microsecond == 0
    assert abs(datetime.now(UTC) - stamp) < timedelta(seconds=5)


def test_the_code_version_is_git_describe_else_the_package_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance, "_CODE_VERSION", None)
    monkeypatch.setattr(provenance, "git_output", lambda *args: "v0.1-3-gabcdef012345-dirty\n")
    assert provenance.code_version() == "git:v0.1-3-gabcdef012345-dirty"
    monkeypatch.setattr(provenance, "git_output", lambda *args: "no longer asked")
    assert provenance.code_version() == "git:v0.1-3-gabcdef012345-dirty"  # found once per process
    monkeypatch.setattr(provenance, "_CODE_VERSION", None)
    for nothing in (None, "", "  \n"):
        monkeypatch.setattr(provenance, "git_output", lambda *args, out=nothing: out)
        monkeypatch.setattr(provenance, "_CODE_VERSION", None)
        assert provenance.code_version() == provenance._package_version()
    assert provenance._package_version() in ("cse-harness 0.1.0", "unknown")


def test_the_code_version_comes_from_git_inside_a_checkout() -> None:
    # The package lives two folders below the checkout; a wrong root falls back to the version
    # number silently, and every record would then name a release instead of a commit.
    repo = REPO_ROOT
    if not (repo / ".git").exists():
        pytest.skip("not a git checkout")
    assert code_version().startswith("git:")
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True, text=True
    )
    assert head.stdout.strip() in code_version()


def test_the_tree_is_dirty_when_git_lists_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    for out, dirty in ((" M harness/cli.py\n", True), ("", False), ("\n", False), (None, None)):
        provenance.code_dirty.cache_clear()
        monkeypatch.setattr(provenance, "git_output", lambda *args, out=out: out)
        assert provenance.code_dirty() is dirty
    provenance.code_dirty.cache_clear()
