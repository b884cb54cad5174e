"""Many clusters in one console: a context per cluster, k9s-style, and the fleet-of-fleets row.

Each cluster is watched by its own ``ConsoleSession`` (the one console core, instanced per
cluster: its own MQTT subscription, state, tracker and store), so nothing of one cluster can
leak into another's verdicts or commands. What this module adds is only the comparison across
them: one ``ClusterRow`` per cluster (the counts an on-call reads first) and their sum, for the
console's clusters view and for ``fleetdeck status --cluster a,b --json``.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetdeck.console.incidents import incidents
from fleetdeck.console.state import FleetState
from fleetdeck.protocol.ids import InvalidId, validate_id
from fleetdeck.protocol.messages import JobState


class ContextError(ValueError):
    """A cluster list that names no cluster, a bad name, or one cluster twice."""


def parse_clusters(text: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``: each a valid cluster id, in the order given, no repeats."""
    names = [part.strip() for part in text.split(",")]
    if not any(names):
        raise ContextError("--cluster needs at least one cluster name")
    out: list[str] = []
    for name in names:
        if not name:
            raise ContextError(f"empty cluster name in '{text}' (write a,b)")
        try:
            validate_id(name, "cluster")
        except InvalidId as err:
            raise ContextError(str(err)) from None
        if name in out:
            raise ContextError(f"cluster '{name}' is named twice in '{text}'")
        out.append(name)
    return out


@dataclass(frozen=True)
class ClusterRow:
    """One cluster at a glance: the fleet-of-fleets overview's row."""

    cluster: str
    nodes: int
    by_verdict: dict[str, int]
    gpus: int
    gpus_present: int
    """Present in the last samples (a silent cluster's last word, not what it can run)."""
    ib_ports: int
    ib_ports_up: int
    """Up on nodes heard from (``state.PortUse``): a silent cluster has none up."""
    drained: int
    draining: int
    jobs_running: int
    jobs_total: int
    incidents: int
    top_incident: str
    """The most severe incident's root-cause line ('' when there is none)."""
    connection: str = ""
    """The session's broker connection state ('connected', 'connecting', …; '' headless)."""
    behind_s: float = 0.0
    malformed: int = 0
    gpus_usable: int = 0
    """In use or free (``state.GpuUse``), as the overview counts them: a cluster whose nodes
    all went silent has none, whatever their last samples said."""
    gpus_failed: int = 0
    gpus_out: int = 0
    ib_ports_unknown: int = 0
    """On silent nodes or nodes with no telemetry yet."""
    talking_unread: int = 0
    """Of the waiting nodes, those heard talking, their keyframe awaited (``Totals``): each
    cluster's ``status --json`` totals have it, and so does their sum."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def attention(self) -> int:
        """Nodes an operator has to look at (everything not ok)."""
        return self.nodes - self.by_verdict.get("ok", 0)

    @property
    def unheard(self) -> bool:
        """Nothing heard of the cluster: no node, no job. Its zeros are unknowns (``?``), not a
        healthy empty cluster, and it is listed first, as ``status`` lists an unwatched one."""
        return self.nodes == 0 and self.jobs_total == 0

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster, "nodes": self.nodes, "by_verdict": self.by_verdict,
            "attention": self.attention, "gpus": self.gpus, "gpus_present": self.gpus_present,
            "gpus_usable": self.gpus_usable, "gpus_failed": self.gpus_failed,
            "gpus_out": self.gpus_out,
            "ib_ports": self.ib_ports, "ib_ports_up": self.ib_ports_up,
            "ib_ports_unknown": self.ib_ports_unknown,
            "drained": self.drained, "draining": self.draining,
            "jobs_running": self.jobs_running, "jobs": self.jobs_total,
            "incidents": self.incidents, "top_incident": self.top_incident or None,
            "connection": self.connection or None, "behind_s": round(self.behind_s, 3),
            "malformed": self.malformed, "talking_unread": self.talking_unread,
        }


def cluster_row(state: FleetState, *, connection: str = "", dated: bool = True) -> ClusterRow:
    """The row of one cluster. One pass over its nodes plus the incident grouping: a view
    calls it when the cluster's state changed, not per frame (docs/architecture.md).
    ``dated``: ``incidents``' (False for ``status``: its top incident by key among equals)."""
    t = state.totals()
    found = incidents(state, dated=dated)
    return ClusterRow(
        cluster=state.cluster, nodes=t.nodes, by_verdict=dict(t.by_verdict), gpus=t.gpus,
        gpus_present=t.gpus_present, ib_ports=t.ib_ports, ib_ports_up=t.ib_ports_up,
        drained=t.drained, draining=t.draining,
        jobs_running=sum(1 for j in state.jobs.values() if j.state is JobState.R),
        jobs_total=len(state.jobs), incidents=len(found),
        # A cluster nobody publishes to read "0 nodes … connected", as if fine (a newcomer's
        # run named one that does not exist).
        top_incident=found[0].title if found else (
            "" if t.nodes or state.jobs else "no node heard yet (is the cluster name right?)"),
        connection=connection,
        behind_s=state.behind_s, malformed=t.malformed, gpus_usable=t.gpus_use.usable,
        gpus_failed=t.gpus_use.failed, gpus_out=t.gpus_use.out,
        ib_ports_unknown=t.ib_ports_unknown, talking_unread=t.talking_unread,
    )


def combined(rows: Sequence[ClusterRow]) -> ClusterRow:
    """Every cluster summed into one row (``cluster`` lists them): the site at a glance."""
    by_verdict: dict[str, int] = {}
    for r in rows:
        for verdict, n in r.by_verdict.items():
            by_verdict[verdict] = by_verdict.get(verdict, 0) + n
    worst = _worst(rows)
    return ClusterRow(
        cluster=",".join(r.cluster for r in rows), nodes=sum(r.nodes for r in rows),
        by_verdict=by_verdict, gpus=sum(r.gpus for r in rows),
        gpus_present=sum(r.gpus_present for r in rows),
        ib_ports=sum(r.ib_ports for r in rows), ib_ports_up=sum(r.ib_ports_up for r in rows),
        drained=sum(r.drained for r in rows), draining=sum(r.draining for r in rows),
        jobs_running=sum(r.jobs_running for r in rows),
        jobs_total=sum(r.jobs_total for r in rows), incidents=sum(r.incidents for r in rows),
        top_incident=(f"{worst.cluster}: {worst.top_incident}"
                      if worst is not None else ""),
        behind_s=max((r.behind_s for r in rows), default=0.0),
        malformed=sum(r.malformed for r in rows),
        gpus_usable=sum(r.gpus_usable for r in rows),
        gpus_failed=sum(r.gpus_failed for r in rows), gpus_out=sum(r.gpus_out for r in rows),
        ib_ports_unknown=sum(r.ib_ports_unknown for r in rows),
        talking_unread=sum(r.talking_unread for r in rows),
    )


def _worst(rows: Iterable[ClusterRow]) -> ClusterRow | None:
    """The cluster whose top incident an on-call reads first: most failed nodes, then most
    incidents."""
    with_incident = [r for r in rows if r.top_incident]
    if not with_incident:
        return None
    return max(with_incident, key=lambda r: (r.by_verdict.get("failed", 0)
                                             + r.by_verdict.get("offline", 0), r.incidents))


def worst_first(rows: Sequence[ClusterRow]) -> list[ClusterRow]:
    """Clusters ordered for the fleet-of-fleets view: most nodes needing attention first,
    then by name (a stable order while nothing changes)."""
    return sorted(rows, key=lambda r: (not r.unheard, -(r.by_verdict.get("failed", 0)
                                                        + r.by_verdict.get("offline", 0)),
                                       -r.attention, r.cluster))
