"""The head watch (harness.grid.tune.head_watch): it calls once the Ray head at the grid's address
stops answering, not while it answers. (The real head killed: tests/system/test_lost_node.py.)"""

from __future__ import annotations

import socket
import threading
import time

from harness.grid.tune.head_watch import HeadWatch


def test_the_head_watch_calls_once_the_head_is_silent() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    lost: list[float] = []
    done = threading.Event()

    def on_lost(silent_s: float) -> None:
        lost.append(silent_s)
        done.set()

    watch = HeadWatch(address, on_lost, lost_after_s=0.5, every_s=0.1)
    watch.start()
    time.sleep(0.5)
    assert not lost  # it answers
    server.close()
    assert done.wait(10) and lost[0] >= 0.5
    watch.done.set()
