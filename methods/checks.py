"""Conditions that fail a run, found on the device without waiting for it: inside the training step
they are collected, and the loop reads them with the losses at its next evaluation point."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import NamedTuple

import torch


class Check(NamedTuple):
    """A condition that fails the run, found on the device (:func:`device_check`).

    Attributes:
        message: the error's text, with fields ``{0}``, ``{1}``, ... that ``numbers`` fill.
        numbers: a 1-d integer tensor; the first counts what went wrong (0: nothing did).
        note: kept in the record beside the error (``{values}``: ``values`` as a list; ``{0}``, ...).
        values: numbers worth keeping with the note (a covariance's eigenvalues).
    """

    message: str
    numbers: torch.Tensor
    note: str = ""
    values: torch.Tensor | None = None

    def text(self, numbers: list[int]) -> tuple[str, str]:
        """The message and the note, filled with ``numbers`` (read) and the values (read now)."""
        values = self.values.tolist() if self.values is not None else None
        return self.message.format(*numbers), self.note.format(*numbers, values=values)


_DEFERRED: ContextVar[list[Check] | None] = ContextVar("deferred_checks", default=None)


@contextlib.contextmanager
def deferred_checks() -> Iterator[list[Check]]:
    """Collect the :func:`device_check` calls of the code inside instead of reading them: the loop's
    step runs in one, and the loop reads the checks with the losses at its next evaluation point."""
    checks: list[Check] = []
    token = _DEFERRED.set(checks)
    try:
        yield checks
    finally:
        _DEFERRED.reset(token)


def device_check(found: Callable[[], Check], check_now: Callable[[], None]) -> None:
    """Fail the run where ``found().numbers[0] > 0`` without waiting for the device.

    Inside :func:`deferred_checks` (the training step) the check stays on the device and the loop
    raises :class:`~harness.errors.TrainingError` (``"step <s>: "`` and the message) at its next
    evaluation point; elsewhere (a loss computed on its own) ``check_now()`` reads what it needs and
    raises at once.
    """
    sink = _DEFERRED.get()
    if sink is None:
        check_now()
    else:
        check = found()
        values = None if check.values is None else check.values.detach()
        sink.append(check._replace(numbers=check.numbers.detach().reshape(-1).to(torch.long), values=values))
