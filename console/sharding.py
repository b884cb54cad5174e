"""A sharded collector (``collect --shard K/N``) around the one console core: the
:class:`ConsoleSession` ingests, judges and stores; this adds what sharding needs, once per
tick (docs/architecture.md, "Sharded collectors"):

- the collector's own birth (retained, and re-sent after every reconnect) with a Last Will
  saying it is gone, under ``collector/<id>``, with the cluster's node count once its births
  came whole (``cluster_nodes``: what a console on digests trusts its own count by);
- subscriptions that follow ownership: ``node/<id>/+`` for every node it owns, added when it
  gains a node (the broker then re-sends the node's retained birth and status) and removed
  when it loses one (whose state it drops);
- a digest per owned node, retained, on change and every ``DIGEST_EVERY_S`` (5 s; the
  ``--digest-every`` of ``collect``).

Ownership itself is :class:`fleetdeck.console.shard.ShardScope`, fed by the ingest.
"""

import logging
import time

from fleetdeck.console.digest import DIGEST_EVERY_S, DigestSender
from fleetdeck.console.retained_burst import STATUS_ASK_QUIET_S
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.shard import ANNOUNCE_EVERY_S, ShardScope
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import CollectorStatus
from fleetdeck.protocol.topics import Kind, node_filter, topic_for
from fleetdeck.transport import Will

log = logging.getLogger("fleetdeck.sharding")


def collector_status(scope: ShardScope, online: bool, shard: str, now: float,
                     nodes: int | None = None, cluster_nodes: int | None = None) -> bytes:
    return codec.encode(CollectorStatus(collector=scope.me, online=online,
                                        started=scope.started_ms, shard=shard, nodes=nodes,
                                        cluster_nodes=cluster_nodes, ts=int(now * 1000)))


def collector_will(cluster: str, scope: ShardScope, shard: str) -> Will:
    """What the broker publishes, retained, when this collector's connection dies."""
    return (topic_for(cluster, Kind.COLLECTOR, scope.me),
            collector_status(scope, False, shard, time.time()), 1, True)


class ShardRunner:
    def __init__(self, session: ConsoleSession, scope: ShardScope, shard: str,
                 digest_every_s: float = DIGEST_EVERY_S) -> None:
        if session.feed is None:
            raise ValueError("a sharded collector needs a broker")
        self.session = session
        self.scope = scope
        self.shard = shard
        self.sender = DigestSender(scope.me, every_s=digest_every_s)
        self._announced_connects = 0
        self._announced_at = float("-inf")
        self._announced_changes = 0
        self._unbelieved = 0
        self._known = (-1, 0.0)
        """How many nodes ``scope.known`` held, and since when (``cluster_nodes``)."""
        self._counted: int | None = None
        """The count ``cluster_nodes`` last said: None until one connection's births were
        known whole."""
        self._said_cluster: int | None = None
        """The ``cluster_nodes`` of its last birth."""
        self.stopping = False
        """Set to leave: the next tick says so (retained ``online=false``, which the others
        believe 2 s later, as a will; a clean disconnect sends no will) and ends the watch."""
        session.ingest.scope = scope

    def cluster_nodes(self, now: float) -> int | None:
        """The cluster's node count for its birth (``CollectorStatus.cluster_nodes``): every
        node whose birth it heard, once a connection's retained births are known whole (a
        retained job or scheduler status came after them: one subscribe, births first,
        ``LiveFeed.jobs_retained_on``) and none new came for ``STATUS_ASK_QUIET_S``; None
        until then. Kept through later connections, as a raw console keeps its count
        (``FleetState.births_whole``): what a whole burst brought stays known, and a reconnect
        only adds. Judged anew on each, a collector said none for 2 s after every reconnect,
        and for good after a broker restart that lost the retained job statuses (they came
        back live, not retained), so a console on digests stopped saying that a job can
        never start here. A change in the count is said once it has settled.
        A console on digests hears no birth and judges no burst: without it a job that can
        never start on this cluster was never said to (docs/protocol.md, "CollectorStatus")."""
        feed = self.session.feed
        assert feed is not None
        n = len(self.scope.known)
        if n != self._known[0]:
            self._known = (n, now)
        if now - self._known[1] < STATUS_ASK_QUIET_S:
            return self._counted
        conn = feed.conn
        if self._counted is not None or (
                conn.state == "connected" and feed.jobs_retained_on == conn.connacks
                and now - conn.since >= STATUS_ASK_QUIET_S):
            self._counted = n
        return self._counted

    def on_tick(self, report: TickReport) -> bool:
        """The ``watch`` callback; True once the goodbye is queued (the watch's final flush
        publishes it while still connected)."""
        session, scope = self.session, self.scope
        feed = session.feed
        assert feed is not None
        now = report.now
        cluster = session.cluster
        if self.stopping:
            session.publish_message(Kind.COLLECTOR, scope.me,
                                    collector_status(scope, False, self.shard, now), qos=1,
                                    retain=True)
            return True
        counted = self.cluster_nodes(now)
        if feed.link.connected and (feed.conn.connects != self._announced_connects
                                    or scope.membership_changes != self._announced_changes
                                    or scope.clobbered
                                    or now - self._announced_at >= ANNOUNCE_EVERY_S
                                    or (counted is not None and counted != self._said_cluster)):
            self._announced_connects, self._announced_at = feed.conn.connects, now
            scope.clobbered = False
            self._announced_changes = scope.membership_changes
            self._said_cluster = counted
            session.publish_message(Kind.COLLECTOR, scope.me,
                                    collector_status(scope, True, self.shard, now,
                                                     len(scope.owned), counted),
                                    qos=1, retain=True)
        if scope.twin is not None:
            log.warning("another collector runs as %s (started %d, this one %d): both own the "
                        "same nodes; give each collector its own --shard K", scope.me,
                        scope.twin.started, scope.started_ms)
            session.note(f"another collector runs as {scope.me}: both own the same nodes",
                         severity="warn", kind="console")
            scope.twin = None
        # The broker re-sends the peers' retained births after (re)subscribing: since then.
        connected_at = feed.conn.since if feed.conn.state == "connected" else None
        if scope.settle(now, session.state.blind, connected_at):
            gone = [m.collector for m in scope.members.values() if m.gone]
            log.info("%s: live collectors now %s (gone: %s)", scope.me, ", ".join(scope.live),
                     ", ".join(sorted(gone)) or "none")
        if scope.wills_unbelieved != self._unbelieved:
            log.info("%s: %d peer collector goodbye(s) taken back before they counted (a "
                     "collector restarted, or a broker that restarted sent every client's "
                     "will): no nodes moved",
                     scope.me, scope.wills_unbelieved - self._unbelieved)
            self._unbelieved = scope.wills_unbelieved
        gained, lost = scope.take_changes()
        if gained:
            feed.link.subscribe([node_filter(cluster, n) for n in sorted(gained)])
        if lost:
            feed.link.unsubscribe([node_filter(cluster, n) for n in sorted(lost)])
            moved = [n for n in lost if n in scope.known]  # not the retired (``forget``)
            if moved:
                log.info("%s: %d node(s) now owned by other collectors (live: %s)", scope.me,
                         len(moved), ", ".join(scope.live))
        nodes = session.state.nodes
        if lost or len(nodes) > len(scope.owned):
            # Also what was in flight when ownership moved (already in an ingest batch).
            gone = [n for n in nodes if not scope.owns(n)]
            session.forget_nodes(gone)
            for n in gone:
                self.sender.forget(n)
        for n in report.retired:
            # Cleared again by the collector itself, after every digest it sent of the node:
            # one sent by a tick that had not yet applied the cleared birth reached the broker
            # after ``fleetdeck retire`` cleared the digest, and consoles on digests showed the
            # retired node again, for ever (docs/protocol.md, "Retiring a node").
            self.sender.forget(n)
            session.publish_message(Kind.DIGEST, n, b"", qos=1, retain=True)
        for digest in self.sender.due(nodes, now):
            session.publish_message(Kind.DIGEST, digest.node, codec.encode(digest), qos=0,
                                    retain=True)
        return False
