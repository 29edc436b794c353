"""Lost capacity ends in bounded time: the grid's view of its nodes and of the trials no node can take.

A trial waits for a node whose resources cover its request (CPUs, GPUs, memory, the custom
resources of ``--trial-resources``). When no alive node could ever take it (the nodes that could
were lost: killed, preempted, shut down), Ray Tune would wait for ever. :class:`CapacityWatch` sees
that from what the driver observes (the alive nodes' total resources, each waiting trial's request),
says which node was lost, prints a line while it waits ("waiting for a node with worker_node=1: 0
of 1 node(s) left, 45 s of 300 s", every :data:`WAIT_LINE_S`) and, once the stated wait
(``--lost-node-wait``) has passed with no such node back, asks the grid to stop: the trials still
running on the nodes left finish first, then every run not finished is recorded ``interrupted``
(the same command resumes them) and the grid exits non-zero. No Ray here:
:mod:`harness.grid.tune.callbacks` feeds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_LOST_NODE_WAIT_S = 300.0
"""How long a grid waits, by default, for a node that can take its waiting trials (a restarted or
replacement node joins within minutes; a node that does not come back ends the grid)."""
MAX_LOST_NODE_WAIT_S = 7 * 24 * 3600.0
"""The longest wait ``--lost-node-wait`` accepts (a week)."""
WAIT_LINE_S = 15.0
"""While runs wait for a node, a line at least this often (whether or not other runs train)."""


@dataclass(frozen=True)
class Node:
    """A Ray node as the driver saw it: its id, address and total resources."""

    node_id: str
    ip: str
    resources: Mapping[str, float]

    def name(self) -> str:
        return f"{self.ip} ({self.node_id[:8]})"

    def covers(self, need: Mapping[str, float]) -> bool:
        return covers(self.resources, need)


def covers(resources: Mapping[str, float], need: Mapping[str, float]) -> bool:
    """Whether one node's ``resources`` hold all of ``need`` (a trial runs on one node)."""
    return all(float(resources.get(k, 0.0)) >= v for k, v in need.items() if v > 0)


def trial_request(cpus: float, gpus: float, custom: Mapping[str, float] | None = None) -> dict[str, float]:
    """What each trial asks Ray for, as :func:`trial_fit_problems` judges it (memory aside: a run's
    memory request is capped at the largest node's)."""
    return {**(custom or {}), "CPU": float(cpus), "GPU": float(gpus)}


def trial_fit_problems(
    totals: Mapping[str, float],
    request: Mapping[str, float],
    nodes: Sequence[Mapping[str, float]] | None = None,
    where: str = "the cluster's",
) -> list[str]:
    """Why a trial asking for ``request`` (:func:`trial_request`) could never start: one line per
    problem, none when it fits. The one rule of the pre-flight check, the grid's cluster check and
    the driver.

    A part beyond ``totals`` (all that ``where``, e.g. ``the cluster's``, has) is a problem; with
    ``nodes`` (each alive node's resources) so is a part beyond every single node, and a request
    whose parts some nodes offer but none offers whole."""
    problems = []
    for key, amount in request.items():
        if amount <= 0:
            continue
        have = float(totals.get(key, 0.0))
        if amount > have:
            hint = (
                f" (a node offers it with `ray start --resources '{{\"{key}\": N}}'`)"
                if key not in ("CPU", "GPU")
                else ""
            )
            problems.append(f"{_asked(key, amount)} is more than {where} {_amount(key, have)}{hint}")
        elif nodes is not None and not any(float(n.get(key, 0.0)) >= amount for n in nodes):
            most = max((float(n.get(key, 0.0)) for n in nodes), default=0.0)
            problems.append(
                f"{_asked(key, amount)} is more than any one Ray node offers (at most {_amount(key, most)} "
                "on a node): a trial runs on one node"
            )
    if not problems and nodes is not None and not any(covers(n, request) for n in nodes):
        problems.append(
            f"no Ray node offers a whole trial ({_resources(request)}), though each part is offered by "
            "some node: a trial runs on one node"
        )
    return problems


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def _asked(key: str, amount: float) -> str:
    """The flag that asked for ``amount`` of resource ``key``."""
    flag = {"CPU": "--cpus-per-trial", "GPU": "--gpus-per-trial"}.get(key)
    return f"{flag} {_number(amount)}" if flag else f"--trial-resources {key}={_number(amount)}"


def _amount(key: str, have: float) -> str:
    return f"{_number(have)} {key}(s)" if key in ("CPU", "GPU") else f"{_number(have)} {key}"


@dataclass
class CapacityWatch:
    """What the driver knows of its nodes, and how long its waiting trials have had none to go to.

    Args:
        wait_s: how long to wait for a node that can take a waiting trial before the grid stops.
        clock: seconds (tests pass their own).
    """

    wait_s: float = DEFAULT_LOST_NODE_WAIT_S
    clock: Callable[[], float] = time.monotonic
    seen: dict[str, Node] = field(default_factory=dict)
    lost: dict[str, Node] = field(default_factory=dict)
    alive: list[Node] = field(default_factory=list)
    stuck: dict[str, dict[str, float]] = field(default_factory=dict)
    since: float | None = None

    def observe(self, alive: Sequence[Node], waiting: Mapping[str, Mapping[str, float]]) -> list[str]:
        """Take the alive nodes and the waiting trials' requests (run id -> resources); return the
        lines worth saying now (a node lost or joined, a wait begun or over)."""
        lines: list[str] = []
        now = self.clock()
        ids = {n.node_id for n in alive}
        for node_id, node in list(self.seen.items()):
            if node_id not in ids and node_id not in self.lost:
                self.lost[node_id] = node
                lines.append(f"Ray node {node.name()} lost (it offered {_resources(node.resources)})")
        first = not self.seen  # the nodes at the start: none of them "joined"
        for node in alive:
            if node.node_id not in self.seen and not first:
                lines.append(f"Ray node {node.name()} joined (it offers {_resources(node.resources)})")
            self.seen[node.node_id] = node
            self.lost.pop(node.node_id, None)
        self.alive = list(alive)
        stuck = {
            run_id: dict(need) for run_id, need in waiting.items() if not any(n.covers(need) for n in alive)
        }
        if stuck and self.since is None:
            self.since = now
            lines.append(
                f"no alive Ray node can take {len(stuck)} waiting run(s) ({', '.join(sorted(stuck))}): "
                f"{self.wanted(stuck)}; waiting up to {self.wait_s:.0f} s (--lost-node-wait) for one"
            )
        elif not stuck and self.since is not None:
            lines.append("a Ray node that can take the waiting runs is back: the grid goes on")
            self.since = None
        self.stuck = stuck
        return lines

    def waited_s(self) -> float:
        return 0.0 if self.since is None else self.clock() - self.since

    def expired(self) -> bool:
        """Whether runs have waited longer than the stated wait for a node."""
        return self.since is not None and self.waited_s() >= self.wait_s

    def missing(self, stuck: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float]:
        """What the waiting runs ask for that no alive node offers (``{"worker_node": 1}``); their
        whole request when each part is offered but no node offers all of it."""
        need = _first(self.stuck if stuck is None else stuck)
        lacking = {
            k: v
            for k, v in need.items()
            if v > 0 and not any(n.resources.get(k, 0.0) >= v for n in self.alive)
        }
        return lacking or dict(need)

    def wanted(self, stuck: Mapping[str, Mapping[str, float]] | None = None) -> str:
        """``a node with worker_node=1: 0 of 1 node(s) left``: what the waiting runs lack, how many
        alive nodes offer it, of the nodes this grid saw offer it."""
        missing = self.missing(stuck)
        had = [n for n in self.seen.values() if n.covers(missing)]
        left = [n for n in self.alive if n.covers(missing)]
        return f"a node with {_resources(missing)}: {len(left)} of {len(had)} node(s) left"

    def waiting_line(self) -> str:
        """The line said while runs wait (``waiting for a node with worker_node=1: 0 of 1 node(s)
        left, 45 s of 300 s``)."""
        return f"waiting for {self.wanted()}, {self.waited_s():.0f} s of {self.wait_s:.0f} s"

    def stop_reason(self) -> str:
        """Why a grid whose runs waited in vain stops: what they lack, how long, which node was lost."""
        lost = ", ".join(n.name() for n in self.lost.values()) or "none seen"
        return (
            f"no Ray node with {_resources(self.missing())} came back within {self.wait_s:.0f} s "
            f"(--lost-node-wait; lost node(s): {lost})"
        )


def _first(stuck: Mapping[str, Mapping[str, float]]) -> Mapping[str, float]:
    return next(iter(stuck.values()), {})


def _resources(resources: Mapping[str, float]) -> str:
    """``worker_node=1, CPU=1, memory=2.0 GB`` (what a node offers or a trial asks; Ray's internal
    resources such as ``node:<ip>`` and object store memory left out)."""
    parts = []
    for key, value in sorted(resources.items(), key=lambda kv: (kv[0] in ("CPU", "GPU", "memory"), kv[0])):
        if key.startswith("node:") or key == "object_store_memory" or value <= 0:
            continue
        parts.append(f"{key}={value / 2**30:.1f} GB" if key == "memory" else f"{key}={value:g}")
    return ", ".join(parts) or "no resources"


__all__ = [
    "DEFAULT_LOST_NODE_WAIT_S",
    "MAX_LOST_NODE_WAIT_S",
    "WAIT_LINE_S",
    "CapacityWatch",
    "Node",
    "covers",
    "trial_fit_problems",
    "trial_request",
]
