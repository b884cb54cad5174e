"""Mosquitto's ``message_size_limit`` below a real agent's telemetry keyframe (3.7 KB for eight
simulated GPUs; its deltas are 1.2 KB): the broker drops every keyframe without a word (QoS 0)
and delivers the deltas (a 2026-12-07 drill). ``status`` read the nodes ``waiting``, "asked for
one (an ask the broker drops, as for a broker user that may not publish node/+/cmd, such as
'viewer' …)", though the agents had answered each ask. It now says the broker most likely drops
their keyframes and names the size limits."""

import json

from fleetdeck.broker import MOSQUITTO, ManagedBroker
from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "sizes"


def test_keyframes_the_broker_drops_are_said_as_too_large(tmp_path):
    conf = "listener {port} 127.0.0.1\nallow_anonymous true\nmessage_size_limit 3000\n"
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        agent = spawn("agent", "--broker", str(broker.url), "--cluster", CLUSTER, "--node-id",
                      "gpu0001", "--interval", "1", log=tmp_path / "agent.log")
        try:
            res = run_cli("status", "--json", "--wait", "15", "--cluster", CLUSTER,
                          "--broker", str(broker.url))
        finally:
            stop_process(agent)
    node = json.loads(res.stdout)["nodes"][0]
    assert node["verdict"] == "waiting", node
    h1 = node["findings"][0]
    assert "keyframe asks and none came: the broker most likely drops its keyframes" in h1, h1
    assert "such as 'viewer'" not in h1
    assert "message_size_limit or max_packet_size below their size" in res.stderr, res.stderr
    assert "such as 'viewer'" not in res.stderr, res.stderr


def _looping_node(sessions: int, sample_after: bool = False):
    """A node whose agent opens ``sessions`` sessions a second apart, each a birth, its online
    status and its will, with no sample between (a broker that drops it at its keyframe)."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    for _ in range(sessions):
        node.now += 1.0
        node.agent.bd_seq += 1
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
        state.apply(ingest.take_batch(), node.now)
        node.now += 0.01
        node.feed(ingest, node.status(online=False), Kind.STATUS)
        state.apply(ingest.take_batch(), node.now)
    return state.nodes[node.node_id], state


def test_an_agent_the_broker_drops_at_each_keyframe_points_at_the_broker():
    """Mosquitto's max_packet_size below the keyframe: the agent reconnects once a second and
    the node read offline, "check the node (power, BMC, kernel log)", of a machine that was up
    (a 2026-12-07 drill, docs/reliability.md). Its births, none with a sample after, say so."""
    from fleetdeck.console.judgements import recommended_action

    st, state = _looping_node(5)
    assert st.verdict.value == "offline"
    [h2] = [f.text for f in st.liveness if f.rule == "H2"]
    assert "its agent reconnects again and again, no sample between" in h2, h2
    said = recommended_action(st, state)
    assert said.startswith("check the broker first") and "max_packet_size" in said
    assert "BMC" not in said
    # A restart or two of the broker is no loop: the node's own advice stands.
    st, state = _looping_node(2)
    assert "BMC" in recommended_action(st, state)


def test_a_reconnect_loop_is_a_field_of_status_json():
    """``reconnect_loop`` beside the action: a script told the broker's fault from the node's
    only by the action's words (a JSON audit, docs/protocol.md "status --json")."""
    from fleetdeck.console.summary import node_summary

    st, state = _looping_node(5)
    assert node_summary(st, st.last_rx or 0.0, state)["reconnect_loop"] is True
    st, state = _looping_node(2)
    assert node_summary(st, st.last_rx or 0.0, state)["reconnect_loop"] is False


def test_a_broker_max_packet_size_below_the_keyframe_is_said_in_status(tmp_path):
    """The drill itself: Mosquitto's max_packet_size 3000 under a real agent (keyframe 3.7 KB):
    ``status`` read it offline with "check the node (power, BMC, kernel log)"."""
    conf = "listener {port} 127.0.0.1\nallow_anonymous true\nmax_packet_size 3000\n"
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        agent = spawn("agent", "--broker", str(broker.url), "--cluster", CLUSTER, "--node-id",
                      "gpu0001", "--interval", "1", log=tmp_path / "agent.log")
        try:
            res = run_cli("status", "--json", "--wait", "8", "--cluster", CLUSTER,
                          "--broker", str(broker.url))
        finally:
            stop_process(agent)
    node = json.loads(res.stdout)["nodes"][0]
    assert node["action"].startswith("check the broker first"), node


def test_a_dead_nodes_retained_birth_redelivered_is_no_reconnect_loop():
    """The console's own reconnects (a flapping broker, its own network) deliver a dead node's
    retained birth again, same bdSeq, with no sample after: no session of its agent, so no
    "check the broker first" of a machine that is down (a review)."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    birth, will = node.birth(), node.status(online=False)
    node.feed(ingest, birth, Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    for _ in range(6):  # the retained birth and will, on each of the console's reconnects
        node.now += 3.0
        node.feed(ingest, birth, Kind.BIRTH)
        node.feed(ingest, will, Kind.STATUS)
        state.apply(ingest.take_batch(), node.now)
    st = state.nodes[node.node_id]
    assert st.verdict.value == "offline"
    assert not any("reconnects again" in f.text for f in st.liveness), st.liveness
    said = recommended_action(st, state)
    assert "BMC" in said
    # Its agent refused by the broker (credentials, an ACL) reads the same: its journal says
    # so where the host is up (an SRE drill: a revoked password sent the on-call to the BMC).
    assert "if it is up its agent's journal (a broker that refuses its credentials" in said


def test_births_the_broker_drops_are_said_not_an_empty_broker(tmp_path):
    """``message_size_limit 2000``, below a simulated node's birth (2.4 KB) and above its
    status and deltas: Mosquitto drops every birth without a word, and a node exists from its
    birth on. ``status`` said "no node of cluster … was heard … (is an agent or 'fleetdeck sim'
    running against this broker?)" beside a simulator publishing, and the TUI "no node of
    cluster msl heard from yet" (2026-12-07 drill). The agents answer the console's rebirth
    asks ("birth re-published") and no birth follows: the broker drops them, said so."""
    conf = "listener {port} 127.0.0.1\nallow_anonymous true\nmessage_size_limit 2000\n"
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        sim = spawn("sim", "--broker", str(broker.url), "--cluster", CLUSTER, "--nodes", "3",
                    log=tmp_path / "sim.log")
        try:
            res = run_cli("status", "--wait", "8", "--cluster", CLUSTER, "--broker",
                          str(broker.url))
        finally:
            stop_process(sim)
    assert res.returncode == 2, res
    assert "is an agent or 'fleetdeck sim' running" not in res.stderr, res.stderr
    assert "the broker most likely drops the nodes' births" in res.stderr, res.stderr
    assert "message_size_limit" in res.stderr and "3 nodes (gpu[0001-0003])" in res.stderr


async def test_the_console_says_the_broker_drops_births_of_nodes_it_hears(tmp_path):
    """The TUI's top problems, on the same broker: "no node of cluster … heard from yet" read
    as a broker nothing publishes to (2026-12-07 drill)."""
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp
    from fleetdeck.console.tui.screens.overview import OverviewScreen
    from tests.conftest import eventually

    conf = "listener {port} 127.0.0.1\nallow_anonymous true\nmessage_size_limit 2000\n"
    with ManagedBroker(MOSQUITTO, workdir=tmp_path, config=conf) as broker:
        sim = spawn("sim", "--broker", str(broker.url), "--cluster", CLUSTER, "--nodes", "2",
                    log=tmp_path / "sim.log")
        app = FleetdeckApp(cluster=CLUSTER, url=broker.url, auto_tick=False,
                           audit=MemoryAudit(), operator="t")
        try:
            async with app.run_test(size=(160, 48)) as pilot:
                await eventually(lambda: (app.tick(), any(
                    a.op.value == "rebirth" for a in app.session.state.acks))[1],
                    timeout=30, message="the agents' answers to the rebirth asks")
                await pilot.pause()
                assert isinstance(app.screen, OverviewScreen)
                app.refresh_view()
                await pilot.pause()
                text = "\n".join(str(w.render()) for w in app.screen.query("#problems"))
                assert "no node listed: the broker most likely drops the nodes' births" in text
                assert "heard from yet" not in text, text
        finally:
            stop_process(sim)
