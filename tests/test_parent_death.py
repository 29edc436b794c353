"""harness.parent_death: a helper process started with it ends when its parent is SIGKILLed; one
started without it lives on (the control that shows the check can fail)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO_ROOT
from tests.processes import session_pids

CHILD = "import os, sys, time; {guard}print('ready', flush=True); time.sleep(120)"
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {child!r}], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "ready"
print(child.pid, flush=True)
child.wait()
"""


def _orphan_after_parent_killed(guarded: bool) -> bool:
    """Start parent -> child in a new session, SIGKILL the parent; is the child alive 5 s later?"""
    guard = "from harness.parent_death import die_with_parent; die_with_parent(os.getppid()); "
    child = CHILD.format(guard=guard if guarded else "")
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(child=child)],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 5
        while child_pid in session_pids(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return child_pid in session_pids(parent.pid)
    finally:
        for pid in session_pids(parent.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("guarded", [True, False], ids=["die_with_parent", "without"])
def test_a_guarded_child_ends_with_its_sigkilled_parent(guarded: bool) -> None:
    assert _orphan_after_parent_killed(guarded) is not guarded


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    gone = "1 if os.getppid() != 1 else 2"  # any id but the real parent's
    code = f"import os; from harness.parent_death import die_with_parent as d; d({gone}); print('lived')"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "lived" not in done.stdout
