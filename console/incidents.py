"""Incidents: the fleet's findings grouped by what most likely caused them, one line each.

An operator woken at 3 a.m. by a leaf switch failure should read "leaf03-r2 suspect: 16 ports
down on 16 nodes, job 4103 on them" — one incident — not seventeen rows of ports and nodes. The
grouping, from the most specific cause outwards (docs/architecture.md, "Incidents"):

1. **switch** — a suspect switch (``judgements.suspect_switches``, rail-aware) takes every bad
   port behind it and the nodes those ports hang off; two or more rail switches of one leaf
   group failing at once, or recovered together, are one (``judgements.leaf_groups``);
2. **rack** — nodes of one rack that fell silent (offline or stale, agent not merely dead while
   its job keeps stepping) within ``RACK_WINDOW_S`` of each other: power or the rack's network,
   not each node;
3. **job** — two or more nodes that failed within ``JOB_WINDOW_S`` of each other while in one
   job (``struck_job``): XID 79 on three nodes of job 4104 is one incident naming the job and
   its three nodes (each node still drained on its own from the list it opens), not three
   "no job on it" lines once the scheduler has requeued the job elsewhere;
4. **common** — one warning that many nodes say alike, of a rule whose cause they share
   (``COMMON_RULES``: A1, an agent that cannot read its kernel log; T1, clocks off the same
   way; G12's power brake, ``POWER_BRAKE_RULE``: the power they share), at ``common_min``
   nodes or more: 2,048 agents blind after one deployment are one incident, not 2,048; a
   node with a fault of its own besides keeps its own incident;
5. **node** — every other node that is not ``ok``, titled by its worst finding;
6. **job** — a job that failed and waits for its restart, on the incident of the node whose
   rank died where that node's fault is what failed it (``judgements.failed_under``), else
   its own (a warning once it lapsed: ``FailedJob.lapsed``); a running job that stopped
   stepping (hung) with none of its nodes in an error incident, else a job's straggler whose
   node has no incident of its own.

While the console itself is cut off from the broker, one **console** incident comes first: no
node goes stale for the console's own silence (``FleetState.blind``), so no rack looks dark.

Jobs are attached to every incident whose nodes they run on, so the line says what is at stake.
Each incident carries a timeline: the event log's entries about its nodes since shortly before
it began. Domain only: ``status --json``, replay summaries and the views read the same list.
"""

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from math import ceil

from fleetdeck.console.bridge import BridgeState, bridge_down_text
from fleetdeck.console.clock import CLOCK_RULE
from fleetdeck.console.eventlog import EventLine
from fleetdeck.console.health import (
    BLIND_RULE,
    KERNEL_LOG_GAP,
    Finding,
    Severity,
    Verdict,
    reason_line,
)
from fleetdeck.console.judgements import (
    CAUSE_CODES,
    CORRELATION_MIN,
    DEGRADED_PORT,
    RECOVERED,
    FailedJob,
    LeafGroup,
    Straggler,
    SuspectSwitch,
    application_fault,
    failed_job,
    failed_under,
    leaf_groups,
    not_stepping,
    not_stepping_text,
    own_findings,
    own_job,
    recommended_action,
    restart_point,
    scheduler_down,
    scheduler_gone,
    shown_findings,
    straggler,
    struck_job,
    suspect_switches,
    utc_hms,
)
from fleetdeck.console.state import (
    FAILING_STATES,
    HOLDING_NODES,
    JOB_WINDOW_S,
    MEMO_BY_IDENTITY,
    FleetState,
    NodeState,
)
from fleetdeck.hostlist import compress
from fleetdeck.protocol.messages import DrainState

FLEET_RACKS = 3
"""Racks falling silent together (within ``RACK_WINDOW_S``) that make one fleet-wide incident."""
RACK_WINDOW_S = 30.0
"""Nodes of one rack falling silent within this long of each other fell together."""
TIMELINE_LEAD_S = 60.0
"""The timeline starts this long before the incident's first change (what led up to it)."""
TIMELINE_MAX = 30
"""Timeline entries per incident, the newest kept."""

_SILENT = (Verdict.OFFLINE, Verdict.STALE)
_SEVERITY_RANK = {"error": 0, "warn": 1}
_VERDICT_RANK = {Verdict.FAILED: 0, Verdict.OFFLINE: 1, Verdict.STALE: 2, Verdict.DEGRADED: 3,
                 Verdict.OK: 4}


@dataclass
class Incident:
    key: str
    """Stable while the incident lasts: ``switch:leaf03-r2``, ``rack:r07``, ``node:gpu0012``,
    ``job:4101`` (views keep their selection on it)."""
    kind: str
    """switch | rack | fleet (several racks silent at once) | node | job | collector (a
    collector's digests stopped) | bridge (the cluster's bridge into this broker is down) |
    scheduler (its Last Will came) | console (its own broker connection is lost) | common
    (many nodes say one warning alike: ``common_causes``)"""
    severity: str
    """error (work is lost or at risk now) | warn"""
    title: str
    """The root-cause line."""
    since: float
    """When the earliest member changed to what it is now (receive clock, unix s); for a
    switch, the earliest member whose only findings are the switch's ports."""
    nodes: list[str]
    action: str
    jobs: list[str] = field(default_factory=list)
    findings: int = 0
    """Findings folded into this one line."""
    timeline: list[EventLine] = field(default_factory=list)
    job_left: bool = False
    """Nodes that failed together in a job (``job_faults``) that no longer holds any of them
    (requeued elsewhere, or ended): the work they cost is lost already, none on them now."""
    unseen: int = 0
    """Of a job's failed nodes (``job_faults``), those already failed when this console first
    heard them (``NodeState.change_seen``): their ``since`` is when they were heard, not when
    they failed."""
    view_action: str = ""
    """``action`` as the console's views word it, where that differs: ``action`` (JSON,
    ``status``, replay summaries) points at what a CLI user has, this at the nodes view."""
    folded: list[str] = field(default_factory=list)
    """Of a ``common`` incident's nodes, those it stands for alone: nothing else wrong with
    them, so no incident of their own (``common_causes``); ``status`` lists them as one line."""

    def action_for(self, views: bool) -> str:
        """What to do, worded for a front end with the console's views or one without."""
        return (self.view_action or self.action) if views else self.action

    @property
    def losing_work(self) -> bool:
        """Work is lost or at risk now: an error about the fleet itself with a job on it. The
        console's lost connection and a silent collector are errors too, but only hide the
        nodes; a failed idle node loses capacity, not work ("5 losing work now" of 6
        incidents, two with a job: an operator's walkthrough)."""
        return (self.severity == "error" and bool(self.jobs) and not self.job_left
                and self.kind not in ("console", "collector", "bridge", "scheduler"))

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key, "kind": self.kind, "severity": self.severity, "title": self.title,
            "since": round(self.since, 3), "nodes": self.nodes, "jobs": self.jobs,
            "findings": self.findings, "action": self.action, "job_left": self.job_left,
            "unseen": self.unseen,
            **({"folded": self.folded} if self.kind == "common" else {}),
            "timeline": [{"ts": round(e.ts, 3), "source": e.source, "kind": e.kind,
                          "severity": e.severity, "text": e.text} for e in self.timeline],
        }


def _straggler_step(slow: Straggler) -> str:
    """A straggler incident's step: a GPU power-capped by software has its limit put back,
    live, where a drain loses the job's work since its checkpoint (a fault audit)."""
    if slow.power is not None and slow.power.limit == "as_peers":
        return (f"{slow.node}'s capped GPU runs at its peers' power limit, slower: watch it; "
                "drain it when the job checkpoints if it stays slow")
    if slow.power is not None:
        return (f"check the power limit of {slow.node}'s capped GPU (nvidia-smi -q -d POWER: "
                "lowered by nvidia-smi -pl or a power budget?) and restore it; drain it when "
                "the job checkpoints only if it stays slow")
    return "check the straggler's node; drain it when the job checkpoints"

def incidents(state: FleetState, log: Iterable[EventLine] = (), *,
              dated: bool = True) -> list[Incident]:
    """Every current incident, most severe and widest first, then the oldest, then by key.
    ``dated=False``: not by age, for a watch of a few seconds (``status``), whose ``since``
    are only the moments its first telemetry of each node arrived: two runs on one fleet
    listed the same incidents in two orders."""
    # Only nodes that are not ok take part (the state keeps their set): the incidents view
    # regroups on every fleet change, and at 16,384 nodes a few passes over every node would
    # be most of a tick. Sorted, so the grouping does not depend on arrival order.
    bad = _incident_pool(state)
    jobs_on = _jobs_by_node(state, bad)
    taken: set[str] = set()
    out: list[Incident] = []
    switches = suspect_switches(state)
    leaves = leaf_groups(switches)
    # Its rail switches back together are one incident too, as they were while down: the
    # recovery read eight "leaf02-rN recovered" incidents of the same nodes (a drill).
    back = leaf_groups(switches, recovered=True)
    for sw in switches:
        leaf = (back if sw.recovered else leaves).get(sw.leaf)
        if leaf is None or not leaf.holds(sw):
            out.append(_switch_incident(state, sw, jobs_on))
        elif sw is leaf.switches[0]:
            out.append(_leaf_incident(state, leaf, jobs_on, sw.leaf in leaves))
        # A node behind the switch keeps an incident of its own only for findings that are not
        # the switch's (a GPU fault on a node behind a failing switch is still a GPU fault).
        # A silent node is counted for the switch it was behind for a while (judgements), but
        # its silence is its own: it keeps its node or rack incident (a rack that lost power
        # read only "switch suspect: do not drain").
        taken.update(n for n in sw.nodes if not own_findings(state.nodes[n])
                     and state.nodes[n].verdict not in _SILENT)
    bridge = state.bridge
    if bridge is not None and not bridge.up:
        # The cluster's bridge into this broker is down: its nodes' digests stopped with it,
        # one cause, said once, not a collector's or each node's (console/bridge.py).
        out.append(_bridge_incident(state, bridge, bad, taken, jobs_on))
    # Nodes whose collector stopped sending their digests (D1): what is silent is the
    # collector, not the nodes, nor their racks (a scale-out audit saw every rack blamed).
    orphans: dict[str, list[NodeState]] = {}
    for st in bad:
        if st.digest is not None and st.node_id not in taken and any(
                f.rule == "D1" for f in st.liveness):
            orphans.setdefault(st.digest.by, []).append(st)
    for by, group in sorted(orphans.items()):
        out.append(_collector_incident(state, by, group, jobs_on))
        taken.update(st.node_id for st in group)
    for inc in silences(state, jobs_on):
        out.append(inc)
        taken.update(inc.nodes)
    for inc in job_faults(state, jobs_on, taken, bad):
        out.append(inc)
        taken.update(inc.nodes)
    for inc in common_causes(state, bad, jobs_on, taken):
        out.append(inc)
        taken.update(inc.folded)
    for st in bad:
        if st.node_id in taken:
            continue
        out.append(_node_incident(st, jobs_on, state))
        taken.add(st.node_id)
    # Not a common cause's: a straggler or a failed job on one of its nodes is not the agents'
    # doing, and said on it read "agents on 2048 nodes cannot read …; slows job 41": its own.
    by_node = {n: inc for inc in out if inc.kind != "common" for n in inc.nodes}
    now = state.judged_at
    # Only F and NF may be failed: sorting and judging every job on every regroup was most of
    # this pass at 2,048 jobs (a review).
    for job in sorted((j for j in state.jobs.values() if j.state.value in FAILING_STATES),
                      key=lambda j: j.job_id):
        failed = failed_job(job, state)
        if failed is not None:
            _failed_job_incident(failed, by_node, out, state)
    for job in state.jobs.values():
        quiet = not_stepping(job, state, now)
        if quiet is not None:
            home = next((i for i in out if job.job_id in i.jobs and i.severity == "error"),
                        None)
            if home is not None:
                continue  # its failing node's incident says what stops it
            since_ckpt = restart_point(job)
            out.append(Incident(
                f"job:{job.job_id}", "job", "error",
                f"job {job.job_id} hung: {not_stepping_text(job, quiet, now)}, "
                "none of its nodes failing", now - quiet, list(job.nodes),
                "look at its ranks (a collective that never completes: py-spy dump, "
                f"NCCL_DEBUG=INFO); restart-job {job.job_id} {since_ckpt} if it does "
                "not step again", [job.job_id]))
            continue
        found = straggler(job, state)
        if found is None:
            continue
        homeless = []
        # The figure is the scheduler's last step of the job: with the scheduler gone, or the
        # straggler's node silent under a job that does not step on, it is no news. A killed
        # simulator's fleet-silent incident went on saying "slows job 4103 by 25%" (a fault
        # audit).
        sched_gone = scheduler_down(state)
        as_of = f" when last heard ({utc_hms(job.ts / 1000)})"
        for slow in (found, *found.also):
            home = by_node.get(slow.node)
            if home is not None and home.kind == "switch" and (
                    CAUSE_CODES[DEGRADED_PORT] not in slow.causes):
                # Its node is under the switch's incident for the switch's ports alone: a rank
                # a GPU power cap slows read "leaf02-r3 recovered …; slows job 4103 by 47%",
                # its step "nothing to do on the nodes" (a fault audit).
                home = None
            if home is None:
                homeless.append(slow)
                continue
            # "…; job 41; slows job 41 by 12 %" says the job twice: the straggler line is
            # the more telling of the two.
            slows = f"slows job {job.job_id} by {slow.slower_pct:.0f}% (rank {slow.rank})"
            if sched_gone or _silent_under(state.nodes.get(slow.node)):
                slows = (f"slowed job {job.job_id} by {slow.slower_pct:.0f}% (rank "
                         f"{slow.rank}){as_of}")
            home.title = home.title.removesuffix(f"; in job {job.job_id}") + f"; {slows}"
            if job.job_id not in home.jobs:
                home.jobs.append(job.job_id)
        if homeless:
            first = homeless[0]
            text = "; also ".join(s.own_text for s in homeless)
            stale = sched_gone or any(_silent_under(state.nodes.get(s.node)) for s in homeless)
            out.append(Incident(f"job:{job.job_id}", "job", "warn",
                                f"job {job.job_id}: straggler{as_of if stale else ''} {text}",
                                _since(state.nodes.get(first.node)), [s.node for s in homeless],
                                _straggler_step(first),
                                [job.job_id], len(homeless)))
    gone = scheduler_gone(state)
    if gone is not None:
        # Its jobs' statuses are retained as it left them: a job reads R on nodes that died
        # since, and nothing requeues it (a killed simulator's jobs read running for ever).
        out.append(Incident(
            "scheduler", "scheduler", "error" if gone.jobs else "warn", gone.text, gone.since,
            [], "check the scheduler (its service and its log); job states are as of its "
            "going, the nodes are not known to be affected", list(gone.jobs)))
    _attach_timelines(out, log)
    # Worst first means what no one has acted on first (every node drained or draining is in
    # hand), then what loses work now, then the rest by severity and width: a hung job came
    # under an idle drained node (a 3 a.m. drive), and a drained failed node above a degraded
    # one no one had touched, where the overview's top problems (``rows.top_problems``) put
    # the untouched one first (a drill: one rule for both). The fleet's silence and the
    # scheduler gone come before the rest: each makes every other verdict or job state as of
    # then, and while the scheduler is gone no drain or restart is answered (the overview put
    # it first, status last: a review).
    out.sort(key=lambda i: (acted_on(state, i), i.kind not in _FLEET_WIDE,
                            _SEVERITY_RANK.get(i.severity, 2),
                            not i.losing_work, -len(i.nodes), i.since if dated else 0.0,
                            i.key))
    blind = state.blind
    if blind is not None and blind[1] is None:
        # First: while the console hears nothing, nothing else it says is current.
        out.insert(0, Incident(
            "console:broker", "console", "error",
            "no data: the connection to the broker is lost; every verdict is as of then "
            "and no node goes stale for it",
            state.outage_start(), [],
            "check the broker and the network from here to it; the nodes are not known "
            "to be down"))
    return out


_FLEET_WIDE = frozenset({"fleet", "bridge", "scheduler"})
"""Incident kinds that come first (after the console's own loss of its broker)."""


def _silent_under(st: NodeState | None) -> bool:
    """The node is silent and its job does not step on without it: what its rank did is as of
    its silence."""
    return st is not None and st.verdict in _SILENT and not st.job_stepping


def _failed_job_incident(failed: FailedJob, by_node: dict[str, Incident],
                         out: list[Incident], state: FleetState) -> None:
    """A job that ended failed and waits for a restart: said on the incident of each node
    whose rank died, as a job a node holds up is named on that node's (one line for the node
    and the job, and the node's action before the restart: drain it, then restart the job),
    when that node's fault now is the one it failed by (``failed_under``: not a throttle that
    came after its XID 48 was repaired); else an incident of its own, which blames the
    application only where something says so (``application_fault``). A lapsed one
    (``FailedJob.lapsed``) is a warning of its own: said, no longer work lost now.

    Not on a fleet-wide silence: that incident says the nodes are not known to be down (the
    network to the broker, or the agents' host), so the job's failure under it read as caused
    by what this console cannot see, its restart chained after a network check ("check the
    network path …; then restart-job 41", a review). Its own incident says the scheduler's
    word and a restart that does not wait on the console's sight."""
    jid = failed.job_id
    under = [] if failed.lapsed else failed_under(failed, state)
    homes: dict[str, Incident] = {}
    for n in under:
        home = by_node.get(n)
        if home is not None and home.kind != "fleet":
            homes.setdefault(home.key, home)
    if homes:
        # Each failing node's incident says the job (XID 79 on two nodes of job 4102, each its
        # own incident, named it on the first only: a review), with one restart for them all:
        # the same words on each, waiting for every node still to drain.
        homed = [n for n in under if any(n in h.nodes for h in homes.values())]
        for home in homes.values():
            mine = [n for n in under if n in home.nodes]
            waits = failed.drain if len(homes) > 1 or any(
                n not in home.nodes for n in failed.drain) else ()
            restart = failed.restart_once(waits)
            if len(homes) > 1 and not set(homed) <= set(waits):
                restart += f" (one restart for {compress(homed)})"
            if all(_silent_under(state.nodes.get(n)) for n in mine):
                # Silent (a rack's power, a dead node): the restart need not wait for it, and
                # "check the rack's power …; then restart-job" read as if it did. The scheduler
                # places the job only on nodes it reaches.
                restart = (f"{restart}, without waiting for {compress(mine)} (silent: the "
                           "scheduler places it only on nodes it reaches)")
            else:
                restart = f"then {restart}"
            home.title = failed.said_on(home.title)
            home.action = f"{home.action}; {restart}"
            # Work stopped until someone restarts it, whatever the node's own fault's
            # severity (XID 94 kills the rank and leaves the node only degraded).
            home.severity = "error"
            if jid not in home.jobs:
                home.jobs.append(jid)
        return
    why = application_fault(failed, state)
    said = f"; {why}" if why else ""
    out.append(Incident(f"job:{jid}", "job", "warn" if failed.lapsed else "error",
                        f"{failed.what}{said}{f'; {failed.lapsed}' if failed.lapsed else ''}",
                        min(failed.at, state.judged_at or failed.at),
                        list(failed.nodes),
                        failed.action + ("; if it fails so again, the job's own log"
                                         if said else ""), [jid]))


def silences(state: FleetState, jobs_on: dict[str, list[str]] | None = None) -> list[Incident]:
    """Silent nodes that went together: one fleet incident when rack after rack fell silent
    at once, else one per rack, in rack order. Not a node whose job still steps (its agent
    died), nor one whose collector's digests stopped (D1: the collector's silence). The
    overview's top problems show these as the incidents view does; ``jobs_on`` (the jobs
    on each node) names their jobs. Kept until the fleet's shape or jobs change: with every
    node of 16,384 silent, a pass took ~45 ms, on each refresh of either view (a review)."""
    # One kept for each caller: the incidents view (with jobs) and the top problems (without)
    # both refresh on the same change, and one slot was recomputed by each in turn.
    slot = "silences+jobs" if jobs_on is not None else "silences"
    key = (state.shape_revisions, state.jobs_revision)
    memo = state.memo.get(slot)
    if memo is not None and memo[0] == key:
        # Copies: the incidents view attaches each one's timeline (and titles may grow).
        return [replace(inc, nodes=list(inc.nodes), jobs=list(inc.jobs), timeline=[])
                for inc in memo[1]]
    nodes = state.nodes
    silent = [st for n in not_ok_sorted(state) if (st := nodes.get(n)) is not None
              and st.verdict in _SILENT and not st.job_stepping
              # Its deltas are heard (their keyframe is awaited): it talks, so neither its rack
              # nor the network to the broker is silent. As judged: deltas that stopped a
              # stale window ago are a silence like any other.
              and not (st.verdict is Verdict.STALE and st.talks)
              and not (st.digest is not None and any(f.rule == "D1" for f in st.liveness))]
    groups = _rack_groups(silent)
    starts = [_silent_since(st) for group in groups for st in group]
    jobs = jobs_on or {}
    if len(groups) >= FLEET_RACKS and max(starts) - min(starts) <= RACK_WINDOW_S:
        # Rack after rack at once is not each rack's power: the link between the fleet and
        # the broker (a scale-out audit saw a dead simulator as 8 rack incidents).
        found = [_fleet_incident(groups, jobs)]
    else:
        found = [_rack_incident(group, jobs) for group in groups]
    state.memo[slot] = (key, found)
    return [replace(inc, nodes=list(inc.nodes), jobs=list(inc.jobs), timeline=[])
            for inc in found]


def job_faults(state: FleetState, jobs_on: dict[str, list[str]] | None = None,
               taken: set[str] | frozenset[str] = frozenset(),
               pool: list[NodeState] | None = None) -> list[Incident]:
    """Failed nodes of one job whose verdicts changed within ``JOB_WINDOW_S`` of each other:
    one incident per such group of two or more, naming the job, the nodes and what each has
    (the blast radius at once), in job order. Not a node in ``taken`` (a switch's, a rack's),
    nor one whose job steps on (its agent died, not the node). The overview's top problems
    show these as the incidents view does. ``pool``: the not-ok nodes by name, when the
    caller has them (a failed node is not ok, and never one that talks unread)."""
    if pool is None:
        nodes = state.nodes
        pool = [st for n in not_ok_sorted(state) if (st := nodes.get(n)) is not None]
    by_job: dict[str, list[NodeState]] = {}
    for st in pool:
        if st.verdict is not Verdict.FAILED or st.node_id in taken or st.job_stepping:
            continue
        jid = struck_job(st, state)
        if jid is not None:
            by_job.setdefault(jid, []).append(st)
    out: list[Incident] = []
    for jid, members in sorted(by_job.items()):
        if len(members) < 2:
            continue
        members.sort(key=_since)
        # Every window of two or more: one node that failed early must not keep two that
        # failed together later from being one incident (a review).
        runs = [[members[0]]]
        for st in members[1:]:
            if _since(st) - _since(runs[-1][0]) <= JOB_WINDOW_S:
                runs[-1].append(st)
            else:
                runs.append([st])
        together = [run for run in runs if len(run) >= 2]
        for i, run in enumerate(together):
            # The first keeps the plain key (a later group must not move the cursor off it).
            key = f"job:{jid}:failed" + (f":{min(st.node_id for st in run)}" if i else "")
            out.append(_job_fault_incident(state, jid, run, jobs_on or {}, key))
    return out


def _job_fault_incident(state: FleetState, jid: str, members: list[NodeState],
                        jobs_on: dict[str, list[str]], key: str) -> Incident:
    names = sorted(st.node_id for st in members)
    first = _since(members[0])
    found = [shown_findings(st) for st in members]
    heads = [f[0] for f in found if f]
    alike = [_alike(f) for f in found]  # once a node: a regex each finding (2,048 nodes)
    if heads and len(heads) == len(members) and len(set(alike)) == 1:
        # The same fault on each: said once, in the first node's words. Only when every
        # finding is on the same GPU or port of each: the same rules elsewhere ("N1
        # mlx5_ib1:1" said of a node whose mlx5_ib3 is down, a fault audit), or the same
        # first finding with others that differ behind "(+1 more)" (a review), read as one
        # rail's switch. Their texts may differ in figures (error counts, temperatures), not
        # in words or XID codes: XID 154 asking a drain and reset of one node, the IMEX
        # domain's recovery of another, read "the same on each" in the first one's words.
        more = len(found[0]) - 1
        what = (f"the same on each, {reason_line(heads[0])}"
                + (f" (+{more} more)" if more else ""))
    else:
        what = _alike_parts(members, found, alike)
    job = state.jobs.get(jid)
    holds = job is not None and job.state.value in HOLDING_NODES and any(
        n in state.job_nodes(job) for n in names)
    if job is None:
        now = ""
    elif holds:
        now = f"; job {jid} still on them ({job.state.value})"
    elif job.state.value == "R":
        again = f", requeues {job.requeues}" if job.requeues else ""
        now = f"; job {jid} runs again on other nodes ({compress(job.nodes)}{again})"
    else:
        now = f"; job {jid} is {job.state.value} now"
    others = [j for j in _jobs(names, jobs_on) if j != jid]
    # A node first heard already failed has no time of failing, only of being heard: a
    # one-shot status read three nodes failed minutes apart as "at once" (a fault drill).
    seen = [_since(st) for st in members if st.change_seen]
    unseen = len(members) - len(seen)
    # "Before this console heard them" read, in a one-shot status just started, as if the
    # console had missed something (a UX pass): they were failed in the first word it had.
    before = "already failed when first heard"
    if not unseen:
        failed = f"failed {_together(seen)}"
    elif not seen:
        failed = f"had {before}"
    else:
        # Each part plainly: "failed (of them 2 before this console heard them)" read as two
        # of the three failing twice (a review).
        together = _together(seen) if len(seen) > 1 else "while this console watched"
        failed = f"failed: {len(seen)} {together}, {unseen} {before}"
    title = (f"job {jid}: {len(names)} of its nodes {failed} ({compress(names)}): "
             f"{what}{now}{_on_jobs(others)}")
    actions = {recommended_action(st, state) for st in members}
    view_action = ""
    if len(actions) == 1:
        action = f"on each of {compress(names)}: {actions.pop()}"
    else:
        # Where each node's own action is: "its line in the nodes view" sent a `status` user
        # to a view the CLI does not have (a newcomer's run). Both summaries that print it
        # named: `replay --summary` sent at `status` read the live fleet, not the recording.
        each = f"each of {compress(names)} as its own finding says"
        action = (f"{each} (its reasons in the node table, its action per node in "
                  "status --json or replay --summary-json)")
        view_action = f"{each} (its line in the nodes view)"
    return Incident(key, "job", "error", title, first, names, action,
                    [jid, *others], sum(len(f) for f in found), job_left=not holds,
                    unseen=unseen, view_action=view_action)


TITLE_PARTS = 3
"""Groups of alike nodes a job incident's title names before it counts the rest."""
GROUP_SAID_CHARS = 64
"""A group's hostlist longer than this is said as its count (the title's head names them all)."""


def _alike_parts(members: list[NodeState], found: list[list[Finding]],
                 alike: list[tuple[tuple[str, str, str], ...]] | None = None) -> str:
    """The nodes' findings, the nodes alike (``_alike``, one key a node) as one hostlist in
    the first one's words: 2 of 3 failed nodes alike read each node's line in full, and 64
    nodes of which one differed made a title of 64 lines' worth. The TITLE_PARTS largest
    groups, then how many nodes more (each of their own findings is in the node table)."""
    if alike is None:
        alike = [_alike(f) for f in found]
    groups: dict[tuple[tuple[str, str, str], ...], list[int]] = {}
    for i, f in enumerate(found):
        if f:
            groups.setdefault(alike[i], []).append(i)
    # The largest first, so a fault of 60 nodes is never among those counted.
    ordered = sorted(groups.values(), key=len, reverse=True)
    parts = []
    # Only the groups named are worded: 2,048 nodes each of its own made a hostlist and a
    # reason line of every one, to keep three (a review).
    for idx in ordered[:TITLE_PARTS]:
        head = reason_line(found[idx[0]][0])
        said = compress([members[i].node_id for i in idx])
        if len(said) > GROUP_SAID_CHARS:
            # A group scattered through the job (XID 79 on GPU 3 of every eighth node) made a
            # hostlist of each of its nodes: three such groups of 2,048 made a 4 KB title.
            said = f"{len(idx)} nodes"
        parts.append(f"{said}: {head}")
    if len(ordered) > TITLE_PARTS:
        rest = sum(len(idx) for idx in ordered[TITLE_PARTS:])
        parts.append(f"{rest} more nodes, each as its own finding says" if rest > 1
                     else "1 more node, as its own finding says")
    return "; ".join(parts)


def _alike(found: list[Finding]) -> tuple[tuple[str, str, str], ...]:
    """What two nodes share when their findings are one fault: rule, part and words."""
    return tuple((x.rule, x.component, _gist(x.text)) for x in found)


_FIGURES = re.compile(r"(XID \d+)|\d+(?:\.\d+)?")
"""A finding's figures, which vary from node to node of one fault; an XID's code is not one.
Matched whole (group 1 kept): a look-behind for "XID " kept only its first digit, and XID 74
(NVLink) and XID 79 (off the bus) both read "XID 7#" (a review)."""


def _gist(text: str) -> str:
    """A finding's text without its figures: "7/8 GPUs visible" of each node is one fault,
    "XID 154 (drain and reset)" and "XID 154 (recover the IMEX domain)" two."""
    return _FIGURES.sub(lambda m: m.group(1) or "#", text)


def _together(times: list[float]) -> str:
    """How close together changes this console saw were (``job_faults``' window)."""
    span = max(times) - min(times)
    return f"within {span:.0f} s" if span >= 1 else "at once"


def acted_on(state: FleetState, inc: Incident) -> bool:
    """Every node of the incident is drained or draining: an operator has it in hand."""
    # To the first node not drained, not a list of all: a common cause's 16,384 nodes were
    # each looked up for every regroup's sort.
    nodes = state.nodes
    known = False
    for n in inc.nodes:
        st = nodes.get(n)
        if st is None:
            continue
        if st.drain.state is DrainState.NONE:
            return False
        known = True
    if not known:
        return False
    # Its nodes drained, a failed job on them still waits for its restart (unless it lapsed).
    return not any((job := state.jobs.get(j)) is not None
                   and (failed := failed_job(job, state)) is not None and not failed.lapsed
                   for j in inc.jobs)


_NOT_OK = "not_ok:sorted"
_POOL = "incidents:pool"


def shape_position(state: FleetState) -> int:
    """Where the state's shape log ends: it moves whenever any node's shape changed (verdict,
    liveness, drain, findings, busy or not), or a node was born or forgotten, and only then
    (``FleetState._note_shape``). What is derived from the not-ok nodes' shapes alone is kept
    while it stands still."""
    return state.shape_log_base + len(state.shape_log)


def _incident_pool(state: FleetState) -> list[NodeState]:
    """The nodes the incidents group, by name: not ok, and not one that talks unread (it is
    waiting, ``NodeState.unread_talking``). Kept while no node's shape moved: each is read
    from what the shape holds (its verdict; whether it talks shows in its H1, or for a
    digest's in its findings), and a pass over 16,384 not-ok nodes' states cost ~5 ms of a
    regroup that every sample of theirs asks for (docs/performance.md, "Many nodes saying one
    warning alike"). The same list object while kept (``common_causes`` keys on it): do not
    change it."""
    key = shape_position(state)
    memo = state.memo.get(_POOL)
    if memo is not None and memo[0] == key:
        kept: list[NodeState] = memo[1]
        return kept
    nodes = state.nodes
    # ``talks`` first: a property's call on each of 16,384 nodes cost ~1 ms.
    bad = [st for n in not_ok_sorted(state) if (st := nodes.get(n)) is not None
           and st.verdict is not Verdict.OK and not (st.talks and st.unread_talking)]
    state.memo[_POOL] = (key, bad)
    return bad


def not_ok_sorted(state: FleetState) -> list[str]:
    """``state.not_ok`` by name, kept while the set is the same: the incidents, their silences
    and job faults and the overview's top problems each sorted the 16,384 names of a fleet
    all not ok on every regroup (~3 ms each). Comparing the set with the one kept is a walk
    in C. The list is shared: do not change it."""
    memo = state.memo.get(_NOT_OK)
    if memo is not None:
        was: frozenset[str] = memo[0]  # type: ignore[assignment]  # Hashable, as kept
        if state.not_ok == was:
            names: list[str] = memo[1]
            return names
    names = sorted(state.not_ok)
    state.memo[_NOT_OK] = (frozenset(state.not_ok), names)
    return names


def _jobs_by_node(state: FleetState, bad: list[NodeState]) -> dict[str, list[str]]:
    """Jobs by node from the scheduler, plus what a not-ok node's own telemetry names (every
    incident's nodes are not ok: those behind a suspect switch read degraded)."""
    out: dict[str, list[str]] = {}
    for job in state.jobs.values():
        if job.state.value in HOLDING_NODES:
            for node in job.nodes:
                out.setdefault(node, []).append(job.job_id)
    for st in bad:
        jid = own_job(st, state)
        if jid and jid not in out.get(st.node_id, []):
            out.setdefault(st.node_id, []).append(jid)
    return out


def _jobs(nodes: Iterable[str], jobs_on: dict[str, list[str]]) -> list[str]:
    return sorted({j for n in nodes for j in jobs_on.get(n, [])})


def _on_jobs(jobs: list[str]) -> str:
    if not jobs:
        return ""
    shown = ", ".join(jobs[:3]) + (f" +{len(jobs) - 3}" if len(jobs) > 3 else "")
    return f"; job{'s' if len(jobs) > 1 else ''} {shown} on them"


def _since(st: NodeState | None) -> float:
    if st is None:
        return 0.0
    return st.changed_at or st.last_rx or st.first_seen or 0.0


def _switch_incident(state: FleetState, sw: SuspectSwitch,
                     jobs_on: dict[str, list[str]]) -> Incident:
    counts = ", ".join(f"{n} {status}" for status, n in
                       sorted(sw.by_status.items(), key=lambda kv: (-kv[1], kv[0])))
    jobs = _jobs(sw.nodes, jobs_on)
    down = sw.by_status.get("down", 0)
    if sw.recovered:
        # Up again: what is left is the hour its ports' fatal counters count (N2), not a fault
        # to act on now (a UX audit read "suspect ... error" for a switch that came back).
        title = (f"{sw.switch} {RECOVERED}: {len(sw.ports)} ports up again on "
                 f"{len(sw.nodes)} nodes behind it ({compress(sw.nodes)}){_on_jobs(jobs)}")
        action = (f"watch leaf switch {sw.switch} (it came back; a second drop is its "
                  "hardware); nothing to do on the nodes")
    else:
        title = (f"{sw.switch} suspect: {len(sw.ports)} ports ({counts}) on {len(sw.nodes)} "
                 f"nodes behind it ({compress(sw.nodes)}){_on_jobs(jobs)}")
        action = f"check leaf switch {sw.switch} (and its uplinks); do not drain the nodes"
    return Incident(f"switch:{sw.switch}", "switch", "error" if down else "warn", title,
                    _switch_since(state, sw.nodes), list(sw.nodes), action, jobs,
                    len(sw.ports))


def _switch_since(state: FleetState, nodes: list[str]) -> float:
    """When a switch began: when nodes went bad for its ports alone. A member that was already
    failed or degraded by a fault of its own (an XID minutes before) changed verdict then,
    not with the switch: counted, it aged the switch with it (a UX audit read 3m for 80 s)."""
    members = [state.nodes[n] for n in nodes]
    ports_only = [st for st in members if not own_findings(st)]
    return min(_since(st) for st in ports_only or members)


def _leaf_incident(state: FleetState, group: LeafGroup, jobs_on: dict[str, list[str]],
                   failing_too: bool = False) -> Incident:
    """One incident for a leaf group's rail switches failing (or back) together. A group that
    came back keeps the key it had while down (``switch:leaf02``, so the view's selection stays
    on it), unless some of its rails still fail together (``failing_too``: that group has it)."""
    nodes = group.nodes
    jobs = _jobs(nodes, jobs_on)
    key = f"switch:{group.leaf}"
    if group.recovered:
        # Up again: N2's hour on its ports, not a fault to act on now (_switch_incident).
        action = (f"watch leaf group {group.leaf} (its {len(group.switches)} rail switches "
                  "came back together: a second drop is the group's power, management or "
                  "uplinks); nothing to do on the nodes")
        if failing_too:
            key += ":recovered"
    else:
        action = (f"check leaf group {group.leaf} (its switches' power, management and "
                  f"uplinks: {len(group.switches)} rails fail together), then each switch; "
                  "do not drain the nodes")
    return Incident(key, "switch",
                    "error" if group.by_status.get("down") else "warn",
                    f"{group.text}{_on_jobs(jobs)}", _switch_since(state, nodes), nodes, action,
                    jobs, group.ports)


def _rack(st: NodeState) -> str:
    return st.birth.topology.rack if st.birth is not None else ""


def _rack_groups(silent: list[NodeState]) -> list[list[NodeState]]:
    """Clusters of at least ``CORRELATION_MIN`` silent nodes of one rack whose silences began
    within ``RACK_WINDOW_S`` of each other."""
    by_rack: dict[str, list[NodeState]] = {}
    for st in silent:
        rack = _rack(st)
        if rack:
            by_rack.setdefault(rack, []).append(st)
    groups: list[list[NodeState]] = []
    for members in by_rack.values():
        if len(members) < CORRELATION_MIN:
            continue
        members.sort(key=_silent_since)
        run = [members[0]]
        for st in members[1:]:
            if _silent_since(st) - _silent_since(run[-1]) <= RACK_WINDOW_S:
                run.append(st)
                continue
            if len(run) >= CORRELATION_MIN:
                groups.append(run)
            run = [st]
        if len(run) >= CORRELATION_MIN:
            groups.append(run)
    return groups


def _silent_since(st: NodeState) -> float:
    """When the node was last heard from: the start of its silence."""
    if st.online is False and st.status_ts:
        return st.status_ts
    return st.last_rx if st.last_rx is not None else (st.first_seen or 0.0)


def _bridge_incident(state: FleetState, bridge: BridgeState, bad: list[NodeState],
                     taken: set[str], jobs_on: dict[str, list[str]]) -> Incident:
    """The bridge down, with the nodes whose digests stopped with it (taken: no collector,
    rack or node incident of their own for that silence)."""
    group = sorted(st.node_id for st in bad if st.digest is not None
                   and st.node_id not in taken and state.behind_bridge(st)
                   and any(f.rule == "D1" for f in st.liveness))
    taken.update(group)
    jobs = _jobs(group, jobs_on)
    title = bridge_down_text(state.cluster, bridge, len(group), utc_hms(bridge.since))
    if bridge.cluster_side:
        return Incident(f"bridge:{state.cluster}", "bridge", "warn", title, bridge.since, [],
                        "check the site broker and the network from this broker to it "
                        "(this broker's log names the bridge's error)")
    return Incident(
        f"bridge:{state.cluster}", "bridge", "error", f"{title}{_on_jobs(jobs)}", bridge.since,
        group, f"check cluster {state.cluster}'s broker and the network from it to this one; "
        "the nodes are not known to be down", jobs, len(group))


def _collector_incident(state: FleetState, by: str, group: list[NodeState],
                        jobs_on: dict[str, list[str]]) -> Incident:
    nodes = sorted(st.node_id for st in group)
    jobs = _jobs(nodes, jobs_on)
    live = [c.collector for c in state.collectors.values() if c.online]
    others = (f"{len(live)} other collector(s) live: one takes them over shortly" if live
              else "no collector is live: nothing judges these nodes now")
    return Incident(
        f"collector:{by}", "collector", "error" if not live else "warn",
        f"collector {by}: no digest of its {len(nodes)} nodes ({compress(nodes)}); "
        f"{others}{_on_jobs(jobs)}",
        min(st.digest_rx for st in group), nodes,
        f"check collector {by} (its service and its log); the nodes are not known to be down",
        jobs, len(nodes))


def _fleet_incident(groups: list[list[NodeState]], jobs_on: dict[str, list[str]]) -> Incident:
    members = [st for group in groups for st in group]
    nodes = sorted(st.node_id for st in members)
    starts = [_silent_since(st) for st in members]
    jobs = _jobs(nodes, jobs_on)
    if all(st.stopped for st in members):
        # Every agent said goodbye: stopped on purpose (a deployment, a maintenance), not
        # the network, which the title sent the on-call to check (a drill).
        return Incident(
            "fleet:silent", "fleet", "warn",
            f"{len(groups)} racks' agents stopped cleanly within "
            f"{max(starts) - min(starts):.0f} s ({len(nodes)} nodes, {compress(nodes)}): "
            f"their service was stopped, not the network{_on_jobs(jobs)}", min(starts), nodes,
            "start the agents again (systemctl start fleetdeck-agent) unless the stop was "
            "meant; nothing says the nodes are down", jobs, len(nodes))
    title = (f"{len(groups)} racks fell silent within {max(starts) - min(starts):.0f} s "
             f"({len(nodes)} nodes, {compress(nodes)}): the network between the fleet and the "
             f"broker, or the agents' host, not each rack{_on_jobs(jobs)}")
    return Incident("fleet:silent", "fleet", "error", title, min(starts),
                    nodes, "check the network path from the nodes to the broker (and what runs "
                    "the agents); the racks' power is not the likely cause", jobs, len(nodes))


def _rack_incident(group: list[NodeState], jobs_on: dict[str, list[str]]) -> Incident:
    nodes = sorted(st.node_id for st in group)
    rack = _rack(group[0])
    first, last = _silent_since(group[0]), _silent_since(group[-1])
    jobs = _jobs(nodes, jobs_on)
    title = (f"rack {rack}: {len(nodes)} nodes fell silent within {last - first:.0f} s "
             f"({compress(nodes)}): power or the rack's network, not each node{_on_jobs(jobs)}")
    return Incident(f"rack:{rack}", "rack", "error", title, first, nodes,
                    "check the rack's power and top-of-rack/management network; drain the "
                    "nodes if they do not come back", jobs, len(nodes))


COMMON_RULES = frozenset({BLIND_RULE, CLOCK_RULE})
"""Warnings that many nodes share because of something they share, not each node: A1 (an agent
that cannot read its kernel log or its counters: a change to the agent, its unit or the image)
and T1 (clocks off the same way: a time source they share). Not a drain-class finding, nor a
warning of the hardware (G3's XID 94 on a GPU, G6's pending remap, G12/G13's heat, N4's symbol
errors): each node's step there is its own (reset that GPU, check that port), and a switch or
a rack that they share has its own incident (docs/architecture.md, "Incidents")."""
POWER_BRAKE_RULE = "G12"
"""G12 when its throttle is a power brake alone (no thermal reason: ``_power_braked``) joins
``COMMON_RULES``' grouping: NVML's HW power brake is asserted from outside the GPU, by the
system's power supply, so on many nodes at once it is the power they share (a PDU, a power
shelf, a row's feed or its power capping), not each node's supplies; one node's stays its own
incident with its own step (docs/architecture.md, "Incidents")."""
_POWER_BRAKE_CAUSE = (POWER_BRAKE_RULE, "gpu", "clock throttled (power brake)")
"""One cause whatever else the sample said (HW slowdown comes with a brake) and whether it
holds now or within the last minute: the held text of one sample and the live text of the next
made two causes of one brake, each under the threshold."""
_GROUPED_RULES = COMMON_RULES | {POWER_BRAKE_RULE}
_HOSTLISTS = "common:hostlists"
COMMON_MIN = 8
"""Nodes sharing one such warning that make it a common cause: this many, or ``COMMON_SHARE``
of the nodes heard, and never fewer than ``CORRELATION_MIN``."""
COMMON_SHARE = 0.25
COMMON_HOLD_NODES = 2
"""A common cause once formed stays one while this many fewer nodes than ``common_min`` say it
(for ``COMMON_HOLD_S`` at most): a fleet at the threshold, 8 nodes of 16,384 blind and one of
them flapping, flipped between one incident and seven, and a view's selection (kept by key)
jumped with it (docs/architecture.md, "Incidents")."""
COMMON_HOLD_S = 300.0
"""How long a formed common cause is held below ``common_min`` (``COMMON_HOLD_NODES``): past
that it is its nodes' incidents again, as a console that just started would group them."""
_HELD = "common:held"


def common_min(heard: int) -> int:
    """How many nodes make a shared warning one common cause among ``heard`` nodes."""
    return max(CORRELATION_MIN, min(COMMON_MIN, ceil(COMMON_SHARE * heard)))


_Cause = tuple[str, str, str]
"""A common cause: a rule, the kind of component, the text without its figures."""


@lru_cache(maxsize=4096)
def _common_key(f: Finding) -> _Cause | None:
    """A finding's cause as nodes share it: its rule, the kind of its component (``mlx5_ib#:#``)
    and its text without figures or node names (``_gist``); None for a finding no common
    cause takes. Cached: the nodes of one cause say the very same finding."""
    if f.severity is not Severity.WARN:
        return None
    if f.rule == POWER_BRAKE_RULE:
        return _POWER_BRAKE_CAUSE if _power_braked(f) else None
    if f.rule not in COMMON_RULES:
        return None
    return (f.rule, _gist(f.component), _gist(f.text))


def _power_braked(f: Finding) -> bool:
    """A G12 whose throttle names a power brake and no heat: a GPU also throttled for heat
    asks for its own cooling to be checked (``judgements._throttle_step``)."""
    why = f.text.partition("(")[2].partition(")")[0]
    return "power brake" in why and "thermal" not in why


_Sig = tuple[tuple[_Cause, ...], tuple[int, ...]]
"""A node's common causes, each once in the order its findings say them, and how many of its
findings say each: one object for every node alike (``_common_sig``)."""
_Entry = tuple[list[Finding], _Sig | None, bool, tuple[Finding, ...]]
"""What a node's findings give ``common_causes``: the findings (held, so that the identities
that key it stay theirs), their ``_Sig`` (None: no common cause's), whether one of them names
something else wrong, and the first finding of each cause."""
_COMMON_KEYS = MEMO_BY_IDENTITY  # keyed by the findings' ids: not kept across a pickle


def _common_entry(found: list[Finding], sigs: dict[_Sig, _Sig]) -> _Entry:
    causes: list[_Cause] = []
    counts: list[int] = []
    firsts: list[Finding] = []
    other = False
    for f in found:
        k = _common_key(f) if f.rule in _GROUPED_RULES else None
        if k is None:
            other = other or f.severity is not Severity.INFO
            continue
        if k in causes:
            counts[causes.index(k)] += 1
            continue
        causes.append(k)
        counts.append(1)
        firsts.append(f)
    sig: _Sig | None = None
    if causes:
        sig = (tuple(causes), tuple(counts))
        sig = sigs.setdefault(sig, sig)
    return list(found), sig, other, tuple(firsts)


def common_causes(state: FleetState, bad: list[NodeState], jobs_on: dict[str, list[str]],
                  taken: set[str] | frozenset[str] = frozenset(), *,
                  keep: bool = True) -> list[Incident]:
    """One incident for each warning of ``COMMON_RULES`` that ``common_min`` nodes or more say
    alike: 2,048 agents that cannot read their kernel log after one deployment were 2,048 node
    incidents of one title (a review). Its nodes are every node that says it; ``folded``, those
    with nothing else (no incident of their own): a node that also has an XID or a port down
    keeps its own incident for that. Not a node in ``taken`` (a switch's, a rack's, a job's),
    nor a silent one (its silence is its incident). ``bad``: the nodes that are not ok, by
    name. ``keep``: this regroup is ``incidents()``'s, whose causes held and hostlists are kept
    for the next; a view grouping its own pool (the overview's top problems) reads them only:
    writing them, it reset a hold's clock or dropped a held cause as its pool said, and threw
    away the hostlists (a review)."""
    # What a node's findings give (``_Entry``) is kept between regroups by the findings'
    # identities: the nodes of one cause hold the very same finding objects (A1's are cached
    # per errors tuple, ``health.blind_findings``), sample after sample, and a dataclass's
    # hash is slow (equal ones rebuilt, a digest's, are keyed by value in ``_common_key``).
    # The nodes then go in one bucket per ``_Sig`` (by its identity: one object for all
    # alike), the work per node a lookup and an append: at 16,384 nodes all blind, a pass
    # over each node's findings was ~13 ms of a 50 ms stall budget (docs/performance.md,
    # "Many nodes saying one warning alike"). Not by node: an entry of each node's own is
    # one more object a node to read from memory, and read slower than the pass it spared.
    # The grouping is kept while the pool is the same list (``_incident_pool``: no node's
    # shape moved) and ``taken`` the same nodes: a fleet of 16,384 agents blind regroups on
    # each of their samples, and nothing the grouping reads is outside a node's shape (its
    # verdict, findings, liveness, switch, the time of its verdict's change).
    slot = _GROUPS if keep else _GROUPS_READ
    memo = state.memo.get(slot)
    was_grouped: _Grouping | None = memo[1] if memo is not None else None
    at = shape_position(state)
    if (was_grouped is not None and was_grouped.pool is bad and was_grouped.at == at
            and was_grouped.taken == taken):
        grouped = was_grouped
    else:
        grouped = _group(state, bad, taken, at)
        state.memo[slot] = ((), grouped)
    buckets, groups, count, first = (grouped.buckets, grouped.groups, grouped.count,
                                     grouped.first)
    formed = _held_causes(state, {k: sum(map(len, parts)) for k, parts in groups.items()},
                          keep)
    if not formed:
        return []
    common = {k: groups[k] for k in formed}
    out: list[Incident] = []
    # Each cause's hostlist, kept to the next regroup (the same nodes, nearly always: 16,384
    # names took ~6 ms to compress); only this regroup's causes, so none piles up.
    memo = state.memo.get(_HOSTLISTS)
    kept: dict[_Cause, tuple[tuple[str, ...], str]] = memo[1] if memo is not None else {}
    hostlists: dict[_Cause, tuple[tuple[str, ...], str]] = {}
    if keep:
        state.memo[_HOSTLISTS] = ((), hostlists)
    for k, parts in sorted(common.items(), key=lambda kv: (-sum(map(len, kv[1])), kv[0])):
        said = grouped.members.get(k)
        if said is None:
            members = parts[0] if len(parts) == 1 else sorted(
                (st for part in parts for st in part), key=_node_id)
            said = grouped.members[k] = (tuple(st.node_id for st in members),
                                         min(map(_since, members)))
        names, since = said
        # Folded: every finding that names the node's trouble is a common cause's (a node
        # with two, one of them of too few nodes to be one, keeps its own incident).
        folds = [clean for (causes, _n), _m, clean, _f in buckets
                 if clean and k in causes and common.keys() >= set(causes)]
        folded = folds[0] if len(folds) == 1 else sorted(n for part in folds for n in part)
        was = kept.get(k)
        hostlists[k] = was if was is not None and (
            was[0] is names or was[0] == names) else (names, _where(state, k, names))
        out.append(_common_incident(k, list(names), hostlists[k][1], list(folded),
                                    first[k][1], count[k], since, jobs_on))
    return out


_Bucket = tuple[_Sig, list[NodeState], list[str], tuple[Finding, ...]]
"""A ``_Sig``, the nodes that say it, of them those with nothing else wrong, the first
node's findings of each cause."""
_GROUPS = "common:groups"
_GROUPS_READ = "common:groups:read"


@dataclass
class _Grouping:
    """``common_causes``' pass over its pool, kept for the next regroup of the same pool."""
    pool: list[NodeState]
    at: int
    """``shape_position`` when made."""
    taken: frozenset[str]
    buckets: list[_Bucket]
    groups: dict[_Cause, list[list[NodeState]]]
    count: dict[_Cause, int]
    first: dict[_Cause, tuple[str, Finding]]
    members: dict[_Cause, tuple[tuple[str, ...], float]] = field(default_factory=dict)
    """A cause's nodes by name and the earliest change of theirs, made once it is formed."""


def _group(state: FleetState, bad: list[NodeState], taken: set[str] | frozenset[str],
           at: int) -> _Grouping:
    """The nodes of ``bad`` (not in ``taken``, not silent) by the common causes they say."""
    memo = state.memo.get(_COMMON_KEYS)
    entries: dict[object, _Entry]
    sigs: dict[_Sig, _Sig]
    entries, sigs = memo[1] if memo is not None else ({}, {})
    if len(entries) > 2 * len(bad) + 64:
        entries, sigs = {}, {}  # findings of nodes since changed: none piles up
    state.memo[_COMMON_KEYS] = ((), (entries, sigs))
    # id(sig) -> (sig, its nodes, of them those with nothing else wrong, the first's findings)
    buckets: dict[int, _Bucket] = {}
    for st in bad:
        node = st.node_id
        if node in taken or st.verdict in _SILENT:
            continue
        found = st.findings
        ids: object = id(found[0]) if len(found) == 1 else tuple(map(id, found))
        e = entries.get(ids)
        if e is None:
            e = entries[ids] = _common_entry(found, sigs)
        sig = e[1]
        if sig is None:
            continue
        b = buckets.get(id(sig))
        if b is None:
            b = buckets[id(sig)] = (sig, [], [], e[3])
        b[1].append(st)
        # A node with a finding no common cause takes (an XID, a port down) keeps its own
        # incident. Only that, and its own findings are what its incident would show
        # (``shown_findings``), so the fold needs no second pass over them.
        if not (e[2] or st.liveness or st.behind_switch):
            b[2].append(node)
    # Each cause's nodes, how many findings say it, and the first of them (in name order).
    groups: dict[_Cause, list[list[NodeState]]] = {}
    count: dict[_Cause, int] = {}
    first: dict[_Cause, tuple[str, Finding]] = {}
    for (causes, counts), members, _clean, firsts in buckets.values():
        for k, n, f in zip(causes, counts, firsts, strict=True):
            groups.setdefault(k, []).append(members)
            count[k] = count.get(k, 0) + n * len(members)
            head = first.get(k)
            if head is None or members[0].node_id < head[0]:
                first[k] = (members[0].node_id, f)
    return _Grouping(bad, at, frozenset(taken), list(buckets.values()), groups, count, first)


def _held_causes(state: FleetState, said: dict[_Cause, int], keep: bool = True) -> set[_Cause]:
    """Of the causes and how many nodes say each, those that are common causes now: at
    ``common_min`` nodes or more, or formed so at an earlier regroup and held since, at
    ``COMMON_HOLD_NODES`` fewer and for ``COMMON_HOLD_S`` at most below it (by the state's
    judgement clock). What was formed, and since when it is below, is kept in the state's
    memo: a fresh state (``status``, a replay from its start) holds nothing."""
    need = common_min(len(state.nodes))
    hold = max(2, need - COMMON_HOLD_NODES)
    now = state.judged_at
    memo = state.memo.get(_HELD)
    formed: dict[_Cause, float | None] = memo[1] if memo is not None else {}
    held: dict[_Cause, float | None] = {}
    for k, n in said.items():
        if n >= need:
            held[k] = None
        elif k in formed and n >= hold:
            below = formed[k]
            below = now if below is None or below > now else below
            if now - below < COMMON_HOLD_S:
                held[k] = below
    if keep:
        state.memo[_HELD] = ((), held)
    return set(held)


def _where(state: FleetState, k: _Cause, names: tuple[str, ...]) -> str:
    """A cause's nodes as its title names them: a power brake's with their racks first, where
    the on-call walks to (its power is shared by rack and row, not by node)."""
    if k is not _POWER_BRAKE_CAUSE:
        return compress(names)
    nodes = state.nodes
    racks = sorted({r for n in names if (st := nodes.get(n)) is not None and (r := _rack(st))})
    if not racks:
        return compress(names)
    return f"rack{'s' if len(racks) > 1 else ''} {compress(racks)}: {compress(names)}"


def _node_id(st: NodeState) -> str:
    return st.node_id


def _common_incident(k: _Cause, names: list[str], where: str, folded: list[str], first: Finding,
                     found: int, since: float, jobs_on: dict[str, list[str]]) -> Incident:
    rule, component, gist = k
    # The jobs on them, from whichever is the fewer: the nodes or the nodes with jobs.
    if len(names) < len(jobs_on):
        jobs = _jobs(names, jobs_on)
    else:
        held = set(names)
        jobs = sorted({j for n, js in jobs_on.items() if n in held for j in js})
    says = first.text.rpartition("(it says: ")[2].removesuffix(")")  # A1's: the agent's words
    if rule == BLIND_RULE and first.text.startswith(KERNEL_LOG_GAP):
        # A stretch of their logs went unread (a copytruncate during a flood): a gap in what
        # they saw, not blindness, whose step is their access (docs/real-nodes.md).
        title = (f"agents on {len(names)} nodes lost part of their kernel log (the same "
                 f"error: {says}): XIDs logged in it were never read; a log rotation in place "
                 f"during a flood? ({where})")
        action = ("look in the rotated copies of their kernel logs for the Xid lines the "
                  "agents lost; rotate without copytruncate; do not drain for it")
    elif rule == BLIND_RULE:
        what = ("their kernel log" if first.component == "kernel log"
                else "their ports' error counters")
        blind = "XIDs" if first.component == "kernel log" else "N2-N4's counters"
        title = (f"agents on {len(names)} nodes cannot read {what} (the same error: {says}): "
                 f"blind to {blind} there; an agent, unit or image change? ({where})")
        action = ("fix the agents' access (what changed in the agent, its systemd unit or the "
                  "image: its user, its groups, the file's mode); do not drain for it")
    elif rule == POWER_BRAKE_RULE:
        # HW slowdown comes with a brake (NVML: a power brake is one of its causes), and a
        # brake alone is from outside the GPU: the power these nodes share (a fault audit).
        title = (f"power brake on {len(names)} nodes' GPUs ({found} GPUs clock-throttled by "
                 f"an external power brake, not heat): facility power? ({where}){_on_jobs(jobs)}")
        action = ("check the power these nodes share: their racks' PDUs and power shelves, the "
                  "row's feed and any facility power capping; if it is sound, each node's power "
                  "supplies and its BMC's power limit; do not drain for it (the GPUs are not at "
                  "fault); their jobs run slow until it clears")
    else:
        shared = "a time source they share?" if rule == CLOCK_RULE else "something they share?"
        title = (f"{len(names)} nodes say alike {reason_line(first)} (the figures of one of "
                 f"them): {shared} ({where})")
        action = ("check the time source these nodes share (chronyc sources on one of them); "
                  "do not drain for it") if rule == CLOCK_RULE else "check what they share"
    key = f"common:{rule}:{component}:{zlib.crc32(gist.encode()):08x}"
    return Incident(key, "common", "warn", title, since, names, action, jobs, found,
                    folded=folded)


def _node_incident(st: NodeState, jobs_on: dict[str, list[str]],
                   state: FleetState) -> Incident:
    findings = shown_findings(st)
    worst = findings[0] if findings else None
    # In the words of the top problems beside it (``health.reason_line``): "G14 GPU-fabe…:
    # gpu3 not enumerated" put 40 characters of uuid before the gpu3, cut at the panel's width.
    head = reason_line(worst) if worst is not None else st.verdict.value
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    jobs = _jobs([st.node_id], jobs_on)
    # A silent agent whose job still steps names that job in its finding already.
    named = [j for j in jobs if f"job {j} " not in head]
    job_txt = f"; in job{'s' if len(named) > 1 else ''} {', '.join(named)}" if named else ""
    severity = "error" if st.verdict in (Verdict.FAILED, Verdict.OFFLINE) else "warn"
    if st.job_stepping:
        severity = "warn"
    return Incident(f"node:{st.node_id}", "node", severity,
                    f"{st.node_id} {st.verdict.value}: {head}{more}{job_txt}", _since(st),
                    [st.node_id], recommended_action(st, state), jobs, len(findings))


def _attach_timelines(found: list[Incident], log: Iterable[EventLine]) -> None:
    lines = list(log)
    if not found or not lines:
        return
    # Only the nodes the log names: a common cause of 16,384 nodes made a 16,384-entry map on
    # every regroup (~8 ms of the 50 ms stall budget), nearly all of them with no line; the
    # intersection walks each incident's nodes in C (docs/performance.md, "Many nodes saying
    # one warning alike").
    named: set[str] = set()
    for line in lines:
        named.update(line.nodes)
    # Each node's incidents, with the earliest time of a line each takes: one node is in an
    # incident once, so a line of one node (nearly all) needs no set of the incidents it went
    # to (5,000 lines about a common cause's nodes took ~5 ms).
    wanted: dict[str, list[tuple[float, Incident]]] = {}
    for inc in found:
        start = inc.since - TIMELINE_LEAD_S
        for node in named.intersection(inc.nodes):
            wanted.setdefault(node, []).append((start, inc))
    for line in lines:
        ts, about = line.ts, line.nodes
        if len(about) == 1:
            for start, inc in wanted.get(about[0], ()):
                if ts >= start:
                    inc.timeline.append(line)
            continue
        seen: set[str] = set()
        for node in about:
            for start, inc in wanted.get(node, ()):
                if inc.key in seen or ts < start:
                    continue
                seen.add(inc.key)
                inc.timeline.append(line)
    for inc in found:
        inc.timeline.sort(key=_ts)
        del inc.timeline[:-TIMELINE_MAX]


def _ts(line: EventLine) -> float:
    return line.ts
