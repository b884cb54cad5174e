"""Judgements over the whole fleet that no single node's rules can make: which switch is
failing, which rank of a job is the straggler and why. Domain only (no formatting): the views,
``status --json`` and replay summaries all read these.

Fabric correlation is per *switch*: ND H100 v5 fabrics are rail-optimised, so HCA ``mlx5_ibK``
of every node of a scalable unit goes to the rail-K leaf switch of that unit (``leaf03-r5``;
docs/scenarios.md). Bad ports on several nodes of one rail switch point at the switch; bad ports
on different rails of one leaf group are unrelated cable or HCA faults.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from fleetdeck.console.clock import CLOCK_ACTION, CLOCK_RULE, REFUSES
from fleetdeck.console.health import (
    BLIND_RULE,
    FATAL_WINDOW_S,
    GONE_HOT,
    GPU_GONE,
    GPU_READER_SAYS,
    LINK_RULES,
    SW_POWER_CAP,
    SYMBOL_RULES,
    THROTTLE_UNPROVEN,
    VERDICT_ORDER,
    Finding,
    PortPast,
    Severity,
    Verdict,
    blind_step,
    port_key,
    port_vanished,
)
from fleetdeck.console.state import (
    AGENT_RECONNECT_S,
    FAILING_STATES,
    HELD_STEADY_S,
    HOLDING_NODES,
    JOB_WINDOW_S,
    RECONNECT_LOOP,
    WILL_BURST_S,
    FleetState,
    NodeState,
    reason_words,
)
from fleetdeck.hostlist import compress
from fleetdeck.protocol import xids
from fleetdeck.protocol.fast import GpuSample, IbPortSample, Telemetry
from fleetdeck.protocol.messages import TS_MS_MAX, DrainState, JobStatus

PORT_OK = "ok"
PORT_DOWN = "down"
PORT_FLAPPING = "flapping"
PORT_ERRORING = "erroring"
PORT_GONE = "gone"
"""A port its agent reports with nothing read: its HCA left sysfs (N7). The host's fault, never
a switch's: it is left out of ``suspect_switches``."""
NO_LINK = frozenset({PORT_DOWN, PORT_GONE})
"""Statuses of a port without a link: the views count and draw both as down."""
FLAPS_PER_HOUR = 2
"""A port up now whose link went down this often in the agent's hour (``errors_1h``) is
flapping, not "erroring" (N2 holds either way): three flaps read "erroring" with the FLAP
column empty (a 3 a.m. drive). Once is a link that went down and came back (a switch reboot:
the switch reads "recovered")."""
CORRELATION_MIN = 3
"""Bad ports on this many distinct nodes behind one switch: suspect the switch."""
LEAF_WINDOW_S = 60.0
"""Rail switches of one leaf group whose drops began within this long of the first of them
dropped together: one cause, the group's power, management or uplinks (``leaf_groups``).
Each node says its port went down in its own next sample, up to an interval apart (1 s by
default, 10 s on ``--interval 10``: docs/protocol.md, "Telemetry — every interval"), and a
restarted console knows a drop only by the minute the store kept it in
(``recall_port_minute``): two rails down in one second read up to a minute apart. Rails down
minutes apart are two faults (a drill: leaf02-r3, then leaf02-r0 20 min later, read "2 rails
fail together")."""
STRAGGLER_FACTOR = 1.2
"""A rank this much slower than the job's median step is named whatever the spread."""

ENDED_BADLY = frozenset({"F", "NF", "TO"})
"""Job states of a run that ended without finishing its work (failed, node fail, timeout)."""
SILENT_KEEP_S = AGENT_RECONNECT_S
"""How long a node that fell silent behind a suspect switch still counts for it (the agents'
reconnect grace): long enough for a restarted fleet to come back, not so long that dead nodes
keep a switch suspect, or hide a rack that lost power."""

HELD_RULES = frozenset({"N2"})
"""Rules that hold for a window after the port is fine again (N2: a fatal counter moved within
the last hour). A port that is up and has only these is not failing now: it failed."""
QUIET_HELD_RULES = frozenset({"N2", "N3"})
"""Hour-long port rules that hold a node failed after its port went quiet (``held_only_since``):
N2 once the link is up and still, N3 once no symbol error came for ``SYMBOL_QUIET_S``. After a
repair, N3 still said "drain (requeue its jobs)" of a node whose job stepped at full speed."""
LINKS_UP_RULES = QUIET_HELD_RULES | {"N5"}
"""Port rules that may fail a node whose links are up and still now (N5: five carrier losses
in 24 h): such a node holds no job up (``sick_nodes``), though it stays failed until drained
and repaired."""
SYMBOL_QUIET_S = 300
"""How long a port must have had no symbol error for N3 to read as past (``_symbols_quiet``)."""
RECOVERED = f"recovered, errors in the last {FATAL_WINDOW_S / 60:.0f} min"
"""What every view says of a suspected switch whose ports are all up again (SuspectSwitch)."""

_TRAILING_DIGITS = re.compile(r"(\d+)$")


def port_status(p: IbPortSample, findings: list[Finding]) -> str:
    if port_vanished(p):
        return PORT_GONE
    if (p.state is not None and p.state != "ACTIVE") or (
            p.phys_state is not None and p.phys_state != "LinkUp"):
        return PORT_DOWN
    comp = f"{p.dev}:{p.port}"
    rules = {f.rule for f in findings if f.component == comp}
    if "N5" in rules or p.d.get("link_downed", 0) > 0 or (
            "N2" in rules and p.errors_1h.get("link_downed", 0) >= FLAPS_PER_HOUR):
        return PORT_FLAPPING
    if rules & {"N1", "N2", "N3", "N4", "N6"}:
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


def bad_ports(st: NodeState, last_known: bool = False) -> list[tuple[str, IbPortSample]]:
    """(status, port) of the node's ports that are not ok: none while it is silent, unless
    ``last_known`` (those of its last sample)."""
    if st.sample is None or (not last_known and (st.stale or st.online is False)):
        return []
    if not any(f.rule.startswith("N") for f in st.findings):
        # A port that is down or erroring always raises an N finding: the common, healthy
        # case costs one scan of the findings, not a look at every port (nor a build of the
        # rows of a sample that has none yet: wire2.Pending).
        return []
    t = st.telemetry
    assert t is not None
    out = []
    for p in t.ib_ports:
        status = port_status(p, st.findings)
        if status != PORT_OK:
            out.append((status, p))
    return out


def erroring_ports(st: NodeState) -> int:
    """Its ports up but erroring or flapping: a port that is down counts as down only, though
    its link_downed (N2) moved too (a replayed switch failure read "down 64  erroring 64" of
    128 ports); a silent node's ports are unknown (``port_use``), not erroring. The overview's
    count and ``status``'s are this one."""
    return sum(1 for status, _p in bad_ports(st) if status not in NO_LINK)


@dataclass
class SuspectSwitch:
    switch: str
    leaf: str
    nodes: list[str]
    ports: list[str]
    """``node:dev:port`` of every bad port behind it."""
    by_status: dict[str, int] = field(default_factory=dict)
    held: int = 0
    """Of ``ports``, those up again whose only findings are ``HELD_RULES`` (N2's window)."""
    link_only: bool = False
    """Symbol errors (``SYMBOL_RULES``) on fewer than ``CORRELATION_MIN`` of its nodes: those
    are the nodes' own, only its ports' link faults (``LINK_RULES``) are the switch's."""
    since_ms: int | None = None
    """When its ports dropped (sample clock, ms): the median of their fatal counters' last
    move (N2: ``link_downed`` moves as a link goes down), so one node's own earlier flap does
    not date it; a port whose drop was not seen counts as the earliest, so None when more than
    half its ports' drops were not seen (a console started after it, with no store to recall
    it; of 4 ports with 2 unseen, the earlier of the other two dates it): one port that moved
    again later does not date the rest. What ``leaf_groups`` judges a common cause by."""

    @property
    def recovered(self) -> bool:
        """Every port behind it is up again and bad only by N2's window: the switch came back.
        Still one judgement (its nodes' N2 is the switch's, not theirs), said as recovered so
        no view shows a switch that works as failing for the hour N2 holds."""
        return bool(self.ports) and self.held == len(self.ports)

    @property
    def text(self) -> str:
        if self.recovered:
            return (f"leaf switch {self.switch} {RECOVERED}: its {len(self.ports)} ports on "
                    f"{len(self.nodes)} nodes are up again ({compress(self.nodes)}); their link "
                    "errors were the switch's, not the nodes'")
        return (f"{len(self.ports)} ports on {len(self.nodes)} nodes fail together: suspect "
                f"leaf switch {self.switch}, not the nodes ({compress(self.nodes)})")

    @property
    def short(self) -> str:
        """``leaf05-r3 suspect: 16 ports on 16 nodes (gpu[…])``: ``text`` switch first, for a
        table's cell, where ``text`` was cut before it named the switch ("16 ports on 16 nodes
        fail together: suspe…" in the fabric view's leaf table at 100 columns; a
        walk-through)."""
        return (_short(self.switch, self.recovered, len(self.ports), len(self.nodes))
                + f" ({compress(self.nodes)})")

    def as_json(self) -> dict[str, object]:
        # ``since`` (unix s, as every time of status --json): when its ports dropped, what
        # its leaf group is judged by (``leaf_groups``); a script told two rails of one leaf
        # that dropped 20 min apart from one leaf group down only by the incidents' keys.
        return {"switch": self.switch, "leaf": self.leaf, "nodes": self.nodes,
                "ports": self.ports, "by_status": self.by_status,
                "recovered": self.recovered,
                "since": None if self.since_ms is None else round(self.since_ms / 1000, 3),
                "text": self.text}


@dataclass(frozen=True)
class LeafGroup:
    """Two or more rail switches of one leaf group that dropped together (``LEAF_WINDOW_S``),
    failing, or recovered (``recovered``: all of them, never a mix): one cause (the group's
    power, management or uplinks), told as one, not once per rail (a whole leaf group down
    read as 8 incidents and 8 problems of the same nodes, and once back as 8 "leaf02-rN
    recovered" incidents). Its leaf's other suspect rails are faults of their own."""

    leaf: str
    switches: list[SuspectSwitch]

    def holds(self, sw: SuspectSwitch) -> bool:
        """Whether ``sw`` is one of its rails (a rail of its leaf that dropped apart is not)."""
        return any(s.switch == sw.switch for s in self.switches)

    @property
    def nodes(self) -> list[str]:
        return sorted({n for sw in self.switches for n in sw.nodes})

    @property
    def ports(self) -> int:
        return sum(len(sw.ports) for sw in self.switches)

    @property
    def by_status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for sw in self.switches:
            for status, n in sw.by_status.items():
                out[status] = out.get(status, 0) + n
        return out

    @property
    def rails(self) -> str:
        """``r0, r1, r5``"""
        return ", ".join(sw.switch.removeprefix(f"{self.leaf}-") for sw in self.switches)

    @property
    def recovered(self) -> bool:
        """Its rail switches are all up again (``SuspectSwitch.recovered``): ``leaf_groups``
        never mixes failing and recovered ones."""
        return all(sw.recovered for sw in self.switches)

    @property
    def text(self) -> str:
        """``leaf04: 8 rail switches suspect (r0, …): 64 ports (64 down) on 8 nodes behind
        them (gpu[0025-0032])``, or once back ``leaf04: 8 rail switches recovered, errors in
        the last 60 min (r0, …): their 64 ports on 8 nodes are up again (…); …``"""
        nodes = self.nodes
        if self.recovered:
            return (f"{self.leaf}: {len(self.switches)} rail switches {RECOVERED} "
                    f"({self.rails}): their {self.ports} ports on {len(nodes)} nodes are up "
                    f"again ({compress(nodes)}); their link errors were the switches', not "
                    "the nodes'")
        counts = ", ".join(f"{n} {status}" for status, n in
                           sorted(self.by_status.items(), key=lambda kv: (-kv[1], kv[0])))
        return (f"{self.leaf}: {len(self.switches)} rail switches suspect ({self.rails}): "
                f"{self.ports} ports ({counts}) on {len(nodes)} nodes behind them "
                f"({compress(nodes)})")

    @property
    def short(self) -> str:
        """``leaf04: 8 rails suspect: 64 ports on 8 nodes (r0, …; gpu[…])``: ``text`` for a
        table's cell (``SuspectSwitch.short``), the leaf and what it did first."""
        return _short(f"{self.leaf}: {len(self.switches)} rails", self.recovered, self.ports,
                      len(self.nodes)) + f" ({self.rails}; {compress(self.nodes)})"


def _short(who: str, recovered: bool, ports: int, nodes: int) -> str:
    """``leaf05-r3 suspect: 16 ports on 16 nodes``, or ``… recovered: … up again``."""
    said = (f"{ports} port{'s' if ports != 1 else ''} on {nodes} "
            f"node{'s' if nodes != 1 else ''}")
    return f"{who} recovered: {said} up again" if recovered else f"{who} suspect: {said}"


def leaf_groups(switches: list[SuspectSwitch], recovered: bool = False
                ) -> dict[str, LeafGroup]:
    """The leaf groups of ``suspect_switches`` with two or more failing rail switches that
    dropped together (``LEAF_WINDOW_S``), or with ``recovered`` two or more recovered ones
    that had. The one grouping rule: the incidents, the overview's top problems and switch
    panel, and the fabric view's hint all read it, so a leaf group is one line in each while
    it is down and one once it is back (the recovery side listed 8 "leaf02-rN recovered"
    incidents of the same 16 nodes). Rails that dropped minutes apart are each a switch's own
    fault, as the operators' rule has it (blame the switch that fails on several nodes): "N
    rails fail together" of rails 20 min apart sent the on-call to the group's power (a
    drill). One group a leaf, its largest (two pairs of rails each down together, minutes
    apart, read as the larger pair and two switches). Recovered ones are judged by when they
    dropped too: the ports keep no time they came back, and the group's cause is its drop's."""
    found: dict[str, list[SuspectSwitch]] = {}
    for sw in switches:
        if sw.recovered is recovered:
            found.setdefault(sw.leaf, []).append(sw)
    out: dict[str, LeafGroup] = {}
    for leaf, rails in found.items():
        if len(rails) < 2:
            continue
        together = _dropped_together(rails)
        if len(together) >= 2:
            # In ``switches``' order (worst first): callers tell the group where its first
            # rail stands.
            ids = {id(sw) for sw in together}
            out[leaf] = LeafGroup(leaf, [sw for sw in rails if id(sw) in ids])
    return out


def _dropped_together(rails: list[SuspectSwitch]) -> list[SuspectSwitch]:
    """The largest set of ``rails`` whose drops began within ``LEAF_WINDOW_S`` of the first
    of them, the earliest of equals. Rails with no drop seen (``since_ms`` None: a console
    started after it) are one set of their own: nothing dates them apart, and a whole group
    down before the console started is still one cause, as it read before."""
    dated = sorted((sw for sw in rails if sw.since_ms is not None),
                   key=lambda sw: sw.since_ms or 0)
    best = [sw for sw in rails if sw.since_ms is None]
    window_ms = LEAF_WINDOW_S * 1000
    for i, first in enumerate(dated):
        start = first.since_ms or 0
        run = [sw for sw in dated[i:] if (sw.since_ms or 0) - start <= window_ms]
        if len(run) > len(best):
            best = run
    return best


def _link_fault(status: str, rules: frozenset[str]) -> bool:
    """A port's fault that a switch can explain: down, flapping, or a ``LINK_RULES`` finding."""
    return status in (PORT_DOWN, PORT_FLAPPING) or bool(rules & LINK_RULES)


def _held_only(st: NodeState, status: str, p: IbPortSample, rules: frozenset[str]) -> bool:
    """The port is up and only a rule that outlives the fault calls it bad (``rules``, the
    switch's of its findings): N2's hour, or N3's once the port has been quiet (as
    ``held_only_since`` judges a node); erroring, or flapping by its hour alone (its link went
    down twice in it, none of it now: a switch that died twice in the hour never read
    recovered, a review)."""
    if status == PORT_FLAPPING and p.d.get("link_downed", 0) > 0:
        return False  # going down now
    if status not in (PORT_ERRORING, PORT_FLAPPING):
        return False
    if rules <= HELD_RULES:
        return True
    t = st.telemetry
    return (rules <= QUIET_HELD_RULES and t is not None
            and _symbols_quiet(port_past(st, port_key(p)), t.ts))


def _quiet_since(st: NodeState) -> float:
    """When a silent node went quiet: its will, or its last telemetry."""
    if st.online is False:
        return st.status_ts
    return st.last_rx if st.last_rx is not None else st.status_ts


def suspect_switches(state: FleetState, min_nodes: int = CORRELATION_MIN,
                     pool: list[NodeState] | None = None) -> list[SuspectSwitch]:
    """Switches (rails) with bad ports on at least ``min_nodes`` nodes, failing ones first
    (then the recovered ones, ``SuspectSwitch.recovered``), worst first."""
    groups: dict[str, SuspectSwitch] = {}
    candidates: dict[str, list[tuple[NodeState, str, IbPortSample, frozenset[str]]]] = {}
    # A node with a bad port has an N finding, so it is judged not ok or changed since the last
    # judgement: look at those, not at every node (16,384 of them, each tick and each view
    # refresh; issue 12).
    for st in state.maybe_bad() if pool is None else pool:
        # A port that is down or erroring always raises an N finding (``bad_ports``): a node
        # without one has none, found by a loop here rather than a generator in each call (a
        # fleet of 16,384 agents all blind, each with an A1 finding, took ~8 ms a regroup).
        for f in st.findings:
            if f.rule[:1] == "N":
                break
        else:
            continue
        # A silent node keeps counting for the switch it was behind when it fell silent (by
        # its last sample): the nodes behind a switch come back one by one (a restarted
        # simulator, agents reconnecting with jitter), and the first ones back read failed for
        # the hour's link errors while the rest, still silent, no longer counted (docs/
        # reliability.md, "Failure drills by hand"). Only those ports: a long-dead node's last
        # sample must not make a new suspect of a switch, and of two nodes' own faults.
        if st.birth is None or not st.birth.topology.leaf:
            # No leaf said (a real agent without --leaf): its rail's switch is unknown, and
            # every such node in one "(no leaf)" group made a suspect switch of three
            # unrelated bad ports (a real-node drill).
            continue
        silent = st.stale or st.online is False
        if silent and (not st.behind_ports
                       or state.judged_at - _quiet_since(st) > SILENT_KEEP_S):
            continue  # a rack's power, a dead node: its own incident, not the switch's
        for status, p in bad_ports(st, last_known=True):
            if status == PORT_GONE or (silent and f"{p.dev}:{p.port}" not in st.behind_ports):
                continue
            comp = f"{p.dev}:{p.port}"
            rules = frozenset(f.rule for f in st.findings if f.component == comp)
            candidates.setdefault(switch_of(st, p.dev), []).append((st, status, p, rules))
    for sw, ports in candidates.items():
        # A node's own symbol-error fault on the rail of a switch that dropped its links was
        # handed to the switch with them, and kept it "suspect" after it came back (an SRE
        # drill). Symbol errors are the switch's only when they are on enough of its nodes.
        # Only when its link faults make it a suspect on their own: a switch with two nodes'
        # ports down and a third node's erroring is suspect by all three, as before (a review).
        sym_nodes = {st.node_id for st, _s, _p, rules in ports if rules & SYMBOL_RULES}
        link_nodes = {st.node_id for st, status, _p, rules in ports
                      if _link_fault(status, rules)}
        link_only = len(sym_nodes) < min_nodes <= len(link_nodes)
        g = groups[sw] = SuspectSwitch(sw, leaf_of(ports[0][0]), [], [], link_only=link_only)
        dropped: list[int] = []
        undated = 0
        # Dated only where it can be a suspect: most candidates are one node's bad port.
        dated = len({st.node_id for st, _s, _p, _r in ports}) >= min_nodes
        for st, status, p, rules in ports:
            if link_only and not _link_fault(status, rules):
                continue  # only its symbol errors: the node's own
            if dated and (link_only or _link_fault(status, rules)):
                # A port with symbol errors only never dropped: it dates nothing.
                past = port_past(st, port_key(p))
                if past is not None and past.fatal_ms is not None:
                    dropped.append(past.fatal_ms)
                else:
                    undated += 1
            if st.node_id not in g.nodes:
                g.nodes.append(st.node_id)
            g.ports.append(f"{st.node_id}:{p.dev}:{p.port}")
            g.by_status[status] = g.by_status.get(status, 0) + 1
            g.held += _held_only(st, status, p, rules - SYMBOL_RULES if link_only else rules)
        # A port whose drop was not seen dropped before any that was (a console started
        # after it): in the median as the earliest, so one port that moved again (a cable
        # reseated, a node's own flap) does not date a rail whose other ports say nothing,
        # and take it out of a leaf group found down (``_dropped_together``).
        mid = (len(dropped) + undated) // 2
        if mid >= undated and dropped:
            dropped.sort()
            g.since_ms = dropped[mid - undated]
    out = [g for g in groups.values() if len(g.nodes) >= min_nodes]
    for g in out:
        g.nodes.sort()
        g.ports.sort()  # the candidates come from a set: the JSON must not depend on its order
    out.sort(key=lambda g: (g.recovered, -len(g.nodes), g.switch))
    return out


def _place_behind_switches(state: FleetState, pool: list[NodeState],
                           skip: Callable[[NodeState], bool] | None = None) -> None:
    """Set each node's ``behind_*`` from the suspect switches of ``pool``, and clear them of
    the nodes in ``pool`` behind none now, leaving alone those ``skip`` says another keeps
    (a console on digests: a node whose collector named its switch). One rule for both
    consoles: raw telemetry (``correlate``) and digests (``correlate_digests``)."""
    behind: dict[str, tuple[set[str], set[str], set[str], set[str]]] = {}
    for sw in suspect_switches(state, pool=pool):
        for port in sw.ports:
            node, dev, num = port.rsplit(":", 2)
            switches, ports, failing, link_only = behind.setdefault(
                node, (set(), set(), set(), set()))
            switches.add(sw.switch)
            ports.add(f"{dev}:{num}")
            if sw.link_only:
                link_only.add(f"{dev}:{num}")
            if not sw.recovered:
                failing.add(sw.switch)
    for node, (switches, ports, failing, link_only) in behind.items():
        st = state.nodes[node]
        if skip is not None and skip(st):
            continue
        # Every rail of a leaf group failing reads "leaf02-r[0-7]". Named by the switches that
        # fail now when some do: "behind suspect switch leaf02-r[1,6]" named one that had
        # recovered, which the incidents called recovered (an SRE drill).
        where = (compress(failing or switches), frozenset(ports), not failing,
                 frozenset(link_only))
        if (st.behind_switch, st.behind_ports, st.behind_recovered,
                st.behind_link_only) != where:
            (st.behind_switch, st.behind_ports, st.behind_recovered,
             st.behind_link_only) = where
            state.mark(node)
    # Nodes behind a switch are degraded at least: all in the pool (not ok, or changed since
    # the last judgement).
    for st in pool:
        if (st.behind_switch and st.node_id not in behind
                and (skip is None or not skip(st))):
            st.behind_switch, st.behind_ports, st.behind_recovered = "", frozenset(), False
            st.behind_link_only = frozenset()
            state.mark(st.node_id)


def correlate(state: FleetState, now: float) -> None:
    """Fleet-wide context for each node's verdict (``FleetState.correlate``): which nodes' bad
    ports are a suspect switch's, and which silent nodes still run a job that keeps stepping."""
    pool = state.maybe_bad()
    _place_behind_switches(state, pool)
    running: dict[str, list[str]] | None = None
    # Silent nodes are stale or offline: all in the pool.
    for st in pool:
        if st.online is False or st.stale:
            if running is None:
                running = _running_jobs_by_node(state)
            stepping = _stepping(state, st, running.get(st.node_id, ()), now)
            if stepping != st.job_stepping:
                st.job_stepping = stepping
                state.mark(st.node_id)
        elif st.job_stepping:
            st.job_stepping = ""
            state.mark(st.node_id)


def _named_by_collector(st: NodeState) -> bool:
    return st.behind_by_collector


def correlate_digests(state: FleetState, now: float) -> None:
    """``correlate`` for a console on digests, for what the collectors could not see: each
    judges the switches of its own shard, so one that owns fewer than ``CORRELATION_MIN``
    of a dead switch's nodes sent them as failed, "drain, then reseat the cable", beside the
    switch this console suspects from all the digests (4 collectors, 32 nodes: 2 of the 16
    nodes behind leaf02-r5; with more collectors than a leaf has nodes / 3, most of them). A
    node whose collector named its switch (F1, ``behind_by_collector``) keeps that word."""
    _place_behind_switches(state, state.maybe_bad(), skip=_named_by_collector)


NO_REASON = frozenset({"none", "(null)", "(none)"})
"""What Slurm puts in a job's reason when it has none (a fresh pending job says "None",
squeue prints "(None)"): shown as no reason at all, never as the word."""


@dataclass(frozen=True)
class SchedulerGone:
    """The scheduler's Last Will (or its clean goodbye) is the latest word of it: the retained
    job statuses are as it left them, and nothing requeues a job or answers ``restart-job``
    until it is back (docs/protocol.md, "Scheduler status")."""

    name: str
    since: float
    """When this console heard it go (receive clock, unix s)."""
    as_of: float | None
    """The newest job status it left (its own clock, unix s); None without one."""
    jobs: list[str]
    """Its jobs that read running (R, CG, RQ) all the same."""

    @property
    def text(self) -> str:
        who = f"scheduler {self.name}" if self.name else "the scheduler"
        as_of = "" if self.as_of is None else f" as of {utc_hms(self.as_of)}"
        running = (f"; {len(self.jobs)} job(s) read running{as_of} "
                   f"({', '.join(self.jobs[:3])}{' …' if len(self.jobs) > 3 else ''}), "
                   "which nothing updates now" if self.jobs else "")
        # "heard": a console started later reads the retained will when it connects, so the
        # time is when this console learnt it, not when the scheduler died.
        return (f"{who} offline (heard {utc_hms(self.since)}){running}; no job is requeued and "
                "restart-job gets no answer until it is back")

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "online": False, "since": round(self.since, 3),
                "jobs_as_of": None if self.as_of is None else round(self.as_of, 3),
                "jobs_running": self.jobs, "text": self.text}


LAST_UTC_S = TS_MS_MAX / 1000
"""The latest time ``datetime`` holds, the last ms the protocol takes (``TS_MS_MAX``, year
9999's): a stamp there read '??:??:??' when this stopped at its last whole second."""


def utc_at(ts: float) -> datetime:
    """``ts`` (unix s) as a UTC time, held within the years ``datetime`` holds: stamps from the
    network are validated only up to 2^53 ms, and a retained scheduler status stamped there
    (a forged or broken publisher) raised "year 287396 is out of range" in every console's
    tick, one that read a job's step against it (docs/protocol.md, "Rejected input")."""
    return datetime.fromtimestamp(min(max(ts, 0.0), LAST_UTC_S), UTC)


FIRST_UTC_S = datetime(1, 1, 1, tzinfo=UTC).timestamp()
"""The earliest time ``datetime`` holds."""

NO_HMS = "??:??:??"
"""``utc_hms`` of a stamp no calendar holds: as wide as a time, and not one."""


def utc_hms(ts: float) -> str:
    """``ts`` as ``HH:MM:SS`` UTC, or ``NO_HMS`` beyond the years ``datetime`` holds: a time
    clamped to the calendar's end read as any other ("job 41 hung (step 5 at 00:00:00)" of a
    scheduler stamped 2^53 ms), hiding a forged or garbage stamp from the operator, where the
    date ``utc_at`` gives (9999-12-31) says it itself."""
    if not FIRST_UTC_S <= ts <= LAST_UTC_S:  # NaN too
        return NO_HMS
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def scheduler_down(state: FleetState) -> bool:
    """The scheduler's going is believed: its will (or goodbye) is the latest word of it, not
    2 s young, and not one sent with the broker's own shutdown (docs/protocol.md)."""
    sched = state.scheduler
    if sched is None or sched.online:
        return False
    now = state.judged_at
    # A will this young may be a shutting-down broker's, as the nodes' are taken: a graceful
    # broker restart raised "scheduler offline" on every running job until the scheduler
    # reconnected (a review of this change).
    return not ((state.scheduler_will_doubted and state.sightless(now))
                or now - state.scheduler_since < WILL_BURST_S)


def scheduler_gone(state: FleetState) -> SchedulerGone | None:
    """Set when the scheduler said it went (``scheduler_down``); None while it is online or
    never said anything (a scheduler bridge without ``sched/status`` is taken as it comes)."""
    sched = state.scheduler
    if sched is None or not scheduler_down(state):
        return None
    stamps = [job.ts for job in state.jobs.values()]
    running = sorted(j.job_id for j in state.jobs.values() if j.state.value in HOLDING_NODES)
    return SchedulerGone(sched.name, state.scheduler_since,
                         max(stamps) / 1000 if stamps else None, running)


def job_reason(job: JobStatus) -> str:
    """The scheduler's reason for the job's state, or '' when it gave none: the jobs view,
    the interruption report and ``fleetdeck report`` all word a job's reason with this."""
    reason = job.reason.strip()
    return "" if reason.lower() in NO_REASON else reason


JOB_ALIVE_S = 30.0
"""A job counts as still stepping when its step advanced within this long (or 5 steps)."""


JOB_HUNG_S = 300.0
"""A running job's step may stand still this long before it is called hung: a checkpoint save
or an evaluation pass of a big model takes minutes with no step (a review: 30 s flagged every
save). NCCL's own watchdog waits 10 min."""


JOB_QUIET_S = 60.0
"""A running job's step standing still this long is said, not alarmed (``step_quiet``)."""


def step_window_s(job: JobStatus) -> float:
    """How long a stepping job may go between two steps this console sees."""
    return max(JOB_ALIVE_S, 5 * (job.step_time_ms or 0) / 1000)


def not_stepping(job: JobStatus, state: FleetState, now: float) -> float | None:
    """Seconds since a running job's step last advanced, as this console saw it, when that is
    longer than it takes the job to step as often as its scheduler reports it: the longest of
    ``JOB_HUNG_S``, 5 steps and three times its widest reported advance, in steps (at its
    step time) and in seconds (a scheduler that publishes at checkpoints moves the step 100
    at a time), and only once the scheduler was heard after that (``FleetState.sched_heard_at``:
    another job's status, its presence every 30 s).
    None while it steps or nothing can be said. A job the scheduler calls running that
    stopped stepping is hung (a rank deadlocked, a collective that never completes: Slurm
    still says R); its figures froze with no word of it.

    A job this console never saw advance is judged by the scheduler's clock instead
    (``_stopped_before_watch``). Not said of a job with a reason (it says why it waits), of the jobs
    of a scheduler that went offline (``scheduler_down``), nor of silence while this console
    was cut off from its broker, or the agents' and the scheduler's grace after
    (``FleetState.blind``)."""
    return _standing_still(job, state, now, JOB_HUNG_S)


def step_quiet(job: JobStatus, state: FleetState, now: float) -> float | None:
    """Seconds since a running job's step last advanced, once that is longer than
    ``JOB_QUIET_S`` (and than its own step and report spacing allow) but the job is not hung
    yet (``not_stepping``): said, not alarmed — a checkpoint save looks the same. A job that
    stopped read healthy for the 5 min before it was hung (a 3 a.m. drive)."""
    still = _standing_still(job, state, now, JOB_QUIET_S)
    if still is None or not_stepping(job, state, now) is not None:
        return None
    return still


def step_quiet_text(job: JobStatus, quiet: float, now: float,
                    delta: tuple[int, float | None] | None) -> str:
    """``no step for 95 s; hung at 14:11:57 if still none (step 13 at 14:06:57)``: when it
    turns into a hang, as a clock time ("hung if still so at 5m00s" read as a time of day: a
    drill), right after the "hung". The step last: the jobs view's STEP column has it, and its
    HELD UP column cut this line at 160 columns before the time of the hang (a review); with a
    long NODES cell it still did, "hung if none by 2…" (a 3 a.m. drive at 2,048 nodes)."""
    return not_stepping_text(job, quiet, now, then=(
        f"; hung at {utc_hms(step_quiet_hung_at(job, quiet, now, delta))} if still none"))


def step_quiet_hung_at(job: JobStatus, quiet: float, now: float,
                       delta: tuple[int, float | None] | None) -> float:
    """When a job whose step has stood still ``quiet`` s turns hung if no step comes: the
    time the TUI says ("hung at 14:11:57 if still none") and ``hung_at`` in ``status --json``
    (a script had the seconds it stood still, not when it would be called hung)."""
    return now - quiet + hang_window_s(job, delta)


def _standing_still(job: JobStatus, state: FleetState, now: float,
                    floor: float) -> float | None:
    """``not_stepping`` with the window's floor ``floor``."""
    if (job.state.value != "R" or job_reason(job) or state.sightless(now)
            or scheduler_down(state)):  # its jobs' figures are its last word: said so
        return None
    seen = state.job_stepped_at.get(job.job_id)
    if seen is None:
        return None
    if seen[1] is None:
        return _stopped_before_watch(job, state, floor)
    last = seen[1]
    since = last
    blind = state.blind
    if blind is not None and blind[1] is not None:
        since = max(since, blind[1])
    window = hang_window_s(job, state.job_step_delta.get(job.job_id), floor)
    if now - since <= window:
        if since > last and blind is not None and blind[1] is not None \
                and state.sched_heard_at >= blind[1]:
            # The outage hid nothing: the scheduler, heard since, stamps this job's last step
            # older than its newest word by more than the window. A 6 s broker restart put the
            # console's hang 2.5 min behind a one-shot `status` of the same moment, which reads
            # the scheduler's clock (a fault audit); so is its age: ``last`` is when this
            # console heard the retained status again, not when the step moved (a review: a
            # step 8 min old read 'no step for 30 s').
            return _stopped_before_watch(job, state, floor)
        return None
    if state.sched_heard_at < since + window:
        # Nothing heard from the scheduler since the window ran out: it may be the one that
        # went quiet (a bridge with no presence, a hung poll loop), not every job at once.
        return None
    return now - last


def hang_window_s(job: JobStatus, delta: tuple[int, float | None] | None,
                  floor: float = JOB_HUNG_S) -> float:
    """How long ``job``'s step may stand still before it is hung, given the widest advance of
    its run this console saw (``FleetState.job_step_delta``); with ``floor`` for the least."""
    steps, gap = delta if delta is not None else (1, None)
    step_s = (job.step_time_ms or 0) / 1000
    return max(floor, 5 * step_s, 3 * steps * step_s, 3 * (gap or 0))


def hung_when_it_ended(state: FleetState, job_id: str, at: float) -> bool:
    """The job's last run had stopped stepping when it ended at ``at`` (as ``not_stepping``
    would have said): an operator's restart of it ended a hang (console/interruptions.py)."""
    kept = state.job_run_stepped.get(job_id)
    if kept is None:
        return False
    run, stepped, delta = kept
    if stepped is None:
        # Never seen to step: by the scheduler's clock, as a console started after the hang
        # judged it (its restart was booked to the operator: a 3 a.m. drive).
        return _stopped_before_watch(run, state) is not None
    return at - stepped > hang_window_s(run, delta)


def _stopped_before_watch(job: JobStatus, state: FleetState,
                          floor: float = JOB_HUNG_S) -> float | None:
    """How long a job this console never saw step has not stepped, by the scheduler's own
    clock: its retained status (stamped when its step last moved: statuses go out on change)
    against the scheduler's newest word (another job's status, its presence every 30 s). A
    one-shot ``status``, or a console started after the hang, said nothing of a job whose
    status was minutes older than every other (a 3 a.m. drive). Only for a scheduler that
    reports steps (a step time), and allowing a status per checkpoint where the status sits
    on one: a scheduler that reports at checkpoints stamps a job once a checkpoint interval."""
    step_s = (job.step_time_ms or 0) / 1000
    if not step_s:
        return None
    # When the step last moved, where the scheduler says so: a status for another change (a
    # reason cleared) restamps ``ts`` (a fault audit: a hang dated 2.5 min late).
    age = (state.sched_newest_ts - _step_stamp(job)) / 1000
    # A status that sits on a checkpoint may be one of a scheduler that reports only there
    # (the offline simulator's recordings): the next may be a checkpoint interval away. One
    # between checkpoints is a scheduler that reports steps: the hang window is enough.
    at_checkpoint = job.step == job.last_checkpoint_step
    window = max(floor, 5 * step_s,
                 3 * job.checkpoint_every * step_s if at_checkpoint else 0.0)
    return age if age > window else None


def _step_stamp(job: JobStatus) -> int:
    """When the job's step last moved by the scheduler's word (ms): ``step_ts`` where it says
    so, else its status's ``ts``; never before its run started (a job out of a long wait
    stands at the step it waited at)."""
    return max(job.step_ts or job.ts, job.started_ts or 0)


def not_stepping_text(job: JobStatus, quiet: float, now: float, then: str = "") -> str:
    """``no step for 95 s (step 500 at 13:57:59)``: every view and the incident say it so;
    ``then`` goes before the step (``step_quiet_text``)."""
    return f"no step for {quiet:.0f} s{then} (step {job.step} at {utc_hms(now - quiet)})"


_UNKNOWN = object()
"""``shown_eta_s``'s ``quiet`` and ``still`` not given: it works them out."""


def shown_eta_s(job: JobStatus, state: FleetState, now: float, quiet: object = _UNKNOWN,
                still: object = _UNKNOWN) -> float | None:
    """The job's time to its last step as every view and ``status --json`` say it: the
    scheduler's ``eta_s``, but none while the step stands still (``step_quiet``, or hung:
    ``not_stepping``): the figure is its last step's pace, and a job that does not step ends
    at no known time (the jobs view read "ETA 11m09s" beside "no step for 316 s": a fault
    audit). Nor while nothing says whether it steps: a job paused by a reason (a link down),
    a scheduler gone (its figures are its last word) or this console cut off from its broker
    (a job paused on "gpu0002 mlx5_ib3 link down" read "ETA 8m20s" for 200 s: a review).
    ``quiet`` and ``still``: ``not_stepping`` and ``step_quiet`` where the caller has them
    (the jobs view and ``status --json`` do, for every job on every refresh)."""
    if job.eta_s is None:
        return None
    if job_reason(job) or scheduler_down(state) or state.sightless(now):
        return None
    if quiet is _UNKNOWN:
        quiet = not_stepping(job, state, now)
    if quiet is not None:
        return None
    if still is _UNKNOWN:
        still = _standing_still(job, state, now, JOB_QUIET_S)
    return job.eta_s if still is None else None


REQUEUE_GRACE_S = 10.0
"""A job the scheduler reported NF (a node failed under it) is requeued a moment later when it
asked to be (Slurm's RQ; the simulator's next tick). One whose status has stood at NF this long
by the scheduler's clock is not: it waits for an operator, as a failed one does."""

FAILED_LAPSE_S = 1800.0
"""A failed job no one restarted in this long, by the scheduler's clock, is no longer work
being lost now: its owner has moved on or will restart it when they will. Slurm withdraws a
finished job after MinJobAge (300 s); the simulator never does, and a user's own crash
(NonZeroExitCode, naming no node) stayed an error "losing work now" for ever (a review)."""


@dataclass(frozen=True, slots=True)
class FailedJob:
    """A job the scheduler ended failed that nothing brings back by itself: an operator
    restarts it from its checkpoint (``restart-job``). A rank killed by XID 48 left job 4102
    F in no incident and on no line of `status` (a fault audit)."""
    job_id: str
    state: str
    reason: str
    nodes: tuple[str, ...]
    """The fleet's nodes its reason names (the node whose rank died), sorted."""
    restart: str
    """``restart-job 4102 from its checkpoint at step 200``."""
    drain: tuple[str, ...] = ()
    """Failed by a fault of their own and not drained yet, of ``nodes`` and of the job's other
    nodes that failed with it (``struck_job``): drained first, so the restart does not land
    there again."""
    at: float = 0.0
    """When it failed, by the scheduler's clock (its status's ``ts``, unix s)."""
    lapsed: str = ""
    """Why it no longer loses work now, '' while it does: "not restarted in 30 min" by the
    scheduler's clock (``FAILED_LAPSE_S``), or "gpu0002 runs job 43 now"."""
    sched_gone: bool = False
    """The scheduler's going is its latest word (``scheduler_down``): its F is as it left it,
    and nothing answers a ``restart-job`` until it is back (docs/protocol.md, "Scheduler
    status"). "then restart-job 41" read under "restart-job gets no answer until it is
    back" (a review)."""
    struck: tuple[str, ...] = ()
    """The job's other nodes that failed with it (``struck_job``), drained or not, sorted:
    with ``nodes``, where it failed (the jobs view's enter opens them)."""

    @property
    def head(self) -> str:
        """``job 41 failed on gpu0002``: ``what`` without the scheduler's reason."""
        where = f" on {compress(list(self.nodes))}" if self.nodes else ""
        what = "failed" if self.state == "F" else "ended by a node failure"
        again = "" if self.state == "F" else ", not requeued"
        return f"job {self.job_id} {what}{where}{again}"

    @property
    def what(self) -> str:
        """``job 41 failed on gpu0002 (<reason>)``: ``text`` without its lapse."""
        return self.head + (f" ({self.reason})" if self.reason else "")

    @property
    def text(self) -> str:
        return self.what + (f"; {self.lapsed}" if self.lapsed else "")

    @property
    def action(self) -> str:
        first = f"drain {compress(list(self.drain))}, then " if self.drain else ""
        return f"{first}{self.restart_once()}"

    def said_on(self, title: str) -> str:
        """``title`` of an incident or a top problem that holds this job, with what it is now:
        nodes that failed together in the job said "job 4102 is F now" (one wording for the
        incidents and the overview's rows)."""
        return title.replace(f"; job {self.job_id} is {self.state} now", "") + f"; {self.text}"

    def restart_once(self, drained: tuple[str, ...] = ()) -> str:
        """``restart`` with what it waits for: the scheduler back (``sched_gone``), and
        ``drained`` drained (nodes another incident drains: "once gpu[0003,0007] are
        drained" on each, one restart, not one per node's incident)."""
        waits = ["the scheduler is back"] if self.sched_gone else []
        if drained:
            waits.append(f"{compress(list(drained))} {'is' if len(drained) == 1 else 'are'} "
                         "drained")
        return self.restart + (f" once {' and '.join(waits)}" if waits else "")

    def as_json(self) -> dict[str, object]:
        return {"state": self.state, "reason": self.reason, "nodes": list(self.nodes),
                "text": self.text, "action": self.action, "lapsed": self.lapsed or None}




def restart_point(job: JobStatus) -> str:
    """Where a ``restart-job`` takes the job from: "from its checkpoint at step 400", or "(no
    checkpoint yet: from step 0)". One test of a checkpoint for every incident that says it (a
    hung job's looked at the checkpoint's time only, a failed one's at its step too: a
    review)."""
    if job.last_checkpoint_ts is not None or job.last_checkpoint_step:
        return f"from its checkpoint at step {job.last_checkpoint_step}"
    return "(no checkpoint yet: from step 0)"


def failed_job(job: JobStatus, state: FleetState) -> FailedJob | None:
    """The job ended failed (F; NF not requeued within ``REQUEUE_GRACE_S``) and waits for an
    operator's restart; None otherwise. It is so until the scheduler says otherwise: a restart
    (``restart-job``: RQ, then PD and R) or a cancel ends it; after ``FAILED_LAPSE_S``, or once
    one of its nodes runs another job, it is ``lapsed``: said, no longer work lost now."""
    code = job.state.value
    if code not in FAILING_STATES:
        return None
    age = (state.sched_newest_ts - job.ts) / 1000
    # By the scheduler's clock: its newest word (another job's status, its presence) is this
    # long after the NF, and no requeue came.
    if code == "NF" and age < REQUEUE_GRACE_S:
        return None
    reason = job_reason(job)
    nodes = tuple(sorted(n for n in reason_words(reason) if n in state.nodes))
    # Its other nodes that failed with it too (``struck_job``): the reason names the rank
    # that died first, and a restart placed on another failed node fails again. "drain
    # gpu0002, then restart-job 41" left out gpu0001 and gpu0003, failed in 41 by the same
    # XID 79, and each incident's restart waited on gpu0002 alone (a review).
    at = job.ts / 1000
    named = set(nodes)
    struck = [n for n in state.not_ok if n not in named and (st := state.nodes.get(n)) is not None
              and st.verdict is Verdict.FAILED and _failed_by(st, at)
              and struck_job(st, state) == job.job_id]
    drain = tuple(sorted(n for n in (*nodes, *struck)
                         if (st := state.nodes[n]).verdict is Verdict.FAILED
                         and st.drain.state is DrainState.NONE))
    since = restart_point(job)
    lapsed = ""
    if age >= FAILED_LAPSE_S:
        lapsed = f"not restarted in {age / 60:.0f} min"
    else:
        # Its nodes given to other work: the scheduler has moved on, and so has its owner
        # (Slurm keeps the nodes an F job ran on in its status; the reason names the one whose
        # rank died).
        for n in sorted({*job.nodes, *nodes}):
            other = holding_job(state, n)
            if other is not None and other != job.job_id:
                lapsed = f"{n} runs job {other} now"
                break
        else:
            # Once moved on, for good: that work requeued off the node (its link went down)
            # made the failure an error "losing work now" again, said on the node's row as if
            # the later fault had failed it (a scenario run, docs/architecture.md). Recorded
            # as the statuses are applied (``FleetState._note_lapses``), so that a look at any
            # moment reads the same: recorded here, a view that had looked while the other
            # work ran said lapsed, a replay sought past it or a `status` said losing work.
            held = state.failed_lapsed.get(job.job_id)
            if held is not None and held[0] == job.ts:
                lapsed = f"{held[1]} ran job {held[2]} since"
            else:
                # A console that did not see it (restarted): the job a node's telemetry
                # stopped naming after the failure (``NodeState.left_job``, kept in the store).
                for n in sorted({*job.nodes, *nodes}):
                    left = st.left_job if (st := state.nodes.get(n)) is not None else None
                    if left is not None and left[0] != job.job_id and left[1] > job.ts / 1000:
                        lapsed = f"{n} ran job {left[0]} since"
                        break
    return FailedJob(job.job_id, code, reason, nodes, f"restart-job {job.job_id} {since}",
                     drain, job.ts / 1000, lapsed, scheduler_down(state), tuple(sorted(struck)))


_REASON_XID = re.compile(r"\bXid (\d+)\b", re.IGNORECASE)


def reason_xid(reason: str) -> int | None:
    """The XID a crashed rank's reason names (``… (Xid 13)``), the last where it names more."""
    found = _REASON_XID.findall(reason)
    return int(found[-1]) if found else None


def struck_job(st: NodeState, state: FleetState) -> str | None:
    """The job a failed node was in when it failed: the one it is in now, else the one its
    telemetry stopped naming within ``JOB_WINDOW_S`` of its verdict's change (the scheduler
    takes a job off a node whose rank died, and requeues it elsewhere, a sample or two after
    the fault). None for a node a console met already idle: nothing it heard names the job."""
    jid = own_job(st, state)
    if jid is not None:
        return jid
    return st.left_when_changed()


def _failed_by(st: NodeState, at: float) -> bool:
    """The node's fault now began by ``JOB_WINDOW_S`` after ``at`` (a job's failure: the
    node's next sample often comes after the scheduler's word), or at a time this console
    does not know (found so when first heard): it may be what failed the job."""
    began = st.changed_at or st.last_rx or st.first_seen or 0.0
    return not st.change_seen or began <= at + JOB_WINDOW_S


def failed_under(failed: FailedJob, state: FleetState) -> list[str]:
    """Of the nodes a failed job's reason names, those whose fault now began when the job
    failed (up to ``JOB_WINDOW_S`` after it: the node's next sample often comes after the
    scheduler's word), or at a time this console does not know (found so when first heard):
    the fault that most likely failed it. A later fault of the node (a throttle two minutes
    after its XID 48 was repaired) is not what failed the job (a review)."""
    return [n for n in failed.nodes if (st := state.nodes.get(n)) is not None
            and st.verdict is not Verdict.OK and _failed_by(st, failed.at)]


def application_fault(failed: FailedJob, state: FleetState) -> str:
    """Why the application, not a node, most likely failed the job, or '' when nothing says
    so ("Xid 13: the application's fault, most likely"): its reason names the
    application's own XID (``xids.APPLICATION``: 13, 31, 43), or the job failed (F, not NF: a
    node's failure by the scheduler's word) naming no XID, and each node it names read ok
    from before the failure until now, with no drain or warning since. A node read ok now
    proves nothing: gpu0002 failed by XID 48, drained and repaired read "healthy: the
    application's fault" (a review)."""
    code = reason_xid(failed.reason)
    if code in xids.APPLICATION:
        return f"Xid {code}: the application's fault, most likely"
    # A hardware XID names the node's fault; NF is the scheduler's word that a node failed.
    if not failed.nodes or code is not None or failed.state != "F":
        return ""
    for n in failed.nodes:
        st = state.nodes.get(n)
        if (st is None or st.verdict is not Verdict.OK or st.drain.state is not DrainState.NONE
                # ok only since after the failure (or first heard then): what it read at the
                # failure is not known here
                or (st.changed_at or st.first_seen or failed.at) > failed.at):
            return ""
        if any(ev.ts / 1000 >= failed.at and (ev.kind == "drain"
                                              or ev.severity.value != "info")
               for ev in st.events):
            return ""  # drained and resumed, or a warning that cleared, since the failure
    many = len(failed.nodes) > 1
    return (f"{compress(list(failed.nodes))} {'have' if many else 'has'} read healthy "
            "throughout: the application's fault, most likely")


NodeRank = tuple[bool, bool, bool, int, float, str]


def worst_first(state: FleetState) -> Callable[[NodeState], NodeRank]:
    """Sort key of the nodes' one worst-first order: the overview's top problems and its
    grid's ``w`` both read it. A node already draining or drained (in hand) after the rest;
    then errors (failed, offline) before warnings and, among them, a node that stops a
    running job first, as the incidents view orders their incidents ("what loses work now",
    one rule for all: docs/architecture.md "Worst first"); then the verdict, the oldest (when
    it took that verdict), the name. A failed idle node with more findings came above one
    that held up a job, and ``w`` went first to an offline node whose job still stepped (a
    newcomer's run). Not how many findings: a flapping port's N1 comes and goes with each
    flap, and two failed nodes swapped places in the top problems every few seconds, ``w``
    going to the one the list had just put second (a 3 a.m. drive); the time a node took its
    verdict moves only when the verdict does."""
    holding = {n for job in state.jobs.values() if job.state.value in HOLDING_NODES
               for n in job.nodes}

    def rank(s: NodeState) -> NodeRank:
        error = s.verdict in (Verdict.FAILED, Verdict.OFFLINE) and not s.job_stepping
        losing = error and (s.node_id in holding or own_job(s, state) is not None)
        return (s.drain.state is not DrainState.NONE, not error, not losing,
                -VERDICT_ORDER[s.verdict], s.changed_at, s.node_id)

    return rank


def own_job(st: NodeState, state: FleetState) -> str | None:
    """The job the node's own telemetry names, unless the scheduler's status of that job says
    it does not hold this node now: a dead node's last sample kept it "in job 4102" after the
    scheduler had requeued 4102 onto other nodes (an SRE drill). A job the scheduler has not
    told of stays the node's word. A silent agent's node whose job still steps there is in that
    job (``job_stepping``): its JOB read empty while its ranks ran on (an SRE drill)."""
    jid = st.job_id or st.job_stepping or None
    if jid is None and st.sample is None:
        # Silent since before this console started: no sample names its job, but the
        # scheduler's does ("job": null for a dead agent's node in job 4104, an SRE drill).
        jid = holding_job(state, st.node_id)
    if jid is None:
        return None
    job = state.jobs.get(jid)
    if job is not None and (job.state.value not in HOLDING_NODES
                            or st.node_id not in state.job_nodes(job)):
        return None
    return jid


def holding_job(state: FleetState, node_id: str) -> str | None:
    """A job the scheduler says holds ``node_id`` now, from an index made once per change of
    the jobs (``FleetState.jobs_revision``)."""
    cached = state.holding_index
    if cached is None or cached[0] != state.jobs_revision:
        index: dict[str, str] = {}
        for job in state.jobs.values():
            if job.state.value in HOLDING_NODES:
                for node in job.nodes:
                    index.setdefault(node, job.job_id)
        cached = state.holding_index = (state.jobs_revision, index)
    return cached[1].get(node_id)


UNDECIDED_MAX_S = 15.0
"""How long a one-shot watch waits, at most, to see a silent node's job step (or not)."""


def undecided_silent(state: FleetState, watched_s: float) -> list[str]:
    """Silent nodes whose running job this watch has not yet seen step, while a step is still
    due (two of its step times and a second, at most ``UNDECIDED_MAX_S``): whether the job
    steps on without the node's agent (an agent death: "do not drain") or stalled with it
    (the node died) is not known yet. A 3.5 s `status` told the two apart in 4 of 6 runs on a
    job stepping every 3 s (an SRE drill)."""
    out = []
    for node_id, st in state.nodes.items():
        if not (st.online is False or st.stale) or st.job_stepping:
            continue
        jid = own_job(st, state)
        job = state.jobs.get(jid) if jid is not None else None
        if job is None or job.state.value != "R" or job_reason(job):
            continue
        seen = state.job_stepped_at.get(job.job_id)
        if seen is not None and seen[1] is not None:
            continue  # it stepped in this watch: judged on that
        step_s = (job.step_time_ms or 0) / 1000
        if (state.sched_newest_ts - _step_stamp(job)) / 1000 > max(3 * step_s, 5.0):
            # The scheduler said newer things since this job's last status: it stopped before
            # the watch (a hung job made every `status` wait the whole 15 s: an SRE drill).
            continue
        due = 2 * step_s + 1.0
        if watched_s < min(due, UNDECIDED_MAX_S):
            out.append(node_id)
    return out


def never_fits(job: JobStatus, state: FleetState) -> str:
    """Why a pending job can never start on this cluster, or '': it asks for more nodes than
    the cluster has (a 64-node job on 48 nodes sat "PD (Resources)" beside 128 free GPUs,
    with nothing to say it would wait for ever: a jobs audit)."""
    wanted = job.nodes_wanted
    if job.state.value != "PD" or not wanted or not state.nodes or wanted <= len(state.nodes):
        return ""
    if not state.nodes_counted():
        # The nodes heard so far, not the cluster's (the connect burst still arriving, or cut
        # in the births): a job that fits read "it can never start here" and was left out of
        # "pending ahead" (a review; ``FleetState.nodes_counted``).
        return ""
    return f"needs {wanted} nodes; the cluster has {len(state.nodes)}: it can never start here"


def nodes_wanted_text(job: JobStatus, state: FleetState) -> str:
    """How many nodes a pending job waits for, and whether it can ever start here
    (``never_fits``); more than the nodes heard while their count is not the cluster's yet,
    how many were heard, and no verdict; '' for a job not pending or that does not say."""
    wanted = job.nodes_wanted
    if job.state.value != "PD" or not wanted:
        return ""
    never = never_fits(job, state)
    if never:
        return never
    wants = f"needs {wanted} node{'s' if wanted != 1 else ''}"
    heard = len(state.nodes)
    if heard and wanted > heard and not state.nodes_counted():
        return f"{wants}; {heard} heard so far"
    return wants


def _running_jobs_by_node(state: FleetState) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for job in state.jobs.values():
        if job.state.value == "R":
            for node in job.nodes:
                out.setdefault(node, []).append(job.job_id)
    return out


def _stepping(state: FleetState, st: NodeState, jobs: "list[str] | tuple[()]",
              now: float) -> str:
    # A step heard after the node's last sample by more than two of its intervals: all that
    # a broker hung under SIGSTOP still delivered came within one (its last job status a few
    # ms after the node's last sample), and every node of the job read "the agent died, not
    # the node: restart the agent" (a drill). A node heard only from its retained status:
    # from when that came.
    silent_since = (st.last_rx + 2 * st.interval_s if st.last_rx is not None
                    else st.status_ts or 0.0)
    for job_id in jobs:
        seen = state.job_stepped_at.get(job_id)
        job = state.jobs[job_id]
        if seen is None or seen[1] is None:
            continue
        if seen[1] > silent_since and now - seen[1] <= step_window_s(job):
            return job_id
    return ""


@dataclass(frozen=True)
class Straggler:
    job_id: str
    rank: int
    node: str
    slower_pct: float
    """How much slower than the job's median step this rank is (%)."""
    cause: str
    also: "tuple[Straggler, ...]" = ()
    """Other slow ranks, each on a node of its own with a cause there: a job with a throttled
    GPU on one node and a storming port on another named only the port's, and draining that
    node recovered half the slowdown (a fault audit)."""
    causes: tuple[str, ...] = ()
    """``cause``'s parts as codes (``CAUSE_CODES``), in its order, as judged."""
    power: "PowerCap | None" = None
    """The GPU power-capped by software that ``cause`` names, with its limit against its
    peers', as judged: what the node's action, the incident and ``status --json`` read, not
    the words."""

    @property
    def own_text(self) -> str:
        return f"rank {self.rank} {self.node} +{self.slower_pct:.0f}%: {self.cause}"

    @property
    def text(self) -> str:
        return "; also ".join(s.own_text for s in (self, *self.also))

    @property
    def short(self) -> str:
        """The slow nodes first, then the first one's cause: the overview's jobs panel cut
        the text after the first cause, and the second node was never seen (a 3 a.m. drive)."""
        nodes = ", ".join(f"{s.node} +{s.slower_pct:.0f}%" for s in (self, *self.also))
        return f"{nodes}: {self.cause}"

    @property
    def nodes(self) -> list[str]:
        return [s.node for s in (self, *self.also)]

    def of_node(self, node: str) -> "Straggler | None":
        return next((s for s in (self, *self.also) if s.node == node), None)

    def as_json(self) -> dict[str, object]:
        # ``causes``/``power_limit`` beside ``cause``: a script told a power cap from a
        # throttle only by matching the prose (docs/protocol.md, "status --json").
        return {**self._own_json(), "text": self.text,
                "also": [{**s._own_json(), "text": s.own_text} for s in self.also]}

    def _own_json(self) -> dict[str, object]:
        p = self.power
        return {"rank": self.rank, "node": self.node, "slower_pct": round(self.slower_pct, 1),
                "cause": self.cause, "causes": list(self.causes),
                "power_limit": None if p is None else p.limit,
                "power_limit_w": None if p is None else p.limit_w,
                "peer_limit_w": None if p is None else p.peer_limit_w}


STRAGGLER_MIN = 0.03
"""Slower than the median by less than this is never named (noise, whatever the spread)."""
SPREAD_FACTOR = 3.0
"""A clear outlier is this many times further from the median than the next slowest node."""
HEALTHY_SPREAD = 0.005


def straggler(job: JobStatus, state: FleetState) -> Straggler | None:
    """The job's slowest rank when it is a clear outlier against the job's own spread, or is
    slower and has a cause on its node; a fixed 1.2x median missed a rank 12 % slower (one
    throttled GPU) that slows the whole job by 12 %."""
    if not job.slowest or job.state.value != "R":
        return None
    if job_reason(job):
        # A running job with a reason is stalled (a node gone, a port down: docs/protocol.md):
        # it waits on that, and its last step's slowest rank would hide why it stopped.
        return None
    worst = job.slowest[0]
    median = job.median_step_time_ms
    if median is None or median <= 0:
        return None
    median = min(median, _other_node_time(job, state, worst.node) or median)
    slower = worst.step_time_ms / median - 1
    if slower < STRAGGLER_MIN:
        return None
    judged = judge_cause(state, worst.node)
    cause = judged.text
    others = [r.step_time_ms / median - 1 for r in job.slowest[1:] if r.node != worst.node]
    if others:
        outlier = slower >= SPREAD_FACTOR * max(others[0], HEALTHY_SPREAD)
    else:
        outlier = slower >= STRAGGLER_FACTOR - 1
    has_cause = not judged.none
    if not (outlier or has_cause or slower >= STRAGGLER_FACTOR - 1):
        return None
    also = []
    seen = {worst.node}
    for r in job.slowest[1:]:
        more = r.step_time_ms / median - 1
        if r.node in seen or more < STRAGGLER_MIN:
            continue
        seen.add(r.node)
        why = judge_cause(state, r.node)
        if not why.none:
            also.append(Straggler(job.job_id, r.rank, r.node, more * 100, why.text,
                                  causes=why.codes, power=why.power))
    return Straggler(job.job_id, worst.rank, worst.node, slower * 100, cause, tuple(also),
                     causes=judged.codes, power=judged.power)


def _other_node_time(job: JobStatus, state: FleetState, slow: str) -> float | None:
    """The step time of the other node of a 2-node job whose slowest ranks are all on ``slow``
    (its own sample's ``job.step_time_ms``, the slowest of its ranks), or None: there half the
    ranks are the slow node's, and the median the scheduler gives lies between the two nodes
    (an NVLink fault slowing every rank of one node of two read "+17%" of a job slowed 37 %:
    a jobs audit). Of more nodes, the median is a healthy rank's. Only a fresh sample is a
    baseline: a node stale or offline kept its step time of then (a review)."""
    if len(job.nodes) != 2 or any(r.node != slow for r in job.slowest):
        return None
    other = state.nodes.get(next(n for n in job.nodes if n != slow), None)
    if other is None or other.stale or other.online is False:
        return None
    on = None if other.sample is None else other.sample.job
    if on is None or on.id != job.job_id or not on.step_time_ms:
        return None
    return on.step_time_ms


POWER_CAPPED = "GPU power-capped by software"


def _power_capped(st: NodeState) -> list[GpuSample]:
    """The node's GPUs at work whose latest sample says SW power cap."""
    t = st.telemetry
    if t is None:
        return []
    return [g for g in t.gpus
            if g.present and (g.clock_event_reasons or 0) & SW_POWER_CAP
            and not (g.clock_event_reasons or 0) & 0x1]  # GPU idle: no work slowed


PEER_LIMITS_READ = 64
"""How many of a job's other nodes a capped straggler's limit is compared with: a limit set
by a power budget or ``nvidia-smi -pl`` on one node shows against any of them, and a 4,096-node
job's every GPU is not read for it each time the straggler is judged."""
LIMIT_LOWERED = "below its job's other nodes'"
"""Said in a capped straggler's cause when its limit is lower than its peers': only then is
"restore the limit" the fix (at the stock limit a SW power cap is the GPU working as set, as
docs/domain.md §3 says of bit 0x4, and the chip itself is slower)."""
LIMIT_AS_PEERS = "as its job's other nodes'"
"""Said in a capped straggler's cause when its limit is its peers': nothing was lowered."""
LIMIT_LOWER_BY = 0.95
"""A capped GPU's limit at or below this share of its peers' highest was lowered ("lower by
5 % or more", docs/architecture.md): 665 W of 700 read "as its job's other nodes'"."""
PowerLimit = Literal["lowered", "as_peers", "unknown"]
"""A capped GPU's limit against its job's other nodes': ``lowered`` (put it back), ``as_peers``
(nothing to restore) or ``unknown`` (its own or its peers' limit not read)."""


@dataclass(frozen=True)
class PowerCap:
    """A GPU power-capped by software (bit 0x4) that slows a rank, judged against its job's
    other nodes' limit. The judgement was carried only in the cause's words, and the node's
    action, the incident and ``status --json`` each found it again by matching them; a
    GPU reader's error quoted in the cause (G1, the agent's own text) could say anything."""

    gpu: int
    limit_w: float | None
    peer_limit_w: float | None
    limit: PowerLimit
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None

    @classmethod
    def of(cls, g: GpuSample, peers_w: float | None) -> "PowerCap":
        limit: PowerLimit = "unknown"
        if g.power_limit_w is not None and peers_w is not None:
            limit = "lowered" if g.power_limit_w <= LIMIT_LOWER_BY * peers_w else "as_peers"
        return cls(g.index, g.power_limit_w, peers_w, limit, g.sm_clock_mhz,
                   g.sm_clock_max_mhz)

    @property
    def text(self) -> str:
        """``gpu3 sw power cap: 1350 of 1980 MHz, limit 450 W, below its job's other nodes'
        700 W``, of what the sample has (the peers' limit where it is known: lowered, or the
        same)."""
        said = [f"gpu{self.gpu} sw power cap"]
        if self.sm_clock_mhz is not None and self.sm_clock_max_mhz:
            said.append(f"{self.sm_clock_mhz:.0f} of {self.sm_clock_max_mhz:.0f} MHz")
        if self.limit_w is not None:
            limit = f"limit {self.limit_w:.0f} W"
            if self.limit == "lowered":
                limit += f", {LIMIT_LOWERED} {self.peer_limit_w:.0f} W"
            elif self.limit == "as_peers":
                limit += f", {LIMIT_AS_PEERS}"
            said.append(limit)
        return said[0] + (": " + ", ".join(said[1:]) if len(said) > 1 else "")


def peer_limit_w(st: NodeState, state: FleetState) -> float | None:
    """The highest power limit of a present GPU on up to ``PEER_LIMITS_READ`` of the other
    nodes of ``st``'s job; None when none is known."""
    jid = own_job(st, state) or holding_job(state, st.node_id)
    job = state.jobs.get(jid) if jid is not None else None
    if job is None:
        return None
    best: float | None = None
    read = 0
    for node in job.nodes:
        other = state.nodes.get(node) if node != st.node_id else None
        if other is None or (t := other.telemetry) is None:
            continue
        read += 1
        limit = node_power_limit_w(other, t)
        if limit is not None and (best is None or limit > best):
            best = limit
        if read >= PEER_LIMITS_READ:
            break
    return best


def node_power_limit_w(st: NodeState, t: Telemetry) -> float | None:
    """The highest power limit of a present GPU of ``t`` (``st``'s sample); of a node known
    from digests, which carry a GPU's limit only where it is capped, its collector's word for
    it (``Digest.power_limit_w``): without it a capped straggler's limit was "unknown" on
    digests and "below its job's other nodes' 700 W" on raw telemetry (docs/protocol.md,
    "Digests")."""
    best: float | None = None
    for g in t.gpus:
        if g.present and g.power_limit_w is not None and (best is None
                                                          or g.power_limit_w > best):
            best = g.power_limit_w
    d = st.digest
    if d is not None and d.power_limit_w is not None and (best is None
                                                          or d.power_limit_w > best):
        best = d.power_limit_w
    return best


@dataclass(frozen=True)
class Cause:
    """Why a rank is slow, as ``judge_cause`` found it: the words, their parts as codes, and
    the power cap it names (None where it names none)."""

    text: str
    codes: tuple[str, ...]
    power: PowerCap | None = None

    @property
    def none(self) -> bool:
        """No cause on the node (no finding, or the node unknown): a slow rank there is named
        only when it stands out on its own."""
        return self.codes in ((CAUSE_CODES[NO_FINDING],), (CAUSE_CODES[NODE_UNKNOWN],))


def _cause(words: str) -> Cause:
    return Cause(words, (CAUSE_CODES[words],))


def likely_cause(state: FleetState, node: str) -> str:
    """The words of ``judge_cause``."""
    return judge_cause(state, node).text


def judge_cause(state: FleetState, node: str) -> Cause:
    """Why a rank on ``node`` is slow: its node's throttled GPU, degraded port and GPU
    power-capped by software, each that is there, else a GPU fault, else none. The codes and
    the cap are kept as judged: read back from the words, a cause whose quoted finding said
    " + " or a cap's words (G1 quotes the agent's GPU reader, any text) read as more parts."""
    st = state.nodes.get(node)
    if st is None:
        return _cause(NODE_UNKNOWN)
    if st.online is False or st.stale:
        return _cause(NOT_RESPONDING)
    throttled = [f for f in st.findings if f.rule in ("G12", "G13")]
    # A recovered switch's link errors (its ports up again at full rate) slow no rank: named
    # first, they read "degraded port + GPU power-capped" of a rank only its cap slowed, and
    # blamed the switch for it (a fault audit: a rail flap under a capped job).
    ports = [f for f in st.findings if f.rule.startswith("N")
             and not (st.behind_recovered and st.switch_owns(f))]
    # Both named when both are there: a throttled GPU and a storming port on one node each
    # slow its rank, and naming the GPU alone hid the port (a fault audit).
    causes: list[str] = []
    codes: list[str] = []
    if throttled:
        causes.append(f"{THROTTLED_GPU} ({throttled[0].component} {throttled[0].text})")
        codes.append(CAUSE_CODES[THROTTLED_GPU])
    if ports:
        causes.append(f"{DEGRADED_PORT} ({ports[0].component} {ports[0].text})")
        codes.append(CAUSE_CODES[DEGRADED_PORT])
    held = {f.component for f in throttled}
    capped = [g for g in _power_capped(st) if f"gpu{g.index}" not in held]
    power = None
    if capped:
        power = PowerCap.of(capped[0], peer_limit_w(st, state))
        causes.append(f"{POWER_CAPPED} ({power.text})")
        codes.append(CAUSE_CODES[POWER_CAPPED])
    if causes:
        return Cause(CAUSE_JOIN.join(causes), tuple(codes), power)
    gpus = [f for f in st.findings if f.rule.startswith("G")]
    if gpus:
        return Cause(f"{GPU_FAULT} ({gpus[0]})", (CAUSE_CODES[GPU_FAULT],))
    return _cause(NO_FINDING)


THROTTLED_GPU = "throttled GPU"
DEGRADED_PORT = "degraded port"
GPU_FAULT = "GPU fault"
NOT_RESPONDING = "node not responding"
NODE_UNKNOWN = "node unknown"
NO_FINDING = "no finding on that node"
CAUSE_JOIN = " + "
CAUSE_CODES = {THROTTLED_GPU: "throttled_gpu", DEGRADED_PORT: "degraded_port",
               POWER_CAPPED: "power_capped", GPU_FAULT: "gpu_fault",
               NOT_RESPONDING: "not_responding", NODE_UNKNOWN: "node_unknown",
               NO_FINDING: "no_finding"}
"""A straggler cause's code for scripts, of the words ``judge_cause`` leads each part with:
the codes are stable keys (docs/protocol.md), the words may change with the prose."""


def port_past(st: NodeState, key: str) -> PortPast | None:
    """What the rules that outlive a fault read of the port ``key`` (``port_key``) had: on a
    console on digests the owning collector's history, as its digest carries it (this
    console's holds at most the samples of an open detail), else this console's; None when
    neither knows the port. A console on digests had none: it said nothing held a job up
    while its node's link flapped, and held a job up by a node whose symbol errors had
    stopped, where a console on raw telemetry said the opposite (a drill)."""
    d = st.digest
    if d is not None:
        for p in d.ports:
            if (p.dev if p.port == 1 else f"{p.dev}:{p.port}") == key:
                return PortPast.of_digest(p)
        return None
    h = st.history.ports.get(key)
    return None if h is None else PortPast.of(h)


def _symbols_quiet(h: PortPast | None, now_ms: int) -> bool:
    """No symbol error on a port this console has watched for ``SYMBOL_QUIET_S`` (a saturated
    counter tells nothing: N6). A trickle that keeps N3 above its 120/h moves the counter
    every 30 s on average, so it never reads quiet."""
    if h is None or h.storm or h.saturated:
        return False
    quiet_ms = SYMBOL_QUIET_S * 1000
    # From this console's own first sample of the port, not the store's oldest minute: a
    # console restarted after a trickle went on unseen read it quiet at its first sample.
    if not h.first_ms or now_ms - h.first_ms < quiet_ms:
        return False
    return h.symbol_ms is None or now_ms - h.symbol_ms >= quiet_ms


def _no_symbols_since(h: PortPast | None, repaired_s: float, now_ms: int) -> bool:
    """No symbol error on the port since its agent said it was repaired, judged by a sample
    after that: a repaired storm read "drain (requeue its jobs)" and held its job up for the
    ``SYMBOL_QUIET_S`` after the repair (a fault audit)."""
    if h is None or h.saturated or now_ms <= repaired_s * 1000:
        return False
    return h.symbol_ms is None or h.symbol_ms < repaired_s * 1000


def ports_up(t: Telemetry) -> dict[str, str]:
    """The sample's ports that are up (ACTIVE, LinkUp), by the component name findings use."""
    return {f"{p.dev}:{p.port}": port_key(p) for p in t.ib_ports
            if p.state == "ACTIVE" and p.phys_state in (None, "LinkUp")}


def held_only_since(st: NodeState, rules: frozenset[str] = QUIET_HELD_RULES) -> float | None:
    """None unless every drain-class finding of the node is a port that is up again, held
    only by ``rules`` (N2/N3's hour by default; N5's day, checked as N2's, for whether it
    holds a job up now); then when it was repaired (its agent's ``repair`` event since it went
    failed), or 0.0 when no repair was said."""
    drains = [f for f in own_findings(st) if f.severity is Severity.DRAIN]
    if not drains or any(f.rule not in rules for f in drains):
        return None
    t = st.telemetry
    if t is None:
        return None
    up = ports_up(t)
    if any(f.component not in up for f in drains):
        return None
    repairs = _repairs_since_failed(st)
    repaired = max(repairs) if repairs else None
    for f in drains:
        h = port_past(st, up[f.component])
        if f.rule in ("N2", "N5"):
            # Up for HELD_STEADY_S since its last fatal counter moved: a flapping link is up
            # between its drops, and the advice swung between "links up again: drain it
            # (finish)" and "drain (requeue its jobs)" with it, the drain dialog opening on
            # the other one (a newcomer's run). A drop this console did not see (the agent's
            # hour, a one-shot status) is judged by the link as it is: a flapping one reads
            # flapping by its own counters (port_status).
            last = h.fatal_ms if h is not None else None
            if last is not None and t.ts - last < HELD_STEADY_S * 1000:
                return None
        elif not (_symbols_quiet(h, t.ts) or (repaired is not None
                                              and _no_symbols_since(h, repaired, t.ts))):
            return None
    return repaired or 0.0


def resume_ends_failure(st: NodeState) -> bool:
    """A resume forgets the node's port windows (``FleetState._apply_status``): true when that
    ends its failure — held only by N2/N3 on ports up again (``held_only_since``), or on ports
    up whose repair its agent said since it failed, quiet or not yet. The resume radius said
    "still failing health checks … repair first" of a repaired node, then "done (back in
    service)" and it read ok (a fault audit)."""
    if held_only_since(st) is not None:
        return True
    drains = [f for f in own_findings(st) if f.severity is Severity.DRAIN]
    t = st.telemetry
    if not drains or t is None or any(f.rule not in QUIET_HELD_RULES for f in drains):
        return False
    up = ports_up(t)
    return all(f.component in up for f in drains) and bool(_repairs_since_failed(st))


def _repairs_since_failed(st: NodeState) -> list[float]:
    """When the node's agent said it was repaired since the node went failed, on the clock
    its port past (``port_past``) and its sample are read on: the agent's on raw telemetry,
    the digest's on digests (``Digest.shift_ms``). Read unshifted on digests, 90 s between the
    agent's clock and the collector's said a repaired port had symbol errors since its repair
    (or none) where the raw console said the opposite."""
    shift_s = st.digest.shift_ms / 1000 if st.digest is not None else 0.0
    return [e.ts / 1000 + shift_s for e in st.events if e.kind == "repair"
            and e.ts / 1000 + shift_s >= st.changed_at]


_HINT_CUT = re.compile(r" \(|[;:]")
"""Where a liveness finding's text stops naming what is wrong ("agent offline (Last Will)…",
"no telemetry accepted: 6 samples refused …")."""


def drain_reason_hint(st: NodeState | None) -> str:
    """``N1 mlx5_ib3:1``: the node's worst own finding (drain class first), what the drain
    dialog offers as an example reason; '' with none."""
    if st is None:
        return ""
    own = sorted(own_findings(st), key=lambda f: f.severity is not Severity.DRAIN)
    if own:
        return f"{own[0].rule} {own[0].component}".strip()
    if st.liveness and not st.job_stepping:  # a dead agent's node: "do not drain"
        # "H2 agent offline", not the dialog's generic "XID 79 on gpu3" (a 3 a.m. drive).
        f = st.liveness[0]
        words = _HINT_CUT.split(f.text, maxsplit=1)[0]
        return f"{f.rule} {words}"
    return ""


def restart_reason_hint(job: JobStatus, state: FleetState, now: float) -> str:
    """``hung: no step for 450 s`` or ``gpu0035 failed: N2 mlx5_ib3:1``: what holds the job up,
    which the restart dialog offers as an example reason (the audit's ``why``); '' with
    nothing to say."""
    quiet = not_stepping(job, state, now)
    if quiet is not None:
        return f"hung: no step for {quiet:.0f} s"
    sick = sick_nodes(job, state)
    if sick:
        first = state.nodes.get(sick[0].node)
        if first is not None and first.behind_switch and not own_findings(first):
            # "gpu0009 degraded" named a node for a switch outage (a 3 a.m. drive).
            return f"switch {first.behind_switch} suspect ({sick[0].node} behind it)"
        hint = drain_reason_hint(first)
        return f"{sick[0].node} {sick[0].verdict}" + (f": {hint}" if hint else "")
    slow = straggler(job, state)
    if slow is not None:
        return f"straggler {slow.node} +{slow.slower_pct:.0f}%"
    reason = job_reason(job)
    if reason and job.state.value in ENDED_BADLY:
        # Its scheduler's reason is what the restart answers; the generic "NCCL timeout at
        # step 1200" was offered for a job that failed on a node (a 3 a.m. drive).
        # Whole: the dialog cuts it at a word to its box ("…", ``example_placeholder``);
        # cut here at 80 it ended mid-word with nothing to say so.
        return f"{job.state.value}: {reason}"
    return ""


def own_findings(st: NodeState) -> list[Finding]:
    """The node's findings that are not its ports' behind a suspect switch."""
    return [f for f in st.findings if not st.switch_owns(f)
            and f.severity is not Severity.INFO]


def shown_findings(st: NodeState) -> list[Finding]:
    """What names the node's trouble, worst first: its liveness and own findings, or, with
    none of those, what it has (the switch's F1 and ports)."""
    own = st.liveness + own_findings(st)
    return sorted(own or st.all_findings, key=finding_rank)


def finding_rank(f: Finding) -> tuple[int, str, str]:
    return (_SEVERITY_RANK.get(f.severity, 3), f.rule, f.component)


def findings_worst_first(st: NodeState, found: list[Finding] | None = None) -> list[Finding]:
    """All the node's findings (``NodeState.all_findings``), in the one order every front end
    lists them: most severe first, of one severity the node's own before its suspect switch's
    (F1 and the ports it owns: the fault of its own is what the on-call acts on), then rule and
    component. The TUI listed them as found and status by ``finding_rank``: one node read
    "G2 XID 48; G3 XID 63; G4 DBE (+1 more)" in the one and "G2; G4; G3" in the other, and
    both cut at three, so a drain finding could be the one left out (a newcomer's run).
    ``found``: ``st.all_findings`` when the caller has it; a caller with a row per node
    (``rows.reasons_text``) sorts only two or more, and the most of 16,384 rows, with none or
    one, cost nothing more. The list may be the node's own: do not change it."""
    if found is None:
        found = st.all_findings
    if len(found) < 2:
        return found
    if not st.behind_switch:  # F1 and a switch's ports come only with a suspect switch
        return sorted(found, key=finding_rank)
    return sorted(found, key=lambda f: (_SEVERITY_RANK.get(f.severity, 3),
                                        f.rule == "F1" or st.switch_owns(f), f.rule,
                                        f.component))


@dataclass(frozen=True)
class SickNode:
    """A node of a running job that cannot do its part now (``sick_nodes``)."""

    node: str
    verdict: str
    finding: str
    """Its worst finding (``G2 gpu3: XID 79``), what the on-call reads first."""
    switch: str = ""
    """The suspect switch it is behind, when that is what holds the job up (it is not failed,
    offline or silent itself), else ''."""

    @property
    def text(self) -> str:
        return f"{self.node} {self.verdict}: {self.finding}"

    def as_json(self) -> dict[str, object]:
        return {"node": self.node, "verdict": self.verdict, "finding": self.finding,
                "text": self.text, "switch": self.switch or None}


def held_up_text(sick: list[SickNode]) -> str:
    """What holds a job up, from ``sick_nodes``: ``gpu0035 failed: N2 mlx5_ib3:1: link_downed
    increased; +2 nodes``, or, when every one is only behind a suspect switch, ``suspect switch
    leaf02-r5: check it, do not drain (gpu[0017-0018] behind it)`` (``suspect switches A, B:
    check them, … (gpu0017 behind A, gpu0042 behind B)`` for several); '' when none. The switch
    case named a sound node first ("gpu0017 degraded: F1 behind suspect …", cut there), under
    "held up by a node" (a 3 a.m. drive); the advice comes before the host list a panel cuts.
    A node with a fault of its own leads, the switch after it: a job with a node failed by XID
    79 read "do not drain" when the scheduler's reason named a node behind the switch, which
    ``sick_nodes`` puts first (a review)."""
    if not sick:
        return ""
    own = next((s for s in sick if not s.switch), None)
    # Every suspect switch, each with its nodes: the first alone was named, a second one's
    # nodes counted as "+2 nodes" as if they had faults of their own (a helper's audit).
    behind: dict[str, list[str]] = {}
    for s in sick:
        if s.switch:
            behind.setdefault(s.switch, []).append(s.node)
    shown = sum(len(nodes) for nodes in behind.values()) + (own is not None)
    more = len(sick) - shown
    parts = [own.text] if own is not None else []
    if len(behind) == 1:
        ((switched, nodes),) = behind.items()
        parts.append(f"suspect switch {switched}: check it, do not drain ({compress(nodes)} "
                     "behind it)")
    elif behind:
        hosts = ", ".join(f"{compress(nodes)} behind {sw}" for sw, nodes in behind.items())
        parts.append(f"suspect switches {', '.join(behind)}: check them, do not drain "
                     f"({hosts})")
    if more:
        parts.append(f"+{more} node{'s' if more > 1 else ''}")
    return "; ".join(parts)


def held_up_by_switch(sick: list[SickNode]) -> str:
    """The suspect switch that ``held_up_text`` leads with when switches alone hold a job up
    (every node of ``sick`` is behind one with no fault of its own), else '': what a title
    counts as "held up by a switch"."""
    return sick[0].switch if sick and all(s.switch for s in sick) else ""


_SICK_RANK = {Verdict.FAILED: 0, Verdict.OFFLINE: 1, Verdict.STALE: 2, Verdict.DEGRADED: 3}


def sick_nodes(job: JobStatus, state: FleetState) -> list[SickNode]:
    """The running job's nodes that stall or kill it now, worst first: failed, offline or
    silent (not a silent agent whose job keeps stepping: the agent died, not the node; nor a
    node whose collector went quiet), or behind a suspect switch that has not recovered
    (whoever is to blame, the job's ports through it are bad). A job synchronises all its
    ranks at every allreduce, so one such node holds up every GPU of the job however fast the
    others step; the straggler judgement, which reads step times, does not see a job that
    stopped stepping (docs/architecture.md, "Fleet-wide judgements")."""
    if job.state.value not in ("R", "CG") or not state.not_ok:
        return []
    out: list[tuple[int, str, SickNode]] = []
    # A job on one node reduces over NVLink, through no IB port (docs/scenarios.md, "Simulated
    # scheduler"): neither its node's ports nor their switch hold it up (a fault drill read a
    # one-node job "held up" by a port down, then by a suspect switch, while it stepped on).
    one_node = len(job.nodes) == 1
    for node in state.not_ok.intersection(job.nodes):
        st = state.nodes.get(node)
        if st is None:
            continue
        v = st.verdict
        if v in (Verdict.FAILED, Verdict.OFFLINE, Verdict.STALE):
            # A silent collector (D1) says nothing of its nodes.
            if st.job_stepping or any(f.rule == "D1" for f in st.liveness):
                continue
            if v is Verdict.FAILED and held_only_since(st, LINKS_UP_RULES) is not None:
                # Failed only by N2's hour (or N5's day of carrier losses) with its links up
                # and still: it does its part now (a job stepping at full speed read "held
                # up" for the hour after a flap, a 3 a.m. drive; for the day, a review).
                continue
            if v is Verdict.FAILED and one_node and _ports_only(st):
                continue
        elif one_node or not (st.behind_switch and not st.behind_recovered):
            continue
        switch = ""
        if v in (Verdict.FAILED, Verdict.OFFLINE, Verdict.STALE):
            worst = shown_findings(st)
        else:
            switch = st.behind_switch
            # Held up by its switch, not by a warning of its own: an XID 94 or a PCIe replay
            # rate was named as what held the job up, the scheduler's reason the switch's
            # port (a fault audit).
            worst = sorted(st.all_findings, key=lambda f: (f.rule != "F1", finding_rank(f)))
        finding = str(worst[0]) if worst else v.value
        more = f" (+{len(worst) - 1} more)" if len(worst) > 1 else ""
        out.append((_SICK_RANK.get(v, 4), node, SickNode(node, v.value, finding + more, switch)))
    # The node the scheduler's reason names first: it is what stopped the job ("gpu0011 not
    # responding"), where a node with an older fault sorted first by verdict or name (an SRE
    # drill named a stale N3 and a dead agent before the node that stopped the job).
    named = reason_words(job.reason) if len(out) > 1 else set()
    return [s for _, _, s in sorted(out, key=lambda x: (x[1] not in named, x[0], x[1]))]


def _ports_only(st: NodeState) -> bool:
    """Whether every finding of ``st`` is its IB ports' (N1-N8) or its switch's (F1)."""
    return all(f.rule[0] == "N" or f.rule == "F1" for f in st.all_findings)


_XID_STEPS = {
    79: "reboot the node ({c} fell off the bus; RMA it if it does again)",
    48: "reset {c} or reboot (double-bit ECC)",
    64: "reset {c}; RMA it if it recurs (row remap failed)",
    74: "reset {c} or reboot (NVLink error)",
}
"""Repair per drain-class XID: NVIDIA's Xid catalog's immediate action (RESTART_BM for 79,
WORKFLOW_XID_48, RESET_GPU + support for 64, WORKFLOW_NVLINK_ERR for 74; docs/domain.md §4).
The other drain-class XIDs (62, 95, 119, 120, 136, 140) are RESET_GPU."""
_RECOVERY_STEPS = {True: "reboot the node (the driver's recovery action for {c}: XID 154)",
                   False: "reset {c} once drained (the driver's recovery action: XID 154)"}
"""A drain-class XID 154's step, by whether its action is a node reboot (else drain and reset)."""
_IMEX_STEP = ("recover the IMEX domain {c} is in, once drained (the driver's recovery action: "
              "XID 154; a GPU reset alone does not)")
"""XID 154's action 5 (``xids.RECOVERY_ACTIONS``): the domain's, not the GPU's."""
_XID_STEP_ORDER = (79, "reboot", 64, 48, 74, "reset")
"""Which XID's step a GPU with several gets, strongest first: a node reboot (79, or 154 that
asks for one), the reset and RMA watch of a failed row remap (64), then the resets (48, 74, a
154 to drain and reset, any other drain-class XID). "XID 48, XID 79" said "reset gpu3 or
reboot", the first known XID's step, where 79 needs the node rebooted (docs/domain.md §4)."""
_REBOOT_COVERS = _XID_STEP_ORDER.index(48)
"""From this rank on, a GPU's step is a reset, which a node reboot does anyway."""
_RULE_STEPS = {
    "G1": "reboot the node (RMA {c} if it stays missing)",
    "G4": "reset {c} (uncorrectable ECC)",
    "G5": "RMA {c} (row remapping failed)",
    "G8": "reset {c}; RMA it if it recurs (SRAM errors)",
    "G9": "reset {c} or reboot; RMA it if its NVLinks stay down",
    "G10": "reset {c} or reboot; RMA it if NVLink CRC errors go on",
    "N1": "check {c}: reseat or replace its cable/transceiver, or the switch port",
    "N2": "check {c}: reseat or replace its cable/transceiver",
    "N3": "clean or replace {c}'s cable/transceiver (symbol errors)",
    "N5": "replace {c}'s cable/transceiver (it keeps losing carrier)",
    "N7": ("find why {c}'s HCA left the host (dmesg: mlx5, PCIe AER); reboot, and reseat or "
           "replace the HCA if it stays gone"),
    "N8": ("find why {c}'s HCA is not enumerated (lspci, dmesg: mlx5, PCIe AER); reboot, and "
           "reseat or replace the HCA if it stays missing"),
}
_HCA_GONE_STEPS = {
    "N7": ("find why the HCAs of {c} left the host (dmesg: mlx5, PCIe AER); reboot, and reseat "
           "or replace each that stays gone"),
    "N8": ("find why the HCAs of {c} are not enumerated (lspci, dmesg: mlx5, PCIe AER); reboot, "
           "and reseat or replace each that stays missing"),
}
"""N7's and N8's step for more than one port: one, naming them all (``repair_step``)."""
_WARN_STEPS = {
    "G3": "reset {c} when convenient ({t})",
    "G6": "reset {c} (a row remap is pending)",
    "G7": "plan an RMA of {c} ({t})",
    "G11": "reseat {c} or check its PCIe link ({t})",
    "G12": "check {c}'s cooling (fans, airflow, inlet temperature)",
    "G13": "check {c}'s cooling (fans, airflow, inlet temperature)",
    "N4": "clean or replace {c}'s cable/transceiver (errors rising)",
    "N6": "clear {c}'s counters (perfquery -R), then watch whether errors go on",
    CLOCK_RULE: CLOCK_ACTION,
}
"""What repairs a degraded node an operator took out of service (``repair_step(warn=True)``):
"watch; drain when idle" told the on-call to drain a node drained already (a 3 a.m. drive)."""
_P2P_STEP = ("quiesce {c}'s peer-to-peer traffic: stop the processes on it that use P2P and "
             "disable UVM persistence mode, then follow the recovery action the driver states "
             "next (another XID 154)")
"""XID 154's action 3, NVIDIA's "Drain P2P" (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt,
"Recovery action flag"; docs/domain.md §4): terminate the GPU processes that do peer-to-peer
traffic and disable UVM persistence mode; the driver then states another action. "reset gpu3"
sent the on-call to a reset the driver had not asked for (a fault audit)."""
_POWER_BRAKE_STEP = ("check the node's power supplies and its BMC's power limit ({c} was "
                     "power-braked: an external power brake, not heat)")
_HW_SLOWDOWN_STEP = ("check {c}'s cooling and the node's power supplies (HW slowdown: heat, "
                     "or a power brake)")


def _drains_p2p(f: Finding) -> bool:
    """A G3 that states XID 154's action 3 (``xids.recovery_name(3)``)."""
    return f"XID 154 ({xids.RECOVERY_ACTIONS[3]})" in f.text


def _throttle_step(f: Finding) -> str:
    """G12's step by what throttled the GPU: NVML's HW power brake is asserted from outside
    (the system's power supply), and its HW slowdown by heat or a power brake; "check gpu3's
    cooling" of a power-braked GPU sent the on-call to the fans (a fault drill)."""
    if "thermal" in f.text:
        return _WARN_STEPS["G12"]
    return _POWER_BRAKE_STEP if "power brake" in f.text else _HW_SLOWDOWN_STEP
_PORT_STEP_ORDER = ("N7", "N5", "N1", "N3", "N2")
"""Which port rule's step a port gets when several fire (``repair_step``): a port that keeps
losing carrier needs its cable replaced; one that is down, checking up to the switch."""
_XID_RE = re.compile(r"XID (\d+)")


_GPU_STEP_ORDER = ("G5", "G1", "G14", "G2", "G9", "G8", "G4", "G10", "G7", "G6", "G11", "G3",
                   "G12", "G13")
"""Which GPU rule's step a GPU gets when several fire (``repair_step``, one step per GPU): the
most final repair first. By rule name, an XID 48's "reset gpu2 or reboot" came first and the
row-remap failure's "RMA gpu2" was cut off behind "(+1 more)" (an SRE drill)."""


_SEVERITY_RANK = {Severity.DRAIN: 0, Severity.WARN: 1, Severity.INFO: 2}


def _xid_step(f: Finding) -> tuple[int, str]:
    """A G2 finding's step and its rank in ``_XID_STEP_ORDER``: the strongest its XIDs need."""
    codes = [int(c) for c in _XID_RE.findall(f.text)]
    reboot = "reboot required" in f.text  # a node's or the system's (xids.RECOVERY_ACTIONS)
    found = [(_XID_STEP_ORDER.index(c), _XID_STEPS[c]) for c in codes if c in _XID_STEPS]
    if 154 in codes:
        # Action 5 asks for the IMEX domain (multi-node NVLink) to be recovered: "reset gpu3
        # once drained" sent the on-call to a GPU reset that does not do it (a review).
        imex = xids.RECOVERY_ACTIONS[5] in f.text
        found.append((_XID_STEP_ORDER.index("reboot" if reboot else "reset"),
                      _IMEX_STEP if imex and not reboot else _RECOVERY_STEPS[reboot]))
    return min(found, default=(len(_XID_STEP_ORDER), "reset {c} (" + f.text + ")"))


def _step_rank(f: Finding) -> tuple[int, int, int, str, str]:
    step = _GPU_STEP_ORDER.index(f.rule) if f.rule in _GPU_STEP_ORDER else len(_GPU_STEP_ORDER)
    # Among a node's XIDs, the GPU that needs the reboot first: "reset gpu1 or reboot; reboot
    # the node (gpu3 fell off the bus …)" had a reset done before the reboot that does it.
    xid = _xid_step(f)[0] if f.rule == "G2" else 0
    return (_SEVERITY_RANK.get(f.severity, 3), step, xid, f.rule, f.component)


def repair_step(st: NodeState, *, warn: bool = False) -> str:
    """What repairs a failed node, from its own drain findings, worst first ("reboot the node
    (gpu3 fell off the bus …)" for an XID 79): "repair" alone left the on-call to look the
    fault up (a fault audit against NVIDIA's Xid catalog). "repair" when no finding names one.
    ``warn``: its warnings' steps too (``_WARN_STEPS``), after the drain findings' (a
    degraded node's, or a failed one out of service). One step per GPU, its worst finding's:
    an XID 48 and its DBE said "reset gpu6 or reboot (double-bit ECC); reset gpu6
    (uncorrectable ECC)" (a 3 a.m. drive)."""
    steps: list[str] = []
    stepped_gpus: set[str] = set()
    own = own_findings(st)
    # A fault back after its repair: the part's replacement is its step, not the repair that
    # did not hold. "then reboot the node (gpu6 fell off the bus; RMA it if it does again); the
    # same fault came back …: replace gpu6 rather than repeat the repair" told both, and a
    # drained node "reset gpu1 or reboot, then resume" of a DBE back 12 s after its reset (a
    # fault audit: `inject repair`, then the same fault again).
    gone_gpus, gone_ports = _recurred_parts(st) if recurrence(st) is not None else ([], [])
    # Its cooling step outlives the replacement: an XID 79 back on a GPU that ran hot read
    # "replace gpu3 (RMA a GPU)" alone, and the new GPU went under the cooling that failed
    # the old one twice (a review).
    hot = own
    if gone_gpus or gone_ports:
        steps.append(_replace_text(gone_gpus, gone_ports))
        own = [f for f in own if f.component not in (*gone_gpus, *gone_ports)]
        stepped_gpus.update(gone_gpus)
    # A GPU that fell off the bus is also missing (G1): its XID says more, once.
    xid_gpus = {f.component for f in own if f.rule == "G2"}
    # One step per port, the most telling of its rules: N1 and N2 of one flapping port said
    # "check mlx5_ib3:1: reseat or replace its cable/transceiver" twice (a newcomer's run).
    port_rule: dict[str, str] = {}
    for f in own:
        if f.rule in _PORT_STEP_ORDER and f.severity is Severity.DRAIN:
            held = port_rule.get(f.component)
            if held is None or _PORT_STEP_ORDER.index(f.rule) < _PORT_STEP_ORDER.index(held):
                port_rule[f.component] = f.rule
    shared_steps: dict[str, tuple[int, list[str]]] = {}
    for f in sorted(own, key=_step_rank):
        if f.severity is not Severity.DRAIN or (f.rule == "G1" and f.component in xid_gpus):
            continue
        if f.rule in _PORT_STEP_ORDER and port_rule.get(f.component) != f.rule:
            continue
        if f.rule.startswith("G") and f.component:
            if f.component in stepped_gpus:
                continue
            stepped_gpus.add(f.component)
        if f.rule == "G2":
            # A reboot covers whatever reset another XID asked for (a review: "XID 64, XID 154
            # (node reboot required)" said "reset gpu5"), on this GPU or another of the node.
            rank, step = _xid_step(f)
            if rank >= _REBOOT_COVERS and any(s.startswith("reboot the node") for s in steps):
                continue
        elif f.rule == "G1" and GPU_READER_SAYS in f.text:
            # The agent cannot read its GPUs at all: the driver, not eight GPUs to RMA.
            step = ("check the NVIDIA driver and the agent's GPU reader on the node "
                    "(nvidia-smi; the agent says why); reboot if the GPUs stay missing")
        elif f.rule == "G14":
            # Named by its uuid: its index then (the text's) is another GPU's now.
            gone = f.text.split(f" {GPU_GONE}")[0]
            which = f"{gone} ({f.component})" if f.component else "the GPUs"
            step = (f"reboot the node and check that {which} is seated; RMA it if it goes "
                    "missing again")
        elif f.rule == "N1" and f.component == "ib":
            # Fewer HCAs than the SKU's at birth: "check ib: reseat or replace its cable" (a
            # real-node drill: an agent restarted while an HCA was gone).
            step = ("find why an HCA is missing (lspci, dmesg: mlx5, PCIe AER); reboot, and "
                    "reseat or replace it if it stays missing")
        elif f.rule in _HCA_GONE_STEPS:
            # One step for every HCA gone: with 4 of 8 gone, "find why mlx5_ib0:1's HCA left
            # the host …" came once per HCA, and "(+2 more)" hid the rest (a real-node drill).
            hcas = [g.component for g in own if g.rule == f.rule and port_rule.get(
                g.component) == f.rule and g.severity is Severity.DRAIN]
            step = (_RULE_STEPS[f.rule] if len(hcas) < 2
                    else _HCA_GONE_STEPS[f.rule].format(c=listed(hcas)))
        else:
            step = _RULE_STEPS.get(f.rule, "")
        text = step.format(c=f.component or ("the GPU" if f.rule.startswith("G") else "the link"))
        shared = shared_steps.get(step) if f.rule.startswith("G") and f.component else None
        if shared is not None:
            # One step naming each GPU that needs the same one: the two ends of an NVLink
            # (both may log XID 74, NVIDIA's Xid catalog) read "reset gpu6 or reboot (NVLink error);
            # reset gpu7 or reboot (NVLink error)" (a review). Not of a step that says "it".
            at, gpus = shared
            gpus.append(f.component)
            steps[at] = step.format(c=listed(gpus))
            continue
        # One "reboot the node" however many GPUs need it.
        if step and not any(s.split(" (")[0] == text.split(" (")[0] for s in steps):
            if f.rule.startswith("G") and f.component and " it " not in f" {step} ":
                shared_steps[step] = (len(steps), [f.component])
            steps.append(text)
    # A GPU off the bus that ran hot before it went (its G12/G13 kept, ``GONE_HOT``): XID 79
    # is often heat, and the reboot alone put it back under the cooling that failed it (a
    # scenario run; docs/architecture.md "Thermal findings hold"). A throttle not of its
    # cooling (power brake, HW slowdown) is no heat: "it ran hot" of a power-braked GPU sent
    # the on-call to the fans (a review; ``_throttle_step``).
    for c in sorted({f.component for f in hot if f.component and GONE_HOT in f.text and (
            f.rule == "G13" or (f.rule == "G12" and _throttle_step(f) == _WARN_STEPS["G12"]))}):
        steps.append(f"check {c}'s cooling before it takes work (fans, airflow, inlet "
                     "temperature: it ran hot before it went missing)")
        stepped_gpus.add(c)
    if warn:
        # After the drain steps: a node out of service may as well have its warnings seen to
        # (a drained node with a symbol storm and a pending row remap was never told to reset
        # the GPU: a fault audit).
        for f in sorted(own, key=_step_rank):
            if f.severity is not Severity.WARN or f.component in port_rule:
                continue  # a port with a drain step has its one step (N2 beside N4)
            step = (_throttle_step(f) if f.rule == "G12"
                    else _P2P_STEP if f.rule == "G3" and _drains_p2p(f)
                    else _WARN_STEPS.get(f.rule) or _RULE_STEPS.get(f.rule, ""))
            gpu = f.rule.startswith("G") and f.component
            if not step or (gpu and f.component in stepped_gpus):
                continue
            if gpu:
                stepped_gpus.add(f.component)
            text = step.format(c=f.component or "the node", t=f.text)
            if text not in steps:
                steps.append(text)
    if not steps:
        return "repair"
    return "; ".join(steps[:2]) + (f" (+{len(steps) - 2} more)" if len(steps) > 2 else "")


def slowing(st: NodeState, state: FleetState) -> "tuple[Straggler, JobStatus] | None":
    """The straggler judgement of ``st``'s job about ``st``, if it names the node (the job
    the scheduler says holds it, when the node's own sample names none)."""
    jid = own_job(st, state) or holding_job(state, st.node_id)
    job = state.jobs.get(jid) if jid is not None else None
    found = None if job is None else straggler(job, state)
    slow = None if found is None else found.of_node(st.node_id)
    return None if slow is None or job is None else (slow, job)


STRAGGLER_FINISH_S = 1800.0
"""A straggler's job that ends within this (at its pace) is cheaper to let finish than to
requeue: a drain --now put a job 20 min from its end behind an hour-long one (a 3 a.m. drive)."""


def drain_fellows(st: NodeState, job: JobStatus, state: FleetState) -> list[str]:
    """The other nodes of ``job``'s straggler judgement whose fix is a drain too (a cause of
    their own, not a GPU power-capped by software: its limit is put back live), in service
    still: drained one at a time, each drain --now requeued the job again (two thermal
    stragglers in one job, each told "drain it --now ..., so the job requeues without it":
    a jobs audit)."""
    found = straggler(job, state)
    if found is None:
        return []
    out = []
    for s in (found, *found.also):
        other = state.nodes.get(s.node)
        if (s.node == st.node_id or s.power is not None or CAUSE_CODES[NO_FINDING] in s.causes
                or other is None or other.drain.state is not DrainState.NONE
                or not _drained_for_itself(other, s)):
            continue
        out.append(s.node)
    return out


def _drained_for_itself(st: NodeState, slow: Straggler) -> bool:
    """Whether a straggler's own action (``_node_action``) is a drain: not a node not
    responding (its agent's or its node's step first; "restart the agent; do not drain" of an
    agent dead under a stepping job), nor one whose findings are all a suspect switch's
    ("check switch …; do not drain"). Each was named "drain it --now with gpu0005" on its
    fellow's line while its own said not to drain (a review)."""
    if CAUSE_CODES[NOT_RESPONDING] in slow.causes or st.job_stepping:
        return False
    # ``_node_action``'s test for the switch's advice, to the letter.
    return not (st.verdict is Verdict.DEGRADED and any(f.rule == "F1" for f in st.all_findings)
                and not own_findings(st))


def straggler_action(st: NodeState, slow: Straggler, job: JobStatus,
                     pending: bool = False, fellows: "list[str] | None" = None,
                     hung: float | None = None) -> str:
    """A straggler's node: "watch; drain when idle if it persists" of a node that slowed a
    160-GPU job by 23 % and is never idle while it runs (a fault audit). Drained right after a
    checkpoint, the job loses little and runs on without it; one near its end is let finish.
    ``fellows``: the job's other stragglers to drain with it (``drain_fellows``), so the job
    requeues once. ``hung``: seconds the job has not stepped (``not_stepping``), when it is
    hung: it reaches no next checkpoint and no end."""
    step = repair_step(st, warn=True)
    slows = f"it slows job {slow.job_id} by {slow.slower_pct:.0f}% (rank {slow.rank})"
    capped = _power_capped(st)
    if step == "repair" and capped and slow.power is not None:
        cause = slow.power.text
        gpus = listed([f"gpu{g.index}" for g in capped])
        if slow.power.limit == "as_peers":
            # At the limit its peers run at, nothing was lowered: the chip does less work for
            # the same power (docs/domain.md §3), which a limit restored would not change.
            return (f"{slows}, {POWER_CAPPED} at its peers' limit ({cause}): {gpus} "
                    "does less work for the same power; watch, and drain when idle if it "
                    "persists (check its cooling and power delivery)")
        # Nothing to repair: a power limit set lower (``nvidia-smi -pl``, a power budget) is
        # put back live, with the job running; "look at the node" left the on-call to find it.
        step = (f"check {gpus}'s power limit (nvidia-smi -q -d POWER: lowered by nvidia-smi "
                "-pl or a power budget?) and restore it")
        return f"{slows}, {POWER_CAPPED} ({cause}): {step}"
    then = f"then {step if step != 'repair' else 'look at the node'}"
    if hung is not None:
        # A hung job reaches no next checkpoint and no end at its pace: "drain it --now right
        # after the job's next checkpoint" waited for a step that never came (a fault drill:
        # job_hang on a job with a thermal straggler). Drained in finish mode it leaves the
        # hung ranks to look at, and the job's restart does not land on it again.
        with_, them = (f" with {listed(fellows)}", "them") if fellows else ("", "it")
        return (f"it slowed job {slow.job_id} by {slow.slower_pct:.0f}% (rank {slow.rank}) "
                f"before the job stopped stepping (hung: no step for {hung:.0f} s): drain it "
                f"(finish){with_} so restart-job does not place the job on {them} again, "
                f"{then} once the job has left {them}")
    if job.eta_s is not None and job.eta_s <= STRAGGLER_FINISH_S:
        return (f"{slows}, which ends in {job.eta_s / 60:.0f} min at its pace: drain it "
                f"(finish) so nothing new lands there, let the job end, {then}")
    every = job.checkpoint_every
    if not every:
        when = " right after the job's next checkpoint"
    elif job.last_checkpoint_step and job.step - job.last_checkpoint_step <= 1:
        # "next" 4 s after one: the operator could not tell this was the moment.
        when = (f" now (the job checkpointed at step {job.last_checkpoint_step} a step ago: "
                "little is lost)")
    elif not job.last_checkpoint_step:
        when = (f" right after the job's first checkpoint (every {every} steps; at step "
                f"{job.step} now)")
    else:
        when = (f" right after the job's next checkpoint (every {every} steps; the last at "
                f"step {job.last_checkpoint_step}, at step {job.step} now)")
    queue = " (a job pending may take the freed nodes first)" if pending else ""
    if fellows:
        one = len(fellows) == 1
        together = (f" with {listed(fellows)} ({'it slows' if one else 'they slow'} the job "
                    f"too: drained together, the job requeues once, not {len(fellows) + 1} "
                    "times)")
        return (f"{slows}: drain it --now{together}{when}, so the job requeues without them"
                f"{queue}, {then}")
    return f"{slows}: drain it --now{when}, so the job requeues without it{queue}, {then}"


def recurrence_text(st: NodeState) -> str:
    """A failure that is the last one again (``NodeState.recurred``): "reset gpu0 or reboot"
    of a DBE back 30 s after the node's repair read as the first, and asked for the repair that
    had not held (a fault audit: the same XID 48 after ``repair``)."""
    assert st.recurred is not None
    replace = _replace_text(*_recurred_parts(st))
    return f"{recurred_when(st)}: {replace} rather than repeat the repair"


def recurred_when(st: NodeState) -> str:
    """"the same fault (G2 gpu0) came back 12 s after it cleared at 18:25:33"."""
    assert st.recurred is not None
    cleared, again = st.recurred
    gap = _recurred_after_s(st)
    took = (f"{gap:.0f} s" if gap < 120 else f"{gap / 60:.0f} min" if gap < 7200
            else f"{gap / 3600:.0f} h")
    return (f"the same fault ({', '.join(again)}) came back {took} after it cleared at "
            f"{utc_hms(cleared)}")


def _recurred_parts(st: NodeState) -> tuple[list[str], list[str]]:
    """The GPUs and the ports of the node's recurred fault, once each."""
    assert st.recurred is not None
    again = st.recurred[1]
    gpus = list(dict.fromkeys(k.split(" ", 1)[1] for k in again if k[0] == "G"))
    ports = list(dict.fromkeys(k.split(" ", 1)[1] for k in again if k[0] != "G"))
    return gpus, ports


def _replace_text(gpus: list[str], ports: list[str]) -> str:
    # A port's fault is its cable's or HCA's: "replace mlx5_0:1 (RMA a GPU)" named no part
    # anyone could order (a review). N1's "ib" is no port but an HCA short of the SKU's at
    # birth (health.py): "replace ib's cable/transceiver or HCA" named neither (a review).
    cabled = [p for p in ports if p != "ib"]
    what = ([f"{listed(gpus)} (RMA a GPU)"] if gpus else []) + (
        [f"{listed(cabled)}'s cable/transceiver or HCA"] if cabled else []) + (
        ["the missing HCA"] if len(cabled) < len(ports) else [])
    return f"replace {' and '.join(what)}"


def _recurred_after_s(st: NodeState) -> float:
    assert st.recurred is not None
    d = st.digest
    if d is not None and d.recurred is not None:
        # The collector's: this console's ``changed_at`` is when it first read the failure,
        # a tick later or, started since, long after the fault came back.
        return d.recurred.after_s
    return st.recurred_after_s()


def recurrence(st: NodeState) -> dict[str, object] | None:
    """``recurrence_text`` for scripts: null unless the node's ``action`` says its failure
    recurred (a failed node whose fault is the one before it again), else ``cleared_at``
    (unix s, when the earlier one cleared), ``after_s`` (how long it held) and ``findings``
    (the fault's keys, ``"G2 gpu3"``). A script had the recurrence only in the action's prose
    (docs/protocol.md, "status --json")."""
    if st.verdict is not Verdict.FAILED or st.recurred is None:
        return None
    cleared, again = st.recurred
    return {"cleared_at": round(cleared, 3), "after_s": round(_recurred_after_s(st), 1),
            "findings": list(again)}


def reconnect_loop(st: NodeState) -> bool:
    """Whether the node's agent is judged in a reconnect loop (births, no sample between:
    ``state.RECONNECT_LOOP``), the judgement behind the offline node's "check the broker
    first" action."""
    return any(f.rule == "H2" and RECONNECT_LOOP in f.text for f in st.liveness)


def recommended_action(st: NodeState, state: FleetState | None = None) -> str:
    """What the on-call should do about a node, in a few words (``status --json``: ``action``).
    ``state``: the fleet, for whether the node slows its job (``slowing``)."""
    blind = blind_step(st.findings) if st.verdict in (Verdict.DEGRADED, Verdict.FAILED) else ""
    if blind and {f.rule for f in st.all_findings} == {BLIND_RULE}:
        # Nothing else found, but only of what it sees: "watch; drain when idle" of a node
        # whose agent cannot read its kernel log (a real-node drill).
        return f"{blind}; do not drain for it"
    action = _node_action(st, state)
    if blind:
        action += f"; {blind}"
    if recurrence(st) is not None:
        # Its step is the replacement already (``repair_step``): why, not the part again. A
        # step not of ``repair_step`` (a port held for N2's hour, up again) said "check the
        # link" and "its repair did not hold", with no replacement anywhere (a review).
        replace = _replace_text(*_recurred_parts(st))
        action += f"; {recurred_when(st)}: " + (
            "its repair did not hold" if replace in action
            else f"{replace} rather than repeat the repair")
    if (st.verdict in (Verdict.DEGRADED, Verdict.FAILED) and CLOCK_ACTION not in action
            and any(f.rule == CLOCK_RULE for f in st.findings)):
        # Beside another fault: its clock's step too (a drain it refuses cannot be done).
        action += f"; {CLOCK_ACTION}"
    if st.behind_switch and not st.behind_recovered and st.verdict is Verdict.DEGRADED \
            and "switch" not in action:
        own = own_findings(st)
        if not own or any(f.severity is Severity.DRAIN for f in own):
            return action
        # Its own warning's advice alone ("watch; drain when idle") left out the switch its
        # neighbours were told to check, as if its link were fine (a fault audit).
        return (f"check switch {st.behind_switch} (its link faults are the switch's: do not "
                f"drain for them); for its own warnings: {action}")
    return action


def failed_under_job(st: NodeState, state: FleetState | None) -> str | None:
    """The job a failed node's drain would requeue: its own (``own_job``, the ``job`` of
    ``status --json``), not one the scheduler says ended or requeued elsewhere. Read off the
    sample alone, "drain --now (requeue its jobs from their checkpoint)" was said of a node
    whose job had failed (F), beside ``"job": null``, and the drain dialog opened on now."""
    if state is None:
        return st.job_id
    return own_job(st, state)


def _stepping_alone(st: NodeState, jid: str, state: FleetState | None) -> JobStatus | None:
    """``jid`` when it runs on ``st`` alone and steps on over its ports' faults (its ranks
    reduce over NVLink, ``sick_nodes``): drained in finish mode, not requeued."""
    job = state.jobs.get(jid) if state is not None else None
    if (state is None or job is None or len(job.nodes) != 1
            or job.state.value not in ("R", "CG") or not _ports_only(st)
            or sick_nodes(job, state)):
        return None
    return job


def drain_now_advised(st: NodeState, state: FleetState) -> bool:
    """Whether the node's action (``_node_action``) drains it --now: failed, under a job
    (``failed_under_job``) it holds up, not failed only by N2/N3's hour on links up again
    (``held_only_since``: told to drain it in finish mode). The drain dialog opens on this
    mode (``commands.suggested_drain_mode``): it opened on now for a one-node job's node told
    "drain it (finish: …)", and would have requeued a job stepping at full speed (a review)."""
    if st.verdict is not Verdict.FAILED or st.online is False or held_only_since(st) is not None:
        return False
    jid = failed_under_job(st, state)
    return jid is not None and _stepping_alone(st, jid, state) is None


def _node_action(st: NodeState, state: FleetState | None) -> str:
    v = st.verdict.value
    rules = {f.rule for f in st.all_findings}
    if st.job_stepping:
        return "restart the agent; do not drain (its job is still stepping)"
    if v == "offline":
        # A drain goes to the node's agent: "drain it if it does not come back" asked for
        # one that timed out, and a drained node read it too (a 3 a.m. drive, an SRE drill).
        if st.drain.state is not DrainState.NONE:
            return (f"{st.drain.state.value}, now offline: check the node (power, BMC, kernel "
                    "log), repair it, then resume it once it is back")
        if st.stopped:
            return ("its agent was stopped cleanly: start it again (systemctl start "
                    "fleetdeck-agent) unless the stop was meant; nothing says the node is down")
        if reconnect_loop(st):
            # The node is up: its agent connects, and the broker drops it at its keyframe
            # (docs/reliability.md, the max_packet_size drill); the agent's log says so.
            return ("check the broker first: it most likely drops the agent's connection at "
                    "its first keyframe, a max_packet_size below the keyframe's size (the "
                    "agent's log names the size, the broker's says 'oversize packet'): raise it "
                    "(or remove it) in the broker's config; if neither log says so, the agent "
                    "restarts in a loop: its journal on the node says why")
        # A host that is up and an agent the broker refuses (a password changed, an ACL) read
        # the same from here: its will, then nothing (an SRE drill sent the on-call to the BMC
        # of a node whose agent logged "not authorized" every 5 min).
        return ("check the node (power, BMC, kernel log), and if it is up its agent's journal "
                "(a broker that refuses its credentials reads the same); its agent takes a "
                "drain only once it is back")
    if v == "stale":
        refused = st.refused
        if refused is not None and (st.last_rx is None or refused[0] > st.last_rx):
            return ("check what its agent sends (its samples are refused, H1 says why; the "
                    "console's log names the topic); its health is unknown until one is "
                    "accepted")
        if st.talks:
            return ("wait for its keyframe (30 s at most), or connect as a broker user that may "
                    "publish node/+/cmd so the console's keyframe asks reach the agent")
        return "check the agent and the node; wait for telemetry before acting"
    if "H3" in rules:
        return "give each agent its own node id"
    if v == "failed":
        held = held_only_since(st)
        if held is not None:
            # Up again and failed only by the hour N2 holds: "drain, then repair" sent the
            # on-call to repair a node repaired a minute before (an SRE drill). The hold ends
            # with a resume of the drained node, or with the hour; each drain state says
            # the next step of that, not "repair" again (a review of this change).
            by = sorted({f.rule for f in own_findings(st) if f.severity is Severity.DRAIN})
            symbols = "N3" in by
            quiet = (f"its port has had no symbol error for {SYMBOL_QUIET_S // 60} min"
                     if by == ["N3"] else "its links are up again" + (
                         " and free of symbol errors" if symbols else ""))
            done = (f"repaired at {utc_hms(held)}" if held else quiet) + (
                f", failed for the hour by {' and '.join(by)}")
            # Symbol errors that stopped still mark a marginal cable: clean or replace it
            # (unless it was just repaired: "replace the cable" of one replaced, a fault audit).
            check = "clean or replace the cable" if symbols and not held else "check the link"
            if st.drain.state is DrainState.DRAINED:
                return f"{done}: {check}, then resume it (a resume ends the hold)"
            if st.drain.state is DrainState.DRAINING:
                return (f"{done}: once its jobs have finished, {check} and resume it "
                        "(a resume ends the hold)")
            return (f"{done}: drain it (finish), {check}, then resume it (a resume ends "
                    "the hold)")
        out = st.drain.state in (DrainState.DRAINED, DrainState.DRAINING)
        step = repair_step(st, warn=out)
        if st.drain.state is DrainState.DRAINED:
            return f"drained: {step}, then resume"
        if st.drain.state is DrainState.DRAINING:
            # Its job still runs (drain mode finish): repairing now would kill it.
            return (f"draining: once its jobs have finished (or drain --now to requeue them "
                    f"from their checkpoint now), {step}, then resume")
        jid = failed_under_job(st, state)
        if jid is not None:
            alone = _stepping_alone(st, jid, state)
            if alone is not None:
                # Its one-node job reduces over NVLink and steps on (``sick_nodes``): "requeue
                # its jobs" told the on-call to throw away the work of a job the jobs view
                # said nothing held up (a review). A drain in finish mode lets it end.
                return (f"drain it (finish: job {alone.job_id}, on this node alone, reduces "
                        f"over NVLink and steps on), then, once it has finished, {step}")
            # "--now", the mode's word on the command line: "drain (requeue ...)" typed as
            # `fleetdeck drain NODE --reason …` drains in finish mode, Slurm's DRAIN, and the
            # job ran on over the failed node (a fault drill: an NVLink fault under a job).
            return f"drain --now (requeue its jobs from their checkpoint), then {step}"
        # An idle node: "requeue its jobs" sent the on-call looking for jobs that are not there.
        return f"drain (no job on it), then {step}"
    if "F1" in rules and v == "degraded" and not own_findings(st):
        # Only when the switch explains all of it: an XID 94 of a node behind a recovered
        # switch read "none on the node" (an SRE drill); its own finding's advice follows.
        # A node out of service needs its resume, not "do not drain": a drained, repaired
        # node behind a recovered switch was never told to go back (a fault audit).
        out = st.drain.state in (DrainState.DRAINED, DrainState.DRAINING)
        slows = None if out or state is None or not _power_capped(st) else slowing(st, state)
        if slows is not None and slows[0].power is not None:
            # No rule judges its SW power cap, so the switch seemed all of it: "none on the
            # node" of a node whose capped GPU slowed its job by 46 % (a fault audit).
            link = (f"its link errors were switch {st.behind_switch}'s (recovered): nothing to "
                    "do for them" if st.behind_recovered else
                    f"check switch {st.behind_switch} (its link faults are the switch's: do "
                    "not drain for them)")
            return f"{straggler_action(st, *slows)}; {link}"
        if st.behind_recovered:
            if out:
                return (f"{taken_out(st)}, nothing found on the node (switch "
                        f"{st.behind_switch} recovered): resume it once its repair or "
                        "maintenance is done (its GPUs are out of service)")
            return f"none on the node: switch {st.behind_switch} recovered; do not drain"
        if out:
            return (f"check switch {st.behind_switch}; {taken_out(st)}, nothing found "
                    "on the node: resume it once the switch is fixed")
        return f"check switch {st.behind_switch}; do not drain"
    if v == "degraded" and st.drain.state in (DrainState.DRAINED, DrainState.DRAINING):
        # Taken out of service for its warnings: "watch; drain when idle" asked for a drain
        # done already (a 3 a.m. drive). Its next step is the repair, then the resume.
        step = repair_step(st, warn=True)
        if st.drain.state is DrainState.DRAINED:
            return f"drained: {step}, then resume"
        jid = None if state is None else own_job(st, state) or holding_job(state, st.node_id)
        job = None if jid is None or state is None else state.jobs.get(jid)
        stuck_s = None if job is None or state is None else not_stepping(job, state,
                                                                         state.judged_at)
        if job is not None and stuck_s is not None:
            # Drained (finish) as a hung job's straggler is told: "once its jobs have finished"
            # waited for a job that never ends (a review).
            return (f"draining: job {job.job_id} on it is hung (no step for {stuck_s:.0f} s) and "
                    f"will not finish: once it has left (restart-job {job.job_id} "
                    f"{restart_point(job)}), {step}, then resume")
        return f"draining: once its jobs have finished, {step}, then resume"
    # "When idle" of a node with no job on it: it can be drained now (an SRE drill said so of
    # "watch; drain when idle"; the GPU resets' advice still said it: a live check).
    idle = st.sample is not None and st.sample.job is None
    drain_idle = "drain it (no job on it)" if idle else "drain when idle"
    # Which GPU to reset, by name: "reset the GPU" of a node with eight left the on-call to
    # find it, and a pending remap (G6, the XID 63 after a 94) hid the 94's advice that the
    # application was killed (a fault audit: `inject xid code=94 then=63`).
    remap = _components(st, "G6")
    if v == "degraded" and "G3" in rules:
        codes = {int(c) for f in st.all_findings if f.rule == "G3"
                 for c in _XID_RE.findall(f.text)}
        if 154 in codes:
            # The driver states what the GPU needs (docs/domain.md §4): it said "watch".
            asks = next(f for f in st.all_findings if f.rule == "G3" and "XID 154" in f.text)
            what = asks.text.split("XID 154 (", 1)[-1].split(")", 1)[0]
            if _drains_p2p(asks):
                # NVIDIA's Drain P2P asks for the P2P traffic to stop, not for a reset; a
                # pending remap's reset still waits for the GPU to be idle.
                requeue = "" if idle else ", requeue its job from its checkpoint"
                # Resumed before the driver's next action, the node takes work a reset or a
                # reboot may yet need (a review): resume follows that action, not the quiesce.
                then = (f"; once it states none, reset {listed(remap)} (a row remap is pending) "
                        "and resume" if remap else "; resume once it states none")
                return (f"XID 154 on {asks.component} ({what}, says the driver): drain it"
                        f"{' (no job on it)' if idle else ''}{requeue}; "
                        f"{_P2P_STEP.format(c=asks.component)}{then}")
            resets = listed(list(dict.fromkeys([asks.component, *remap])))
            if what == xids.recovery_name(xids.ACTION_UNREAD):
                # Not the driver's word: the line that said it was cut (a real-node audit).
                return (f"XID 154 on {asks.component} ({what}: 'GPU Recovery Action' in "
                        f"nvidia-smi -q on the node says it): until then {drain_idle}, "
                        f"reset {resets}, resume")
            return (f"XID 154 on {asks.component} ({what}, says the driver): {drain_idle}, "
                    f"reset {resets}, resume")
        if 94 in codes:
            # NVIDIA: RESTART_APP; reset when convenient (docs/domain.md §4).
            # The application is killed, not requeued: "its job restarts" of a job left
            # failed (F) for restart-job (a fault audit).
            hit = [f.component for f in st.all_findings
                   if f.rule == "G3" and "94" in _XID_RE.findall(f.text)]
            gpus = list(dict.fromkeys(hit))
            resets = listed(list(dict.fromkeys([*hit, *remap])))
            killed = (f"the application on {gpus[0]} was" if len(gpus) == 1
                      else f"the applications on {listed(gpus)} were")
            return (f"XID 94 (contained ECC error): {killed} killed (restart its job from "
                    f"its checkpoint if it failed); reset {resets} when convenient "
                    f"({drain_idle}, reset, resume)")
    if remap:
        return f"{drain_idle}, reset {listed(remap)} (a row remap is pending), resume"
    if v == "degraded" and "G3" in rules:
        codes = {int(c) for f in st.all_findings if f.rule == "G3"
                 for c in _XID_RE.findall(f.text)}
        if codes == {92}:
            return "watch the single-bit ECC rate; contact support if it keeps rising"
    if v == "degraded" and rules == {CLOCK_RULE} and st.drain.state is DrainState.NONE:
        # Its GPUs are fine: a drain is no fix for a clock, and a console on digests (its own
        # clock's stamps) cannot drain one over 10 s ahead anyway (console/clock.py).
        refuses = any(REFUSES in f.text for f in st.all_findings)
        return (f"{CLOCK_ACTION}; do not drain for it (its GPUs are fine)"
                + ("; until it is fixed a console on digests cannot drain it"
                   if refuses else ""))
    if v == "degraded" and rules == {"N6"}:
        # Saturated, the counter cannot say whether errors go on (docs/architecture.md).
        return "clear the port's counters (perfquery -R), then watch whether errors go on"
    if v == "degraded":
        slows = None if state is None else slowing(st, state)
        if state is not None and slows is not None:
            # A job that can never start here takes no freed node (``never_fits``).
            pending = any(j.state.value == "PD" and not never_fits(j, state)
                          for j in state.jobs.values())
            return straggler_action(st, *slows, pending=pending,
                                    fellows=drain_fellows(st, slows[1], state),
                                    hung=not_stepping(slows[1], state, state.judged_at))
        if st.sample is not None and st.sample.job is None:
            own = st.liveness + own_findings(st)
            unproven = [f.component for f in own
                        if f.rule == "G12" and THROTTLE_UNPROVEN in f.text]
            if unproven and len(unproven) == len(own):
                # Idle, a throttled GPU cannot show it is fixed: "watch … if it persists"
                # sent it back to the pool to slow the next job (a 3 a.m. drive).
                which = ", ".join(unproven)
                return (f"drain it and check {which}'s cooling before it takes work (it "
                        "throttled; idle, it cannot show it is fixed)")
            # "when idle" of an idle node (an SRE drill): it can be drained now.
            return "watch; drain it if it persists (no job on it)"
        return "watch; drain when idle if it persists"
    if st.drain.state is DrainState.DRAINED:
        # Healthy again (repaired) but still out of service: its GPUs idle until someone
        # resumes it, and "none" hid that.
        return (f"healthy and {taken_out(st)}: resume it once its repair or maintenance is "
                "done (its GPUs are out of service)")
    if v == "ok" and state is not None and _power_capped(st):
        # No rule judges a SW power cap, but a rank it slows is named a straggler with it as
        # the cause: "none" here contradicted the job's line (a fault audit).
        slows = slowing(st, state)
        if slows is not None and slows[0].power is not None:
            return straggler_action(st, *slows)
    return "none"


def listed(names: list[str], last: str = "and") -> str:
    """``gpu1``, ``gpu1 and gpu3``, ``gpu1, gpu3 and gpu5`` (``last``: ``or`` for a choice):
    the one wording of a list, the store's sentences' too."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def _components(st: NodeState, rule: str) -> list[str]:
    """The components ``rule`` names on the node, once each, in their findings' order."""
    return list(dict.fromkeys(f.component for f in st.all_findings
                              if f.rule == rule and f.component))


def taken_out(st: NodeState) -> str:
    """``drained (reason: hot gpu2)``: advice to resume a node in which nothing is found names
    why it was taken out. A one-shot `status` cannot see a throttle (a rate over minutes) and
    told to resume a node drained for a hot GPU with no word of the heat (a 3 a.m. drive)."""
    reason = st.drain.reason.strip()
    return f"{st.drain.state.value} (reason: {reason})" if reason else st.drain.state.value
