"""The committed night records keep their run ids: each record's stored config resolves to its id.

A change to how a config is hashed, typed or defaulted would orphan every record of a runs folder
(the next grid would train them all again); the records in ``docs/night/runs`` pin it (the runs
whose method changed on purpose are kept apart in ``docs/night/superseded``:
``tests/system/test_replication_superseded.py``).
"""

from __future__ import annotations

import json

from harness.store.run_config import RunConfig
from tests.helpers import NIGHT_RECORDS


def test_every_committed_night_record_resolves_to_its_run_id() -> None:
    paths = sorted(NIGHT_RECORDS.glob("*.json"))
    assert len(paths) >= 250
    wrong = []
    for path in paths:
        record = json.loads(path.read_text(encoding="utf-8"))
        config = RunConfig.from_dict(record["config"])
        if config.run_id() != record["run_id"] or path.stem != record["run_id"]:
            wrong.append(path.name)
        if config.config_id() != record["group_id"]:
            wrong.append(f"{path.name} (group)")
    assert not wrong, wrong
