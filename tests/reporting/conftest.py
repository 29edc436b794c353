"""Fixtures of the reporting tests: ``night``, the committed night's claims (every table with claims,
built from docs/night's records)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.reporting.claims import build_claims
from harness.specs.find import load_table_specs
from harness.store.run_store import RunStore
from tests.helpers import NIGHT, manifest_of


@pytest.fixture(scope="module")
def night(data_root: Path) -> list:
    manifest = manifest_of(NIGHT)
    specs = [s for s in load_table_specs(manifest["specs"]) if s.claims]
    store = RunStore(NIGHT / "runs")
    return build_claims(
        specs, store, manifest["profile"], overrides=manifest["overrides"], data_root=data_root
    )
