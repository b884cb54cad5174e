"""Digests: a collector's judgement of one node in a few hundred bytes (docs/protocol.md,
"Digests"), made from the collector's NodeState and read back into a console's NodeState.

A console on digests (``console --digests``) keeps the same FleetState and views as one on raw
telemetry: each digest becomes the node's verdict and findings as the collector judged them
(never re-judged), plus a minimal birth and sample holding just the vitals the fleet-wide views
read (GPU presence, utilisation, temperature, power; IB port up or down; the job), so the rows,
the grid and the summaries work unchanged. Node detail subscribes to the node's own raw
telemetry while it is open.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetdeck.console.health import (
    NO_FINDINGS,
    SW_POWER_CAP,
    Finding,
    PortPast,
    Severity,
    Verdict,
    combine,
    port_key,
)
from fleetdeck.protocol import fast, wire2
from fleetdeck.protocol.fast import Birth, GpuInventory, IbPortInventory, Topology
from fleetdeck.protocol.messages import MAX_DIGEST_FINDINGS, DrainInfo, DrainState

if TYPE_CHECKING:  # the state applies digests with the functions below
    from fleetdeck.console.bridge import BridgeState
    from fleetdeck.console.state import NodeState

STEPPING_NOTE = ("; job {job} still stepping — the agent died, not the node: restart the "
                 "agent, do not drain")
"""Said after H1/H2 of a silent node whose job keeps stepping (``NodeState.job_stepping``); a
console on digests reads the job back from it (``apply_digest``)."""
_STEPPING = re.compile(re.escape(STEPPING_NOTE).replace(re.escape("{job}"), r"(\S+)"))

BEHIND_SUSPECT = "behind suspect switch {switch}"
BEHIND_RECOVERED = "behind switch {switch}, which recovered"
"""How F1 (``NodeState.effective_findings``) names the suspect switch a node's bad ports hang
off; a console on digests reads the switch back from it (``apply_digest``)."""
SWITCH_MARK = " (switch)"
"""Appended to a finding of a port behind a suspect switch: the switch's, not the node's."""
_BEHIND = re.compile(
    "^(?:" + re.escape(BEHIND_SUSPECT).replace(re.escape("{switch}"), r"(?P<suspect>\S+?)")
    + "|" + re.escape(BEHIND_RECOVERED).replace(re.escape("{switch}"), r"(?P<recovered>\S+?)")
    + "):")
_NAMED_PORTS = re.compile(
    r": the (?P<what>link faults|findings) of (?P<ports>\S.*) are the switch's$")
"""F1 of a node with a fault of its own names the switch's ports (``effective_findings``)."""

DIGEST_EVERY_S = 5.0
"""A node's digest is re-sent at least this often (fresh vitals) besides on every change."""
DIGESTS_PER_TICK = 4096
"""Digests one tick sends at most (changes first): a collector that just took over thousands of
nodes spreads their first digests over a few ticks instead of stalling one."""
STALE_PERIODS = 3.0
"""A digest not refreshed for this many of its periods (``Digest.every_s``: its collector has
stopped sending it) reads stale (rule D1)."""
DIGEST_STALE_S = STALE_PERIODS * DIGEST_EVERY_S
"""The same at the default period."""


def _finding(f: Finding) -> fast.DigestFinding:
    return fast.DigestFinding(rule=f.rule[:16], severity=f.severity.value,
                              component=f.component[:256], text=f.text[:2048])


def _drain(d: DrainInfo) -> fast.DigestDrain:
    return fast.DigestDrain(state=d.state.value, reason=d.reason, requested_by=d.requested_by,
                            since_ts=d.since_ts, cmd_id=d.cmd_id, unsaved=d.unsaved)


_DIGEST_GPU = ("index", "present", "util_pct", "temp_c", "power_w", "power_limit_w",
               "clock_event_reasons")
_CAPPED_GPU = ("sm_clock_mhz", "sm_clock_max_mhz")
"""Read only of a node with a GPU power-capped by software: what ``PowerCap`` says of it."""
_DIGEST_PORT = ("dev", "port", "state", "phys_state")
_UNSEEN_SAID = (Verdict.FAILED, Verdict.DEGRADED)
"""Verdicts whose change a digest says the collector did not see (``Digest.seen``)."""


def _up(state: str | None, phys: str | None) -> bool:
    return state == "ACTIVE" and phys in (None, "LinkUp")


def _on_digest_clock(ts_ms: int | None, shift_ms: int) -> int | None:
    return None if ts_ms is None else max(0, ts_ms + shift_ms)


def _port_with_past(st: NodeState, p: fast.IbPortSample, shift_ms: int) -> fast.DigestPort:
    """A port with a finding, with its past (``PortPast``) and the link drops ``port_status``
    reads, each left out at its default (docs/protocol.md, "Digests"). The past is dated by
    the agent's samples; ``shift_ms`` (the digest's ``ts`` less its latest sample's) puts it
    on the digest's clock, which a console on digests reads it against: 90 s between the
    agent's clock and the collector's read a flapping link "held steady" (or a quiet port
    still erroring) on digests, not on raw telemetry."""
    h = st.history.ports.get(port_key(p))
    past = PortPast() if h is None else PortPast.of(h)
    return fast.DigestPort(
        dev=p.dev, port=p.port, up=_up(p.state, p.phys_state),
        downs_1h=p.errors_1h.get("link_downed", 0), downed=p.d.get("link_downed", 0) > 0,
        fatal_ms=_on_digest_clock(past.fatal_ms, shift_ms),
        symbol_ms=_on_digest_clock(past.symbol_ms, shift_ms),
        # 0 says "none yet": a first sample shifted to or below 0 is still one.
        first_ms=max(1, past.first_ms + shift_ms) if past.first_ms else 0,
        # "saturated" is said over "storm": either makes N3 never quiet, and only a saturated
        # counter hides a new error since a repair (``PortPast.of_digest``).
        symbols_blind="saturated" if past.saturated else "storm" if past.storm else None)


def _kept_findings(findings: list[Finding]) -> list[Finding]:
    """The findings a digest holds (``MAX_DIGEST_FINDINGS``), F1 always among them. Over the
    limit, the " (switch)" findings go first: F1 names their ports and a console on digests
    makes them its switch's again (``_apply_findings``), while the liveness findings, the
    node's own and F1 have nothing else to carry them. A node with a fault of its own behind a
    dead leaf group has 8 rails x N1 + N2 = 16 switch findings; cut in order, its own port
    fault on a high rail (N3 sorts after N1/N2) was dropped, and the console on digests said
    "check the switch, do not drain" of a node whose cable needed cleaning."""
    if len(findings) <= MAX_DIGEST_FINDINGS:
        return findings
    switch = sum(f.text.endswith(SWITCH_MARK) for f in findings)
    drop = min(switch, len(findings) - MAX_DIGEST_FINDINGS)
    kept: list[Finding] = []
    for f in reversed(findings):
        if drop and f.text.endswith(SWITCH_MARK):
            drop -= 1  # the last ones, as a cut in order did before
            continue
        kept.append(f)
    kept.reverse()
    if len(kept) <= MAX_DIGEST_FINDINGS:
        return kept
    # Still too many (the node's own findings alone fill it): keep F1, wherever it sorted.
    f1 = next((f for f in kept if f.rule == "F1"), None)
    head = [f for f in kept if f is not f1][:MAX_DIGEST_FINDINGS - (f1 is not None)]
    return head if f1 is None else [*head, f1]


def make_digest(st: NodeState, by: str, now: float,
                every_s: float = DIGEST_EVERY_S) -> fast.Digest:
    """The digest of a judged node (``by``: the collector's id); ``codec.encode`` sends it."""
    t = st.sample
    gpus: tuple[fast.GpuSample, ...] = ()
    ports: list[fast.DigestPort] = []
    job = ranks = None
    step_ms: float | None = None
    limit_w: float | None = None
    shift_ms = 0  # sent only with a port's past: a healthy node's digest stays as before
    if t is not None:
        # Ports with an N finding carry what the raw console reads of their past
        # (``judgements.port_past``): whether a link flaps, whether a job is held up by it.
        # Only those: a healthy node's digest stays as small as before.
        n_ports = {f.component for f in st.findings if f.rule.startswith("N")}
        if n_ports:
            shift_ms = int(now * 1000) - t.ts  # the agent's sample clock to the digest's
            ports = [_port_with_past(st, p, shift_ms) if f"{p.dev}:{p.port}" in n_ports
                     else fast.DigestPort(dev=p.dev, port=p.port, up=_up(p.state, p.phys_state))
                     for p in wire2.full(t).ib_ports]
        if type(t) is wire2.Pending and not t.built:
            # A quiet sample's columns: a collector sends every node's digest every few
            # seconds, which must not build every node's rows.
            cols = t.gpu_columns(*_DIGEST_GPU)
            p_cols: Iterable[tuple[Any, ...]] = zip(*map(t.port_column, _DIGEST_PORT),
                                                    strict=True)
        else:
            full = wire2.full(t)
            cols = [[getattr(g, f) for g in full.gpus] for f in _DIGEST_GPU]
            p_cols = ((p.dev, p.port, p.state, p.phys_state) for p in full.ib_ports)
        index, present, util, temp, power, limits, reasons = cols
        # The common case in C (every GPU present, each with a limit; no clock event at all):
        # a collector digests every node every few seconds.
        limit_w = (max(limits) if limits and all(present) and None not in limits else max(
            (w for p, w in zip(present, limits, strict=True) if p and w is not None),
            default=None))
        if any(reasons) and any(r and r & SW_POWER_CAP for r in reasons):
            gpus = _digest_gpus(t, cols)
        else:
            # No GPU capped, the common case: no row of seven a GPU unpacked for a cap (a
            # collector digests every node every few seconds: 9 -> 13 us a quiet node so).
            gpus = tuple(fast.GpuSample(index=i, present=p, util_pct=u, temp_c=c, power_w=w)
                         for i, p, u, c, w in zip(index, present, util, temp, power, strict=True))
        if not n_ports:
            ports = [fast.DigestPort(dev=dev, port=port, up=_up(state, phys))
                     for dev, port, state, phys in p_cols]
        if t.job is not None:
            # Its step time too: a 2-node job's slow node is measured against the other
            # node's own (``judgements._other_node_time``), and without it a console on
            # digests measured it against the scheduler's median, between the two nodes:
            # "+17%" of a node slowing its job 37 % (docs/protocol.md, "Digests").
            job, ranks, step_ms = t.job.id, t.job.ranks_on_node, t.job.step_time_ms
    topo = st.birth.topology if st.birth is not None else Topology()
    return fast.Digest(
        node=st.node_id, by=by, ts=int(now * 1000), verdict=st.verdict.value,
        findings=[_finding(f) for f in _kept_findings(st.all_findings)],
        online=st.online, stopped=st.stopped and st.online is False, stale=st.stale,
        drain=_drain(st.drain), job=job, ranks_on_node=ranks,
        struck_job=st.left_when_changed() if st.verdict is Verdict.FAILED else None,
        # Only where an incident reads it: every healthy node's first verdict is unseen too.
        seen=st.change_seen or st.verdict not in _UNSEEN_SAID,
        gpus_expected=st.gpus_expected, gpus=gpus, ports=ports, leaf=topo.leaf, rack=topo.rack,
        interval_s=st.interval_s,
        last_seen_s=None if st.last_rx is None else round(max(0.0, now - st.last_rx), 3),
        seq_gaps=st.seq_gaps, every_s=every_s, shift_ms=shift_ms, power_limit_w=limit_w,
        recurred=_recurred(st), step_time_ms=step_ms)


def _digest_gpus(t: wire2.Sample, cols: list[Sequence[Any]]) -> tuple[fast.GpuSample, ...]:
    """A digest's GPUs of a node with one power-capped by software (bit 0x4): five vitals
    each, and of a capped GPU what ``judgements.PowerCap`` reads of it too, its limit, clocks
    and clock events. A healthy GPU's limit is the node's ``Digest.power_limit_w``, once: 20
    bytes a GPU for every node, where only a straggler's is ever compared (docs/protocol.md,
    "Digests")."""
    if type(t) is wire2.Pending and not t.built:
        sm, sm_max = t.gpu_columns(*_CAPPED_GPU)
    else:
        full = wire2.full(t).gpus
        sm, sm_max = [g.sm_clock_mhz for g in full], [g.sm_clock_max_mhz for g in full]
    out: list[fast.GpuSample] = []
    for i, present, util, temp, power, limit, reasons, clock, clock_max in zip(
            *cols, sm, sm_max, strict=True):
        if reasons and reasons & SW_POWER_CAP:
            out.append(fast.GpuSample(index=i, present=present, util_pct=util, temp_c=temp,
                                      power_w=power, power_limit_w=limit,
                                      sm_clock_mhz=clock, sm_clock_max_mhz=clock_max,
                                      clock_event_reasons=reasons))
        else:
            out.append(fast.GpuSample(index=i, present=present, util_pct=util, temp_c=temp,
                                      power_w=power))
    return tuple(out)


def _recurred(st: NodeState) -> fast.DigestRecurrence | None:
    """The node's recurrence as ``judgements.recurrence`` says it (a failed node only), on
    the collector's clock."""
    r = st.recurred
    if r is None or st.verdict is not Verdict.FAILED:
        return None
    cleared, again = r
    return fast.DigestRecurrence(
        cleared_ms=max(0, round(cleared * 1000)),
        after_s=round(st.recurred_after_s(), 3),
        findings=tuple(again)[:MAX_DIGEST_FINDINGS])


def digest_key(st: NodeState) -> tuple[object, ...]:
    """What makes a digest worth sending at once (vitals alone wait for the refresh)."""
    return (st.shape_rev, st.job_id, st.drain)


@dataclass
class _Sent:
    key: tuple[object, ...]
    at: float


class DigestSender:
    """Which owned nodes need a digest now: changed since the last one, or due a refresh."""

    def __init__(self, by: str, every_s: float = DIGEST_EVERY_S,
                 per_tick: int = DIGESTS_PER_TICK) -> None:
        self.by = by
        self.every_s = every_s
        self.per_tick = per_tick
        self._sent: dict[str, _Sent] = {}
        self.sent = 0

    def forget(self, node: str) -> None:
        self._sent.pop(node, None)

    def due(self, nodes: dict[str, NodeState], now: float) -> list[fast.Digest]:
        changed: list[NodeState] = []
        refresh: list[tuple[float, NodeState]] = []
        for node_id, st in nodes.items():
            if not st.judged or (st.sample is None and st.online is not False
                                 and not st.stale):
                # Waiting for its first sample (just born, or just taken over): an "ok" now
                # would be a guess; the previous owner's retained digest stands until then.
                continue
            sent = self._sent.get(node_id)
            if sent is None or sent.key != digest_key(st):
                changed.append(st)
            elif now - sent.at >= self.every_s:
                refresh.append((sent.at, st))
        refresh.sort(key=lambda item: item[0])
        out: list[fast.Digest] = []
        for st in [*changed, *(st for _at, st in refresh)][: self.per_tick]:
            self._sent[st.node_id] = _Sent(digest_key(st), now)
            out.append(make_digest(st, self.by, now, self.every_s))
        self.sent += len(out)
        return out


# --- the console side ---------------------------------------------------------------------------


_GPUS: dict[int, tuple[GpuInventory, ...]] = {}
_PORTS: dict[tuple[tuple[str, int], ...], tuple[IbPortInventory, ...]] = {}
_TOPOLOGY: dict[tuple[str, str], Topology] = {}
"""Frozen inventory shared between the nodes that have the same (a fleet has a handful of
shapes): one set of rows for all of them, not 16 Structs a node."""


def _birth_of(d: fast.Digest, cluster: str) -> Birth:
    """A birth holding only what the views read from one (inventory counts, leaf and rack)."""
    gpus = _GPUS.get(d.gpus_expected)
    if gpus is None:
        gpus = _GPUS[d.gpus_expected] = tuple(GpuInventory(index=i)
                                              for i in range(d.gpus_expected))
    key = tuple((p.dev, p.port) for p in d.ports)
    ports = _PORTS.get(key)
    if ports is None:
        if len(_PORTS) > 1024:
            _PORTS.clear()  # port names come from the network: never grow without bound
        ports = _PORTS[key] = tuple(IbPortInventory(dev=dev, port=port) for dev, port in key)
    topo = _TOPOLOGY.get((d.leaf, d.rack))
    if topo is None:
        if len(_TOPOLOGY) > 65536:
            _TOPOLOGY.clear()
        topo = _TOPOLOGY[(d.leaf, d.rack)] = Topology(leaf=d.leaf, rack=d.rack)
    return Birth(cluster=cluster, node=d.node, bdSeq=0, ts=d.ts, source="digest",
                 interval_s=d.interval_s, topology=topo, gpus=gpus, ib_ports=ports,
                 gpus_expected=d.gpus_expected)


_NO_DRAIN = fast.DigestDrain()
_NOT_DRAINED = DrainInfo()

_PORT_SAMPLES: dict[tuple[str, int, bool, int, bool], fast.IbPortSample] = {}


def _port_sample(p: fast.DigestPort) -> fast.IbPortSample:
    key = (p.dev, p.port, p.up, p.downs_1h, p.downed)
    got = _PORT_SAMPLES.get(key)
    if got is None:
        if len(_PORT_SAMPLES) > 4096:
            _PORT_SAMPLES.clear()
        # The link drops the collector saw, where ``judgements.port_status`` reads them of a
        # sample: a flapping link read "erroring" on digests, "flapping" on raw telemetry.
        # A port not up: "DOWN" (what port_status and the counts read), and its physical
        # state unknown (None, shown "?"): "Disabled" was made up, beside the node's finding
        # "DOWN/Polling" in the fabric view's port table (a newcomer's run).
        got = _PORT_SAMPLES[key] = fast.IbPortSample(
            dev=p.dev, port=p.port, state="ACTIVE" if p.up else "DOWN",
            phys_state="LinkUp" if p.up else None,
            d={"link_downed": 1} if p.downed else {},
            errors_1h={"link_downed": p.downs_1h} if p.downs_1h else {})
    return got


_PORT_LISTS: dict[tuple[tuple[str, int, bool, int, bool], ...], tuple[fast.IbPortSample, ...]] = {}


def _sample_of(d: fast.Digest) -> fast.Telemetry:
    # Keyed on what the sample reads of a port (``_port_sample``) only: keyed on the whole
    # port, its past (``fatal_ms`` …, per node, shifted anew by every digest) made each bad
    # node's digest a new entry, and the list no longer shared between nodes.
    key = tuple((p.dev, p.port, p.up, p.downs_1h, p.downed) for p in d.ports)
    ports = _PORT_LISTS.get(key)
    if ports is None:
        if len(_PORT_LISTS) > 4096:
            _PORT_LISTS.clear()
        ports = _PORT_LISTS[key] = tuple(_port_sample(p) for p in d.ports)
    job = None if d.job is None else fast.JobOnNode(
        id=d.job, ranks_on_node=d.ranks_on_node if d.ranks_on_node is not None else 8,
        step_time_ms=d.step_time_ms)
    return fast.Telemetry(node=d.node, seq=0, bdSeq=0, ts=d.ts, interval_s=d.interval_s,
                          job=job, gpus=d.gpus, ib_ports=ports)


def apply_digest(st: NodeState, d: fast.Digest, rx: float, cluster: str) -> None:
    """Make ``st`` show the collector's judgement (FleetState.apply in digest mode)."""
    old = st.digest
    # As old as it says: a retained digest of a collector that died long ago, received now,
    # looked fresh for 15 s to every console started later (status --digests said "ok" of a
    # fleet with no live collector). Collectors' and consoles' clocks are NTP-synced, as the
    # lag figures assume (docs/architecture.md).
    st.digest, st.digest_rx = d, min(rx, d.ts / 1000)
    if old is None or st.birth is None or (old.gpus_expected, old.leaf, old.rack,
                                           len(old.ports)) != (d.gpus_expected, d.leaf, d.rack,
                                                               len(d.ports)):
        st.birth = _birth_of(d, cluster)
    if not st.raw:
        st.telemetry = _sample_of(d)
    st.online = d.online
    # The agent's clean goodbye, as the collector heard it: without it the fleet incident
    # blamed the network for agents stopped on purpose (docs/protocol.md, "Digests").
    st.stopped = d.stopped and d.online is False
    if d.drain == _NO_DRAIN:
        st.drain = _NOT_DRAINED
    elif old is None or old.drain != d.drain:
        dd = d.drain
        st.drain = DrainInfo.model_construct(state=DrainState(dd.state), reason=dd.reason,
                                             requested_by=dd.requested_by,
                                             since_ts=dd.since_ts, cmd_id=dd.cmd_id,
                                             unsaved=dd.unsaved)
    st.seq_gaps = d.seq_gaps
    st.last_rx = None if d.last_seen_s is None else d.ts / 1000 - d.last_seen_s
    # The collector's word (a console on digests judges no recurrence: it sees no clearing):
    # without it the action said "reset gpu0 or reboot" of a fault back after its repair,
    # where the raw console said "replace gpu0" (``judgements.recurrence_text``).
    r = d.recurred
    st.recurred = None if r is None else (r.cleared_ms / 1000, r.findings)
    if old is None or old.findings != d.findings:
        _apply_findings(st, [Finding(f.rule, Severity(f.severity), f.component, f.text)
                             for f in d.findings])
        # The collector found the agent dead under a job that still steps: the action and
        # the incident follow it ("restart the agent"), not "check the node; drain it" under
        # its own "do not drain" (an SRE drill read both in one incident).
        st.job_stepping = next((m.group(1) for f in d.findings if f.rule in ("H1", "H2")
                                and (m := _STEPPING.search(f.text)) is not None), "")


def _apply_findings(st: NodeState, findings: list[Finding]) -> None:
    """The collector's findings, with what its fleet-wide correlation said put back where a
    console on raw telemetry keeps it: the suspect switch (F1) in ``behind_switch`` and its
    ports, their findings unmarked. Kept as received, a node behind a suspect switch read as
    one with faults of its own on digests: "watch; drain it if it persists" where the raw
    console said "check switch leaf02-r5; do not drain", an incident per node instead of the
    switch's one, and "18 nodes need attention" beside the raw console's 2 (an SRE drill)."""
    f1 = next((f for f in findings if f.rule == "F1"), None)
    m = _BEHIND.match(f1.text) if f1 is not None else None
    ports: set[str] = set()
    own: set[str] = set()
    out: list[Finding] = []
    for f in findings:
        if f.rule == "F1":
            continue  # NodeState.effective_findings makes it again from behind_switch
        # The mark is taken off with or without F1: a digest cut before its F1 (an older
        # collector's) kept it, and the console's own correlation appended a second one.
        if f.text.endswith(SWITCH_MARK):
            ports.add(f.component)
            out.append(Finding(f.rule, f.severity, f.component, f.text[:-len(SWITCH_MARK)]))
        else:
            out.append(f)
            own.add(f.component)
    st.findings = out or NO_FINDINGS
    named = _NAMED_PORTS.search(f1.text) if f1 is not None and m is not None else None
    if named is not None:
        # A port whose findings the digest had no room for is still behind the switch.
        ports.update(named["ports"].split(", "))
        if named["what"] == "link faults":  # every one of them link-only (its own symbols)
            own.update(ports)
    if m is None:
        if st.behind_by_collector:  # else the console's own correlation's: it clears them
            st.behind_switch, st.behind_ports, st.behind_recovered = "", frozenset(), False
            st.behind_link_only = frozenset()
            st.behind_by_collector = False
        return
    st.behind_by_collector = True
    st.behind_switch = m["suspect"] or m["recovered"]
    st.behind_recovered = m["recovered"] is not None
    st.behind_ports = frozenset(ports)
    # A port with a finding the switch did not take (its symbol errors) is a link-only one:
    # only its link faults are the switch's (SuspectSwitch.link_only).
    st.behind_link_only = frozenset(ports & own)


def judge_digest(st: NodeState, now: float, bridge: BridgeState | None = None) -> Verdict:
    """The verdict of a node known from digests: the collector's, unless its digests stopped
    (D1: the collector is gone and nobody took the node over yet, or the cluster's bridge into
    this broker is down, ``bridge``: then it says so, console/bridge.py)."""
    d = st.digest
    assert d is not None
    age = now - st.digest_rx
    if age > STALE_PERIODS * d.every_s:
        st.stale = True
        # Its last digest crossed before the bridge fell: the bridge is silent, not the node
        # nor its collector (an incident of the bridge holds it, console/incidents.py).
        why = ("its cluster's bridge into this broker is down, not this node"
               if bridge is not None and bridge.behind(st.digest_rx)
               else f"last from collector {d.by}")
        st.liveness = [Finding("D1", Severity.WARN, "", f"no digest for {age:.0f} s ({why})")]
        return Verdict.STALE
    st.stale = d.stale
    st.liveness = NO_FINDINGS
    verdict = Verdict(d.verdict)
    if (st.behind_switch and not st.behind_by_collector
            and verdict in (Verdict.FAILED, Verdict.DEGRADED)):
        # The collector owns too few of the switch's nodes to suspect it (each judges its own
        # shard); this console sees them all (``judgements.correlate_digests``): the node's
        # port faults are the switch's, as a console on raw telemetry judges them. Liveness
        # findings stay in: only H3 can come with a failed or degraded verdict (H1 and H2
        # come with stale and offline), and it keeps the node failed, as the raw console's
        # H3 branch does before it combines the findings ("duplicate node id" read degraded).
        verdict = combine(st.effective_findings)
    return verdict
