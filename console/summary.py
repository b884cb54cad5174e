"""The machine-readable fleet summary of ``fleetdeck status --json`` (and replay summaries).

The keys are a promise to scripts: add keys, never rename or remove them (docs/protocol.md).
"""

from collections.abc import Iterable
from typing import Any

from fleetdeck.console.bridge import bridge_down_text
from fleetdeck.console.eventlog import EventLine
from fleetdeck.console.health import VERDICT_ORDER
from fleetdeck.console.incidents import incidents
from fleetdeck.console.interruptions import Interruption
from fleetdeck.console.judgements import (
    erroring_ports,
    failed_job,
    findings_worst_first,
    never_fits,
    not_stepping,
    own_job,
    recommended_action,
    reconnect_loop,
    recurrence,
    scheduler_gone,
    shown_eta_s,
    sick_nodes,
    step_quiet,
    step_quiet_hung_at,
    straggler,
    suspect_switches,
    utc_hms,
)
from fleetdeck.console.recording import JudgedNode
from fleetdeck.console.rows import drain_unsaved, health_order, slurm_state
from fleetdeck.console.state import WAITING, FleetState, NodeState
from fleetdeck.protocol.messages import JobStatus


def node_summary(st: NodeState, now: float, state: FleetState | None = None) -> dict[str, Any]:
    """``state``: the fleet, whose job statuses say whether the job the node's last sample
    names still holds it (``own_job``)."""
    return {
        "id": st.node_id,
        "verdict": st.verdict_shown,
        "reasons": st.reasons,
        # Worst first, in the TUI's order (drain before warn): status's REASONS cell cuts at
        # three, and a port DOWN that came after three warnings was cut (a review).
        "findings": [str(f) for f in findings_worst_first(st)],
        "online": bool(st.online),
        "stale": st.stale,
        "state": slurm_state(st),
        "drain": st.drain.state.value,
        "drain_reason": st.drain.reason,
        "drain_by": st.drain.requested_by,
        # The agent's words where it could not save its drain state: a restart forgets it.
        "drain_unsaved": drain_unsaved(st.drain) or None,
        "gpus": st.gpus_present,
        "gpus_expected": st.gpus_expected,
        "ib_ports": st.ib_ports,
        "ib_ports_up": st.ib_ports_up,
        "job": st.job_id if state is None else own_job(st, state),
        "last_seen_s": None if st.last_rx is None else round(now - st.last_rx, 3),
        "seq": st.last_seq,
        "seq_gaps": st.seq_gaps,
        "leaf": st.birth.topology.leaf if st.birth is not None else "",
        "action": recommended_action(st, state),
        "behind_switch": st.behind_switch or None,
        "job_still_stepping": st.job_stepping or None,
        "owner": st.digest.by if st.digest is not None else None,
        # Structured beside ``action``'s words, for scripts (docs/protocol.md).
        "recurrence": recurrence(st),
        "reconnect_loop": reconnect_loop(st),
    }


JUDGED_MAX = 500
"""Nodes a recording's header lists as judged not ok when it started (worst first)."""


def judged_not_ok(state: FleetState, most: int = JUDGED_MAX) -> list[JudgedNode]:
    """The nodes the console judged anything but ok (or waiting), worst first, with their
    findings: what a recording started now keeps in its header, because a replay of it
    cannot rebuild what rests on the hour before (docs/recording.md)."""
    bad = [st for st in state.nodes.values() if st.verdict_shown not in ("ok", WAITING)]
    bad.sort(key=lambda st: (-VERDICT_ORDER[st.verdict], st.node_id))
    return [JudgedNode(st.node_id, st.verdict_shown,
                       tuple(str(f) for f in st.all_findings[:20])) for st in bad[:most]]


def job_summary(job: JobStatus, state: FleetState, now: float) -> dict[str, Any]:
    """The job's own status plus the console's judgements of it: ``straggler`` (null or the
    slowest rank with its slowdown and likely cause), ``sick_nodes`` (its nodes that stall
    it now, worst first; empty when none), ``failed`` (null, or a job that ended failed and
    waits for an operator's restart: ``judgements.failed_job``) and ``not_stepping_s``
    (seconds since a running job's step last advanced, when it stopped stepping; null
    otherwise), ``step_quiet_s`` (the same for a step that has stood still a minute or more,
    not hung yet: a checkpoint save looks the same) with ``hung_at`` (when it is called hung
    if no step comes, as the TUI says it; null otherwise)."""
    found = straggler(job, state)
    quiet = not_stepping(job, state, now)
    still = step_quiet(job, state, now) if quiet is None else None
    own = job.model_dump(mode="json")
    # A hung job's status is its last step's: its ETA read 1845 s while the TUI showed "-" (a
    # jobs audit); nor one whose step stands still (``shown_eta_s``): the TUI's rule.
    own["eta_s"] = shown_eta_s(job, state, now, quiet, still)
    failed = failed_job(job, state)
    return {**own,
            # 0-1 as documented: a scheduler's total_steps may be an estimate that the job
            # outruns (step 500 of 10 read "progress 50").
            "progress": (round(min(1.0, job.step / job.total_steps), 4) if job.total_steps
                         else None),
            "straggler": None if found is None else found.as_json(),
            "sick_nodes": [s.as_json() for s in sick_nodes(job, state)],
            "not_stepping_s": None if quiet is None else round(quiet, 1),
            "step_quiet_s": None if still is None else round(still, 1),
            "hung_at": None if still is None else round(step_quiet_hung_at(
                job, still, now, state.job_step_delta.get(job.job_id)), 3),
            "never_fits": never_fits(job, state) or None,
            "failed": None if failed is None else failed.as_json()}


def fleet_summary(state: FleetState, now: float, *,
                  interruptions: list[Interruption] | None = None,
                  log: Iterable[EventLine] = (), dated: bool = True,
                  **extra: Any) -> dict[str, Any]:
    """``log``: the session's timeline, for each incident's own (``session.timeline()``).
    ``dated``: ``incidents``' (False for a watch of a few seconds: ``status``)."""
    t = state.totals()
    unborn = state.unborn_why()
    return {
        "cluster": state.cluster,
        **extra,
        "totals": {
            "nodes": t.nodes,
            "gpus": t.gpus,
            "gpus_present": t.gpus_present,
            # By what they can do now, as the overview and the clusters view count them.
            "gpus_in_use": t.gpus_use.in_use,
            "gpus_free": t.gpus_use.free,
            "gpus_failed": t.gpus_use.failed,
            "gpus_out": t.gpus_use.out,
            "gpus_waiting": t.gpus_use.waiting,
            "ib_ports": t.ib_ports,
            # Up on nodes heard from; a silent node's ports are unknown, whatever it last said.
            "ib_ports_up": t.ib_ports_up,
            "ib_ports_down": t.ib_ports_down,
            "ib_ports_unknown": t.ib_ports_unknown,
            "ib_ports_erroring": sum(erroring_ports(st) for st in state.nodes.values()),
            "by_verdict": t.by_verdict,
            "drained": t.drained,
            "draining": t.draining,
            # Of the waiting: heard talking, their keyframe awaited (a viewer's watch).
            "talking_unread": t.talking_unread,
            "malformed": t.malformed,
        },
        "connection_lost": None if state.blind is None else {
            # This loss's start (docs/protocol.md), not an earlier one it was joined to.
            "since": round(state.outage_start(), 3),
            "stale_judged_from": None if state.blind[1] is None else round(state.blind[1], 3),
            "why": state.blind_why,
        },
        # Worst first, as the console's HEALTH sort and status's table (``health_order``).
        "nodes": [node_summary(st, now, state) for st in health_order(state.nodes.values())],
        # Heard from without a readable birth (garbage or a newer major version retained on
        # its birth topic): not judged, so not in "nodes", but not to be read as absent.
        "unborn": sorted(unborn),
        "unborn_why": {node: why for node, why in sorted(unborn.items()) if why},
        "jobs": [job_summary(job, state, now) for job in state.jobs.values()],
        # Nodes running jobs no status was heard of: an ACL without job/+/status (a drill).
        "jobs_unheard": state.jobs_unheard(),
        # Null, or why it is not the ACL: the scheduler said it went, or the broker is too
        # young for it to be back ("scheduler_offline", "broker_young").
        "jobs_unheard_why": state.jobs_unheard_why(now),
        "suspect_switches": [sw.as_json() for sw in suspect_switches(state)],
        "incidents": [inc.as_json() for inc in incidents(state, log, dated=dated)],
        "interruptions": [it.as_json() for it in interruptions or []],
        "scheduler": _scheduler_json(state),
        # The fleet's clocks as this console reads them: whether its own is the odd one out
        # (T1, console/clock.py).
        "clock": state.clocks.fleet.as_json(),
        "collectors": [
            {"collector": c.collector, "online": c.online, "shard": c.shard, "nodes": c.nodes,
             "cluster_nodes": c.cluster_nodes}
            for c in sorted(state.collectors.values(), key=lambda c: c.collector)
        ],
        # The cluster's bridge into this broker (console/bridge.py): null where none was
        # heard (no bridge, or a broker that is the cluster's own without one).
        "bridge": _bridge_json(state),
        "malformed": [
            {"topic": m.topic, "reason": m.reason, "detail": m.detail}
            for m in list(state.malformed.recent)[-20:]
        ],
    }


def _bridge_json(state: FleetState) -> dict[str, Any] | None:
    bridge = state.bridge
    if bridge is None:
        return None
    behind = [] if bridge.up else [
        st.node_id for st in state.nodes.values() if st.digest is not None and st.stale
        and state.behind_bridge(st)]
    return {"up": bridge.up, "since": round(bridge.since, 3),
            "cluster_side": bridge.cluster_side, "nodes_behind": sorted(behind),
            "text": "" if bridge.up else bridge_down_text(
                state.cluster, bridge, len(behind), utc_hms(bridge.since))}


def _scheduler_json(state: FleetState) -> dict[str, Any] | None:
    """null: never heard (a scheduler without ``sched/status``); else online or gone."""
    gone = scheduler_gone(state)
    if gone is not None:
        return gone.as_json()
    sched = state.scheduler
    if sched is None:
        return None
    # Online, or a will not believed yet (this young, or with the broker's shutdown): no
    # incident, no job flagged, but not "online" either.
    return {"name": sched.name, "online": sched.online,
            "since": round(state.scheduler_since, 3), "jobs_as_of": None,
            "jobs_running": [], "text": ""}
