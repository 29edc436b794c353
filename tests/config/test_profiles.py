"""The profiles hold the documented settings, and only settings a run can override."""

from __future__ import annotations

from harness.config.profiles import PROFILES
from harness.config.settings import OVERRIDABLE


def test_profiles_have_the_documented_settings() -> None:
    assert {"smoke", "cpu", "paper"} <= set(PROFILES)
    assert PROFILES["smoke"]["model"] == "random:tiny"
    assert (PROFILES["smoke"]["batch_size"], PROFILES["smoke"]["max_steps"]) == (8, 4)
    assert PROFILES["smoke"]["final_tasks"] == "sts"
    cpu = PROFILES["cpu"]
    assert (cpu["model"], cpu["batch_size"], cpu["max_length"]) == ("minilm", 64, 32)
    assert (cpu["final_tasks"], cpu["transfer_mode"]) == ("sts", "fasttest")
    paper = PROFILES["paper"]
    assert (paper["model"], paper["batch_size"], paper["max_length"]) == ("bert-base-uncased", 64, 32)
    assert paper["max_steps"] is None and paper["eval_every"] == 125 and paper["lr"] == 3e-5
    assert (paper["final_tasks"], paper["transfer_mode"]) == ("all", "test")
    for profile in PROFILES.values():
        assert set(profile) <= set(OVERRIDABLE)
