"""Judgements over the whole fleet that no single node's rules can make: which switch is
failing, which rank of a job is the straggler and why. Domain only (no formatting): the views,
``status --json`` and replay summaries all read these.

Fabric correlation is per *switch*: ND H100 v5 fabrics are rail-optimised, so HCA ``mlx5_ibK``
of every node of a scalable unit goes to the rail-K leaf switch of that unit (``leaf03-r5``;
docs/scenarios.md). Bad ports on several nodes of one rail switch point at the switch; bad ports
on different rails of one leaf group are unrelated cable or HCA faults.
"""

import re
from dataclasses import dataclass, field

from fleetdeck.console.health import Finding
from fleetdeck.console.state import FleetState, NodeState
from fleetdeck.hostlist import compress
from fleetdeck.protocol.messages import IbPortSample, JobStatus

PORT_OK = "ok"
PORT_DOWN = "down"
PORT_FLAPPING = "flapping"
PORT_ERRORING = "erroring"
CORRELATION_MIN = 3
"""Bad ports on this many distinct nodes behind one switch: suspect the switch."""
STRAGGLER_FACTOR = 1.2
"""A rank this much slower than the job's median step is named a straggler."""

_TRAILING_DIGITS = re.compile(r"(\d+)$")


def port_status(p: IbPortSample, findings: list[Finding]) -> str:
    if (p.state is not None and p.state != "ACTIVE") or (
            p.phys_state is not None and p.phys_state != "LinkUp"):
        return PORT_DOWN
    comp = f"{p.dev}:{p.port}"
    rules = {f.rule for f in findings if f.component == comp}
    if "N5" in rules or (p.d.get("link_downed", 0) > 0):
        return PORT_FLAPPING
    if rules & {"N1", "N2", "N3", "N4"}:
        return PORT_ERRORING
    return PORT_OK


def port_rail(st: NodeState, dev: str) -> int | None:
    """The rail of an HCA: its GPU affinity from the birth, else the number in its name."""
    if st.birth is not None:
        for inv in st.birth.ib_ports:
            if inv.dev == dev and inv.gpu_affinity is not None:
                return inv.gpu_affinity
    m = _TRAILING_DIGITS.search(dev)
    return int(m.group(1)) if m else None


def leaf_of(st: NodeState) -> str:
    return (st.birth.topology.leaf if st.birth is not None else "") or "(no leaf)"


def switch_of(st: NodeState, dev: str) -> str:
    """``leaf03-r5``: the leaf switch that carries this HCA's rail (the group without a rail)."""
    rail = port_rail(st, dev)
    leaf = leaf_of(st)
    return leaf if rail is None else f"{leaf}-r{rail}"


def bad_ports(st: NodeState) -> list[tuple[str, IbPortSample]]:
    """(status, port) of the node's ports that are not ok (none while it is silent)."""
    t = st.telemetry
    if t is None or st.stale or st.online is False:
        return []
    out = []
    for p in t.ib_ports:
        status = port_status(p, st.findings)
        if status != PORT_OK:
            out.append((status, p))
    return out


@dataclass
class SuspectSwitch:
    switch: str
    leaf: str
    nodes: list[str]
    ports: list[str]
    """``node:dev:port`` of every bad port behind it."""
    by_status: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return (f"{len(self.ports)} ports on {len(self.nodes)} nodes fail together: suspect "
                f"leaf switch {self.switch}, not the nodes ({compress(self.nodes)})")

    def as_json(self) -> dict[str, object]:
        return {"switch": self.switch, "leaf": self.leaf, "nodes": self.nodes,
                "ports": self.ports, "by_status": self.by_status, "text": self.text}


def suspect_switches(state: FleetState, min_nodes: int = CORRELATION_MIN
                     ) -> list[SuspectSwitch]:
    """Switches (rails) with bad ports on at least ``min_nodes`` nodes, worst first."""
    groups: dict[str, SuspectSwitch] = {}
    for st in state.nodes.values():
        for status, p in bad_ports(st):
            sw = switch_of(st, p.dev)
            g = groups.get(sw)
            if g is None:
                g = groups[sw] = SuspectSwitch(sw, leaf_of(st), [], [])
            if st.node_id not in g.nodes:
                g.nodes.append(st.node_id)
            g.ports.append(f"{st.node_id}:{p.dev}:{p.port}")
            g.by_status[status] = g.by_status.get(status, 0) + 1
    out = [g for g in groups.values() if len(g.nodes) >= min_nodes]
    for g in out:
        g.nodes.sort()
    out.sort(key=lambda g: (-len(g.nodes), g.switch))
    return out


@dataclass(frozen=True)
class Straggler:
    job_id: str
    rank: int
    node: str
    slower_pct: float
    """How much slower than the job's median step this rank is (%)."""
    cause: str

    @property
    def text(self) -> str:
        return f"rank {self.rank} {self.node} +{self.slower_pct:.0f}%: {self.cause}"

    def as_json(self) -> dict[str, object]:
        return {"rank": self.rank, "node": self.node, "slower_pct": round(self.slower_pct, 1),
                "cause": self.cause, "text": self.text}


def straggler(job: JobStatus, state: FleetState) -> Straggler | None:
    """The job's slowest rank when it is clearly slower than the median, with a likely cause."""
    if not job.slowest or job.state.value != "R":
        return None
    worst = job.slowest[0]
    median = job.median_step_time_ms
    if median is None or median <= 0 or worst.step_time_ms < STRAGGLER_FACTOR * median:
        return None
    slower = (worst.step_time_ms / median - 1) * 100
    return Straggler(job.job_id, worst.rank, worst.node, slower, likely_cause(state, worst.node))


def likely_cause(state: FleetState, node: str) -> str:
    st = state.nodes.get(node)
    if st is None:
        return "node unknown"
    if st.online is False or st.stale:
        return "node not responding"
    throttled = [f for f in st.findings if f.rule in ("G12", "G13")]
    if throttled:
        return f"throttled GPU ({throttled[0].component} {throttled[0].text})"
    ports = [f for f in st.findings if f.rule.startswith("N")]
    if ports:
        return f"degraded port ({ports[0].component} {ports[0].text})"
    gpus = [f for f in st.findings if f.rule.startswith("G")]
    if gpus:
        return f"GPU fault ({gpus[0]})"
    return "no finding on that node"
