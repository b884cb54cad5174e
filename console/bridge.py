"""A cluster's Mosquitto bridge into the site broker, as a console on the site broker hears it
(docs/security.md, "Many clusters: bridges"; docs/architecture.md).

The bridge's configuration (deploy/mosquitto/mkbridge.sh) sets ``notifications true`` with
``notification_topic fleetdeck/v1/<cluster>/bridge/state``: Mosquitto publishes ``1``
(retained) on the site broker when the bridge connects, and leaves ``0`` there as the bridge
connection's Last Will, which the site broker publishes when the cluster's broker (or its
bridge) dies. Without it a console on the site read the one cause, the bridge down, as every
node of the cluster going stale one by one.

The cluster's own broker hears the same topic (Mosquitto publishes it locally too): there the
cluster's digests keep coming while the bridge is down, so no node waits on it and the state
says so (``BridgeState.cluster_side``).
"""

from __future__ import annotations

from dataclasses import dataclass

BEHIND_SLACK_S = 1.0
"""A digest heard up to this long after the bridge's "0" still came before it (the site broker
publishes the Last Will once it sees the connection die; the last digests across crossed
before). A collector's Last Will heard up to this long before the "0" is of the same outage (the
cluster's broker going down with its clients): the bridge's, not that collector's."""
CLUSTER_SIDE_S = 2.0
"""A digest heard this long after the bridge went down did not cross it: this console is on
the cluster's own broker, where the bridge's state is the site's view of it, not ours."""


@dataclass(slots=True)
class BridgeState:
    """The bridge's latest state heard on ``bridge/state``."""

    up: bool
    since: float
    """When it went down or came back (receive time; for a "0" heard first, as the retained
    Last Will at connect, the newest digest's time, when its digests stopped crossing)."""
    cluster_side: bool = False
    """Digests kept coming while it was down: this console is on the cluster's own broker."""

    def behind(self, digest_rx: float, by_gone: float | None = None) -> bool:
        """A node last heard at ``digest_rx`` is silent because the bridge is down, not for its
        own sake. ``by_gone``: when the collector of its last digest was known gone (its Last
        Will; ``FleetState.behind_bridge``), None while it is live: one gone before the bridge
        fell keeps its nodes, their silence is its own (a review: they were laid on the
        bridge)."""
        return (not self.up and not self.cluster_side and digest_rx <= self.since + BEHIND_SLACK_S
                and (by_gone is None or by_gone >= self.since - BEHIND_SLACK_S))


def hear_bridge(was: BridgeState | None, rx: float, up: bool | None,
                newest_digest_s: float | None) -> BridgeState | None:
    """The state after one message on ``bridge/state`` (None: its retained state cleared, the
    bridge removed). ``newest_digest_s``: the newest digest's own time (s), dates a "0" that
    is the first word heard (the retained Last Will read at connect)."""
    if up is None:
        return None
    if was is not None and was.up is up:
        return was
    since = rx
    if was is None and not up and newest_digest_s is not None:
        since = min(rx, newest_digest_s)
    return BridgeState(up, since)


def bridge_down_text(cluster: str, bridge: BridgeState, nodes: int, at: str) -> str:
    """The one sentence of a bridge that is down (incident title, ``status`` stderr, the TUI
    overview), ``at``: its ``since`` as HH:MM:SS UTC. ``nodes``: how many of the cluster's
    nodes went silent with it (``BridgeState.behind``)."""
    if bridge.cluster_side:
        return (f"the bridge from cluster {cluster} to the site broker is down since {at}: "
                "consoles on the site see none of this cluster; this broker is the cluster's "
                "own, its nodes are judged as ever")
    if nodes:
        one = nodes == 1
        return (f"the bridge from cluster {cluster} is down since {at}: its {nodes} "
                f"node{'' if one else 's'} {'is' if one else 'are'} not stale for "
                f"{'its' if one else 'their'} own sake")
    return (f"the bridge from cluster {cluster} is down since {at}: nothing of the cluster "
            "crosses to this broker until it is back")
