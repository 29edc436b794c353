"""The head watch (harness.grid.tune.head_watch): it asks the head, waits ``--lost-node-wait`` for a
head that does not answer (less for one that refuses connections), says so while it waits, and a
signal read while the head does not answer ends the grid. (A real head killed or stopped:
tests/system/test_lost_node.py.)"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable

import pytest

from harness.grid.tune.head_watch import Answer, HeadWatch
from tests.helpers import REPO_ROOT


class Script:
    """A fake head: the answers to give in turn (the last one for ever), each question 5 s later on
    the watch's clock."""

    def __init__(self, answers: Iterable[Answer], step_s: float = 5.0) -> None:
        self.answers = list(answers)
        self.step_s = step_s
        self.now = 0.0
        self.asked = 0

    def ask(self) -> Answer:
        self.now += self.step_s
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]

    def clock(self) -> float:
        return self.now


def watch_of(script: Script, wait_s: float, **kwargs: object) -> tuple[HeadWatch, list[str], list[str]]:
    said: list[str] = []
    lost: list[str] = []
    watch = HeadWatch(
        "10.0.0.1:6379", script.ask, lost.append, wait_s=wait_s, say=said.append, every_s=0.0,
        clock=script.clock, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    return watch, said, lost


def test_a_head_that_does_not_answer_ends_the_grid_after_the_wait_with_lines_meanwhile() -> None:
    script = Script([Answer.YES, Answer.YES, Answer.SILENT])
    watch, said, lost = watch_of(script, wait_s=40)
    watch.run()  # in this thread: it returns once it called on_lost
    assert said[0] == (
        "the Ray head at 10.0.0.1:6379 accepts connections but does not answer: waiting up to 40 s "
        "(--lost-node-wait) for it to answer again; Ctrl-C stops the grid"
    )
    assert said[1:] == [
        "waiting for the Ray head at 10.0.0.1:6379 to answer, 15 s of 40 s",
        "waiting for the Ray head at 10.0.0.1:6379 to answer, 30 s of 40 s",
    ]
    assert lost == [
        "the Ray head at 10.0.0.1:6379 has not answered for 40 s (--lost-node-wait 40 s; it accepts "
        "connections): the head node is stopped, hung or overloaded"
    ]
    assert script.asked == 2 + 9  # silent at the 3rd question (t=15), lost at t=55


def test_a_head_that_refuses_connections_is_lost_before_rays_own_minute() -> None:
    script = Script([Answer.YES, Answer.GONE])
    watch, said, lost = watch_of(script, wait_s=300)
    watch.run()
    assert "refuses connections: waiting up to 20 s" in said[0]
    assert lost == [
        "the Ray head at 10.0.0.1:6379 stopped answering (20 s): the head node stopped or was lost"
    ]


def test_a_head_that_answers_again_goes_on() -> None:
    script = Script([Answer.SILENT, Answer.SILENT, Answer.YES])
    watch, said, lost = watch_of(script, wait_s=300)
    thread = threading.Thread(target=watch.run)
    thread.start()
    deadline = time.monotonic() + 60
    while script.asked < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.stop()
    thread.join(timeout=10)
    assert not thread.is_alive() and not lost
    assert said[-1] == "the Ray head at 10.0.0.1:6379 answers again: the grid goes on"


def test_a_signal_counts_once_the_head_does_not_answer() -> None:
    reader, writer = socket.socketpair()
    script = Script([Answer.YES, Answer.YES, Answer.SILENT])
    signals: list[int] = []
    watch, _, lost = watch_of(script, wait_s=300, on_signal=signals.append, signals=reader)
    writer.send(bytes([signal.SIGCHLD, signal.SIGTERM]))  # another signal is not a stop
    watch.run()
    reader.close()
    writer.close()
    assert signals == [signal.SIGTERM] and not lost
    assert script.asked == 3  # the head answered twice: the main thread's to handle, until then


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_ends_the_process_while_its_main_thread_is_blocked(signum: int) -> None:
    # The main thread blocks the signals and sleeps in C, as Ray's driver blocks in a call to a stopped
    # head: Python's handler cannot run there, the watch reads the signal from the wakeup fd.
    script = textwrap.dedent(
        """
        import ctypes, os, signal, sys
        from harness.grid.signals import sigterm_as_interrupt
        from harness.grid.tune.head_watch import Answer, watching_head

        def on_signal(signum):
            print(f"stopped by {signum}", flush=True)
            os._exit(130)

        with sigterm_as_interrupt(), watching_head(
            "10.0.0.1:6379", print, ask=lambda: Answer.SILENT, on_signal=on_signal, say=print
        ):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            print("blocked", flush=True)
            ctypes.CDLL(None).sleep(120)
        sys.exit(1)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "blocked":
            break
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)  # the next question, not the 120 s sleep
    assert proc.returncode == 130, out + err
    assert f"stopped by {signum}" in out


def test_a_signal_while_the_head_does_not_answer_ends_the_grid_without_another_question() -> None:
    reader, writer = socket.socketpair()
    script = Script([Answer.YES, Answer.SILENT])
    signals: list[int] = []

    def ask() -> Answer:
        answer = script.ask()
        if script.asked == 3:  # Ctrl-C after the head's second silence
            writer.send(bytes([signal.SIGINT]))
        return answer

    watch, said, lost = watch_of(script, wait_s=300, on_signal=signals.append, signals=reader)
    watch.ask = ask
    watch.run()
    reader.close()
    writer.close()
    assert signals == [signal.SIGINT] and not lost and script.asked == 3
    assert len(said) == 1  # the line that it waits, said at the first silence
