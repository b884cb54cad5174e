"""The cluster's bridge into the site broker (console/bridge.py): Mosquitto's "1"/"0" on
``bridge/state`` read by a console on digests, on the site broker and on the cluster's own."""

from fleetdeck.console.digest import make_digest
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import CollectorStatus
from fleetdeck.protocol.topics import Kind, digest_subscriptions, parse_topic, topic_for
from tests.helpers import FakeNode
from tests.sharding.test_digest import raw_state
from tests.sharding.test_digests_after_a_broker_restart import _digest

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


def _collector(ingest: Ingest, name: str, online: bool, rx: float) -> None:
    msg = CollectorStatus(collector=name, online=online, started=int((rx - 60) * 1000),
                          shard="1/2", nodes=None if not online else 1, ts=int(rx * 1000))
    ingest.handle(topic_for("b", Kind.COLLECTOR, name), codec.encode(msg), rx)


def _two_collectors(t: float) -> tuple[Ingest, FleetState]:
    """gpu0001 by shard-1, gpu0002 by shard-2, both live at ``t``."""
    ingest = Ingest("b")
    state = FleetState("b", ingest.malformed)
    state.digest_mode = True
    for name in ("shard-1", "shard-2"):
        _collector(ingest, name, True, t)
    ingest.handle(topic_for("b", Kind.DIGEST, "gpu0001"),
                  _digest("gpu0001", "shard-1", int(t * 1000)), t)
    ingest.handle(topic_for("b", Kind.DIGEST, "gpu0002"),
                  _digest("gpu0002", "shard-2", int(t * 1000)), t)
    ingest.handle(BRIDGE, b"1", t)
    state.apply(ingest.take_batch(), t)
    return ingest, state


def _says_collector_kept_its_node(state: FleetState, now: float) -> None:
    state.judge_fleet(now)
    found = {i.kind: i for i in incidents(state)}
    assert sorted(found) == ["bridge", "collector"], found
    assert found["bridge"].nodes == ["gpu0002"], found["bridge"]
    assert "its 1 node is not stale for its own sake" in found["bridge"].title
    assert found["collector"].nodes == ["gpu0001"], found["collector"]
    assert "collector shard-1" in found["collector"].title
    assert "last from collector shard-1" in str(state.nodes["gpu0001"].liveness[0])
    assert "bridge" in str(state.nodes["gpu0002"].liveness[0])
    assert fleet_summary(state, now)["bridge"]["nodes_behind"] == ["gpu0002"]


def test_a_collector_dead_before_the_bridge_fell_keeps_its_nodes():
    """A review: every node last heard before the bridge fell went into its incident, those of
    a collector whose Last Will crossed earlier too: their silence is that collector's."""
    t = 1_000_000.0
    ingest, state = _two_collectors(t)
    _collector(ingest, "shard-1", False, t + 2)  # its will crosses; gpu0001 is not taken over
    state.apply(ingest.take_batch(), t + 2)
    for k in range(1, 7):  # shard-2's digests keep crossing until the bridge falls
        at = t + 5 * k
        ingest.handle(topic_for("b", Kind.DIGEST, "gpu0002"),
                      _digest("gpu0002", "shard-2", int(at * 1000)), at)
        state.apply(ingest.take_batch(), at)
    ingest.handle(BRIDGE, b"0", t + 31)
    state.apply(ingest.take_batch(), t + 31)
    _says_collector_kept_its_node(state, t + 60)


def test_a_collectors_will_read_at_connect_with_the_bridges_0_is_dated_by_its_digests():
    """A site console started after the bridge fell reads the retained will, digests and "0"
    together: the dead collector's node, silent long before the others, stays its own."""
    t = 1_000_000.0
    ingest = Ingest("b")
    state = FleetState("b", ingest.malformed)
    state.digest_mode = True
    now = t + 300
    _collector(ingest, "shard-2", True, now)
    _collector(ingest, "shard-1", False, now)
    ingest.handle(topic_for("b", Kind.DIGEST, "gpu0001"),
                  _digest("gpu0001", "shard-1", int(t * 1000)), now)
    ingest.handle(topic_for("b", Kind.DIGEST, "gpu0002"),
                  _digest("gpu0002", "shard-2", int((t + 60) * 1000)), now)
    ingest.handle(BRIDGE, b"0", now)
    state.apply(ingest.take_batch(), now)
    _says_collector_kept_its_node(state, now + 1)


def test_a_judge_pass_asks_behind_bridge_only_while_the_bridge_is_down(monkeypatch):
    """A review: every digest judged (each of them every digest period) asked
    ``behind_bridge`` with the bridge up, 3.4 ms a pass at 16,384 digests for nothing."""
    t = 1_000_000.0
    ingest, state = _two_collectors(t)
    asked: list[str] = []
    real = FleetState.behind_bridge

    def counted(self: FleetState, st) -> bool:  # type: ignore[no-untyped-def]
        asked.append(st.node_id)
        return real(self, st)

    monkeypatch.setattr(FleetState, "behind_bridge", counted)
    state.judge_fleet(t + 30)
    assert asked == []
    assert all("collector" in str(st.liveness[0]) for st in state.nodes.values())
    ingest.handle(BRIDGE, b"0", t + 31)
    state.apply(ingest.take_batch(), t + 31)
    state.judge_fleet(t + 60)
    assert sorted(asked) == ["gpu0001", "gpu0002"]
    assert all("bridge" in str(st.liveness[0]) for st in state.nodes.values())


def test_a_later_process_s_will_dates_its_own_death_not_the_first_one():
    """A review: a console that missed a collector's rebirth (away, or its birth in the same
    batch as the next will) kept the first will's time, and the reborn process's nodes, silent
    only since the bridge fell, read as that collector's."""
    t = 1_000_000.0
    ingest, state = _two_collectors(t)
    _collector(ingest, "shard-1", False, t + 2)  # the first process dies
    state.apply(ingest.take_batch(), t + 2)
    # Its next process was born unheard and served gpu0001; it dies with the bridge's fall.
    msg = CollectorStatus(collector="shard-1", online=False, started=int((t + 10) * 1000),
                          shard="1/2", ts=int((t + 40) * 1000))
    for k in range(1, 8):
        at = t + 5 * k
        for node, by in (("gpu0001", "shard-1"), ("gpu0002", "shard-2")):
            ingest.handle(topic_for("b", Kind.DIGEST, node), _digest(node, by, int(at * 1000)),
                          at)
        state.apply(ingest.take_batch(), at)
    ingest.handle(topic_for("b", Kind.COLLECTOR, "shard-1"), codec.encode(msg), t + 40)
    ingest.handle(BRIDGE, b"0", t + 40.5)
    state.apply(ingest.take_batch(), t + 40.5)
    state.judge_fleet(t + 70)
    found = {i.kind: i for i in incidents(state)}
    assert found["bridge"].nodes == ["gpu0001", "gpu0002"], found
    assert fleet_summary(state, t + 70)["bridge"]["nodes_behind"] == ["gpu0001", "gpu0002"]
