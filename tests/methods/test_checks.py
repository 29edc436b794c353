"""Device checks (methods.checks): inside a training step they are collected, not read; outside one
they are read and raise at once."""

from __future__ import annotations

import pytest
import torch

from harness.errors import TrainingError
from methods.checks import Check, deferred_checks, device_check


def _check(bad: torch.Tensor) -> None:
    """A check that fails where ``bad`` has a true entry."""

    def found() -> Check:
        return Check("{0} bad values", bad.sum().reshape(1))

    def check_now() -> None:
        if bool(bad.any()):
            raise TrainingError(f"{int(bad.sum())} bad values")

    device_check(found, check_now)


def test_in_a_step_the_check_is_collected_on_the_device_and_filled_when_read() -> None:
    with deferred_checks() as checks:
        _check(torch.tensor([True, False, True]))
    assert len(checks) == 1
    numbers = checks[0].numbers
    assert numbers.dtype == torch.long and numbers.tolist() == [2]
    assert checks[0].text(numbers.tolist()) == ("2 bad values", "")


def test_outside_a_step_the_check_is_read_and_raises_at_once() -> None:
    with pytest.raises(TrainingError, match="1 bad values"):
        _check(torch.tensor([False, True]))
    _check(torch.tensor([False, False]))  # nothing wrong: nothing raised
