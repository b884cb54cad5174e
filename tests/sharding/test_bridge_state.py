"""The cluster's bridge into the site broker (console/bridge.py): Mosquitto's "1"/"0" on
``bridge/state`` read by a console on digests, on the site broker and on the cluster's own."""

from fleetdeck.console.digest import make_digest
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, digest_subscriptions, parse_topic, topic_for
from tests.helpers import FakeNode
from tests.sharding.test_digest import raw_state

BRIDGE = "fleetdeck/v1/b/bridge/state"


def feed_digest(ingest: Ingest, payload: bytes, rx: float) -> None:
    ingest.handle(topic_for("b", Kind.DIGEST, "gpu0001"), payload, rx)


def test_the_bridge_topic_is_in_the_digest_subscriptions_and_parses():
    assert digest_subscriptions("b")[-1] == BRIDGE
    assert parse_topic(BRIDGE).kind is Kind.BRIDGE
    assert str(parse_topic(BRIDGE)) == BRIDGE


def _digest_console(node: FakeNode) -> tuple[Ingest, FleetState, bytes]:
    node.cluster = "b"
    st = raw_state(node, fault=False).nodes["gpu0001"]
    ingest = Ingest("b")
    state = FleetState("b", ingest.malformed)
    state.digest_mode = True
    return ingest, state, codec.encode(make_digest(st, "shard-1", node.now))


def test_on_the_site_a_node_silent_since_the_bridge_fell_is_the_bridges():
    node = FakeNode()
    ingest, state, payload = _digest_console(node)
    t = node.now
    feed_digest(ingest, payload, t)
    ingest.handle(BRIDGE, b"1", t)
    state.apply(ingest.take_batch(), t)
    ingest.handle(BRIDGE, b"0", t + 1)
    state.apply(ingest.take_batch(), t + 1)
    state.judge_fleet(t + 30)
    found = incidents(state)
    assert [i.kind for i in found] == ["bridge"], found
    assert found[0].nodes == ["gpu0001"] and found[0].severity == "error"
    assert "its 1 node is not stale for its own sake" in found[0].title
    assert "bridge" in str(state.nodes["gpu0001"].liveness[0])
    out = fleet_summary(state, t + 30)["bridge"]
    assert out["up"] is False and out["nodes_behind"] == ["gpu0001"]
    # Back: the incident goes, and a digest's silence is its collector's again.
    ingest.handle(BRIDGE, b"1", t + 31)
    state.apply(ingest.take_batch(), t + 31)
    state.judge_fleet(t + 31)
    assert [i.kind for i in incidents(state)] == ["collector"]


def test_on_the_clusters_own_broker_digests_keep_coming_and_no_node_waits_on_it():
    """Mosquitto publishes the notification on the cluster's broker too: there the bridge down
    is the site's loss, said as a warning, and no node's silence is laid on it."""
    node = FakeNode()
    ingest, state, payload = _digest_console(node)
    t = node.now
    feed_digest(ingest, payload, t)
    ingest.handle(BRIDGE, b"0", t)
    state.apply(ingest.take_batch(), t)
    node.now = t + 5
    fresh = codec.encode(make_digest(raw_state(node, fault=False).nodes["gpu0001"],
                                     "shard-1", t + 5))
    feed_digest(ingest, fresh, t + 5)
    state.apply(ingest.take_batch(), t + 5)
    state.judge_fleet(t + 6)
    assert state.bridge is not None and state.bridge.cluster_side
    found = incidents(state)
    assert [(i.kind, i.severity, i.nodes) for i in found] == [("bridge", "warn", [])]
    assert "consoles on the site see none of this cluster" in found[0].title


def test_a_bridge_state_that_is_not_0_or_1_is_malformed():
    ingest = Ingest("b")
    ingest.handle(BRIDGE, b"yes", 1.0)
    assert ingest.malformed.total == 1
    assert not ingest.take_batch().bridge
