"""Helper processes that end with the process that started them.

A grid's calibration and a run's transfer classifiers work in child processes. When their parent is
SIGKILLed (a driver killed by the out-of-memory killer or by hand, a Ray worker stopped by the next
grid) nothing tells a child to stop: it keeps computing for a parent that is gone, and one that
waits on a pipe the parent held may wait for ever. :func:`die_with_parent`, called first thing in
the child, asks the kernel to SIGKILL the child when its parent ends (Linux's
``PR_SET_PDEATHSIG``); elsewhere, and as a second guard, a daemon thread ends the child once its
parent id changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
POLL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` (its parent when it was started) ends.

    If the parent has already gone (the child is then adopted by another process), exit now.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent ended before the request above took effect
        os._exit(1)
    threading.Thread(target=_watch, args=(parent_pid,), name="die-with-parent", daemon=True).start()


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_S)
    os._exit(1)
