"""The watch of the nodes (harness.grid.capacity): a lost node named with what it offered, the wait
for one that can take the waiting runs counted against ``--lost-node-wait``, a node that comes back
ending it. (The driver's callback that feeds it: tests/grid/tune/test_callbacks.py; the real lost
worker: tests/system/test_lost_node.py.)"""

from __future__ import annotations

from harness.grid.capacity import CapacityWatch, Node, trial_fit_problems, trial_request
from tests.helpers import HEAD, NEED, WORKER, Clock


def test_the_watch_names_the_lost_node_and_counts_the_wait() -> None:
    clock = Clock()
    watch = CapacityWatch(300.0, clock)
    assert watch.observe([HEAD, WORKER], {}) == []
    assert watch.observe([HEAD, WORKER], {"simcse-1": NEED}) == []  # placeable: Ray's to schedule
    lines = watch.observe([HEAD], {"simcse-1": NEED, "simcsepp-2": NEED})
    assert lines[0] == "Ray node 127.0.0.1 (wwwwwwww) lost (it offered worker_node=1, CPU=1, memory=3.7 GB)"
    assert lines[1].startswith("no alive Ray node can take 2 waiting run(s) (simcse-1, simcsepp-2): ")
    assert "a node with worker_node=1: 0 of 1 node(s) left; waiting up to 300 s" in lines[1]
    clock.now += 45
    assert watch.waiting_line() == "waiting for a node with worker_node=1: 0 of 1 node(s) left, 45 s of 300 s"
    assert not watch.expired()
    clock.now += 255
    assert watch.expired()
    assert watch.stop_reason() == (
        "no Ray node with worker_node=1 came back within 300 s (--lost-node-wait; lost node(s): 127.0.0.1 "
        "(wwwwwwww))"
    )


def test_a_node_that_comes_back_ends_the_wait() -> None:
    clock = Clock()
    watch = CapacityWatch(60.0, clock)
    watch.observe([HEAD, WORKER], {})
    watch.observe([HEAD], {"r-1": NEED})
    clock.now += 30
    back = Node("n" * 56, "10.0.0.7", WORKER.resources)
    lines = watch.observe([HEAD, back], {"r-1": NEED})
    assert lines == [
        "Ray node 10.0.0.7 (nnnnnnnn) joined (it offers worker_node=1, CPU=1, memory=3.7 GB)",
        "a Ray node that can take the waiting runs is back: the grid goes on",
    ]
    clock.now += 100
    assert not watch.expired() and watch.since is None


def test_a_trial_that_no_node_can_take_is_named_per_problem() -> None:
    """The one fit rule (pre-flight, the grid's cluster check, the driver): each part beyond the
    cluster's total, each part beyond every single node, and a request no one node offers whole."""
    gpu_node = {"CPU": 8.0, "GPU": 1.0}
    tagged = {"CPU": 8.0, "worker_node": 1.0}
    nodes = [gpu_node, tagged]
    totals = {"CPU": 16.0, "GPU": 1.0, "worker_node": 1.0}
    assert trial_fit_problems(totals, trial_request(8, 1), nodes) == []
    assert trial_fit_problems(totals, trial_request(32, 2, {"big": 1}), nodes) == [
        "--trial-resources big=1 is more than the cluster's 0 big (a node offers it with "
        "`ray start --resources '{\"big\": N}'`)",
        "--cpus-per-trial 32 is more than the cluster's 16 CPU(s)",
        "--gpus-per-trial 2 is more than the cluster's 1 GPU(s)",
    ]
    # within the totals, beyond any one node: refused before anything runs, not waited on
    assert trial_fit_problems(totals, trial_request(12, 0), nodes) == [
        "--cpus-per-trial 12 is more than any one Ray node offers (at most 8 CPU(s) on a node): a trial "
        "runs on one node"
    ]
    assert trial_fit_problems(totals, trial_request(1, 1, {"worker_node": 1}), nodes) == [
        "no Ray node offers a whole trial (worker_node=1, CPU=1, GPU=1), though each part is offered by "
        "some node: a trial runs on one node"
    ]
    assert trial_fit_problems(totals, trial_request(12, 0)) == []  # no node known: the totals alone
    assert trial_fit_problems({"GPU": 1.0}, {"GPU": 0.5}, where="this machine's") == []
    assert trial_fit_problems({"GPU": 0.0}, {"GPU": 0.5}, where="this machine's") == [
        "--gpus-per-trial 0.5 is more than this machine's 0 GPU(s)"
    ]
