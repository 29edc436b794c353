"""harness/run/footprints.json: the footprints shipped with the code are what :func:`footprint`
measures today, and they cover every run of ``all`` under the ``paper`` and ``cpu`` profiles, so a
first ``--dry-run`` measures none. ``make footprints`` (``HARNESS_WRITE_FOOTPRINTS=1``) writes the
file anew from the same expansion."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from harness.run.footprint import SHIPPED, footprint, footprint_key, shipped
from harness.specs.cells import expand
from harness.specs.find import load_plot_specs, load_table_specs
from methods.params import MethodParams

PROFILES = ("paper", "cpu")


def _keys(data_root: Path) -> dict[str, tuple[str, MethodParams, int]]:
    """Every (method, params, width) of ``all`` under :data:`PROFILES`, by its key."""
    specs = load_table_specs(["all"])
    extra = [(p.name, s.label, s.run) for p in load_plot_specs() for s in p.series]
    out: dict[str, tuple[str, MethodParams, int]] = {}
    for profile in PROFILES:
        plan = expand(specs, profile, seeds=1, data_root=data_root, extra=extra, require_corpus=False)
        for run in plan.runs:
            c = run.config
            out[footprint_key(c.method, c.params, c.hidden_size)] = (c.method, c.params, c.hidden_size)
    return out


def test_the_shipped_footprints_are_todays_and_cover_the_profiles(data_root: Path) -> None:
    keys = _keys(data_root)
    measured = {key: footprint(*spec) for key, spec in sorted(keys.items())}
    if os.environ.get("HARNESS_WRITE_FOOTPRINTS"):
        rows = {key: dataclasses.asdict(value) for key, value in measured.items()}
        SHIPPED.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        shipped.cache_clear()
    table = shipped()
    missing = sorted(set(keys) - set(table))
    assert not missing, f"{len(missing)} footprint(s) not in {SHIPPED.name} (make footprints): {missing[:3]}"
    changed = sorted(key for key, value in measured.items() if table[key] != value)
    assert not changed, (
        f"{len(changed)} footprint(s) changed since {SHIPPED.name} (make footprints): {changed[:3]}"
    )
    assert len(keys) > 60  # both profiles' methods and widths, not a sample
