from fleetdeck.console.health import Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import correlate
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Topology
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode


def setup(node: FakeNode):
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    return ingest, state


def test_healthy_node_is_ok():
    node = FakeNode()
    _, state = setup(node)
    st = state.nodes["gpu0001"]
    assert st.verdict is Verdict.OK
    assert (st.gpus_present, st.ib_ports_up, st.online) == (8, 8, True)


def test_stale_after_three_intervals_without_telemetry():
    node = FakeNode()
    _, state = setup(node)
    state.judge(node.now + 2.9)
    assert state.nodes["gpu0001"].verdict is Verdict.OK
    state.judge(node.now + 3.1)
    st = state.nodes["gpu0001"]
    assert st.verdict is Verdict.STALE and st.reasons == ["H1"]
    assert str(st.liveness[0]).endswith("no telemetry (last 3 s ago)")


def test_a_node_born_but_never_heard_here_is_not_said_to_have_never_reported():
    # A one-shot status after a broker restart: the retained birth of a node that reported
    # 8 s before read "no telemetry (last never)".
    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    state.apply(ingest.take_batch(), node.now)
    state.start_hearing(node.now)
    state.judge(node.now + 3.1)
    st = state.nodes["gpu0001"]
    assert st.verdict is Verdict.STALE
    assert str(st.liveness[0]).endswith("no telemetry heard from it yet")


def test_offline_from_will_of_current_session():
    node = FakeNode()
    ingest, state = setup(node)
    node.feed(ingest, node.status(online=False), Kind.STATUS)
    state.apply(ingest.take_batch(), node.now)
    assert state.nodes["gpu0001"].verdict is Verdict.OFFLINE


def test_late_will_of_older_session_is_ignored():
    node = FakeNode()
    ingest, state = setup(node)
    old_will = node.status(online=False)
    node.agent.bd_seq = node.agent._next_bd_seq()  # reconnect: new session
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    state.apply(ingest.take_batch(), node.now)
    node.feed(ingest, old_will, Kind.STATUS)  # the broker noticed the old socket late
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    assert state.nodes["gpu0001"].online is True
    assert state.nodes["gpu0001"].verdict is Verdict.OK


def test_seq_gaps_are_counted_even_for_superseded_samples():
    node = FakeNode()
    ingest, state = setup(node)
    node.telemetry()  # lost on the wire
    node.telemetry()  # lost
    for _ in range(3):  # three samples within one tick: two superseded
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    st = state.nodes["gpu0001"]
    assert st.seq_gaps == 2
    assert st.last_seq == 6
    assert state.superseded == 2


def test_payload_node_must_match_topic():
    node = FakeNode()
    ingest, state = setup(node)
    other = FakeNode("gpu0002")
    ingest.handle(node.topic(Kind.TELEMETRY), codec.encode(other.telemetry()), node.now)
    state.apply(ingest.take_batch(), node.now)
    assert "gpu0002" not in state.nodes
    assert ingest.malformed.by_reason["mismatch"] == 1


def test_other_clusters_and_foreign_topics_are_ignored_not_counted():
    node = FakeNode()
    ingest, _ = setup(node)
    ingest.handle("fleetdeck/v1/othercluster/node/x/telemetry", b"garbage", node.now)
    ingest.handle("$SYS/broker/uptime", b"1", node.now)
    ingest.handle("fleetdeck/v1/test/node/gpu0001/cmd", b"{}", node.now)  # leaked by amqtt
    assert ingest.malformed.total == 0
    assert ingest.ignored == 3


def test_rejected_input_leaves_state_unchanged():
    node = FakeNode()
    ingest, state = setup(node)
    before = state.nodes["gpu0001"].telemetry
    ingest.handle(node.topic(Kind.TELEMETRY), b'{"v":1,"node":"gpu0001","seq":"x"}', node.now)
    ingest.handle(node.topic(Kind.STATUS), b"{}", node.now)
    ingest.handle("fleetdeck/v1/test/node/bad id/telemetry", b"{}", node.now)
    state.apply(ingest.take_batch(), node.now)
    assert state.nodes["gpu0001"].telemetry is before
    assert state.nodes["gpu0001"].online is True
    assert set(state.nodes) == {"gpu0001"}
    assert state.malformed.total == 3


def test_duplicate_events_are_dropped():
    from fleetdeck.agents.source import EventDraft

    node = FakeNode()
    ingest, state = setup(node)
    ev = node.agent._event(EventDraft("xid", "XID 79"))
    node.feed(ingest, ev, Kind.EVENT)
    node.feed(ingest, ev, Kind.EVENT)
    state.apply(ingest.take_batch(), node.now)
    assert len(state.events) == 1


def test_control_characters_in_topics_are_escaped_in_the_log():
    node = FakeNode()
    ingest, _ = setup(node)
    ingest.handle("fleetdeck/v1/test/node/ctl\x07\x1b[31m/status", b"{}", node.now)
    item = ingest.malformed.recent[-1]
    assert item.reason == "bad_topic"
    assert item.topic.isprintable() and "\\x07" in item.topic


def test_ingest_parses_each_topic_once_within_a_bound(monkeypatch):
    """Topics are parsed once and kept (bounded: invented topics past the bound are parsed
    every time); a refused topic is refused and counted every time it comes."""
    from fleetdeck.console import ingest as ingest_module

    monkeypatch.setattr(ingest_module, "TOPIC_CACHE_MAX", 3)
    parsed: list[str] = []
    parse = ingest_module.parse_topic

    def counted(topic: str):
        parsed.append(topic)
        return parse(topic)

    monkeypatch.setattr(ingest_module, "parse_topic", counted)
    nodes = [FakeNode(f"gpu{i:04d}") for i in range(1, 6)]
    ingest = Ingest("test")
    for _ in range(2):
        for n in nodes:
            n.feed(ingest, n.birth(), Kind.BIRTH)
            n.feed(ingest, n.telemetry(), Kind.TELEMETRY)
        ingest.handle("fleetdeck/v1/test/node/b@d/telemetry", b"{}", nodes[0].now)
    batch = ingest.take_batch()
    assert sorted(batch.births) == sorted(batch.telemetry) == [n.node_id for n in nodes]
    assert len(ingest._topics) == 3
    assert ingest.malformed.by_reason == {"bad_topic": 2}
    # 5 nodes x 2 kinds, twice: the 3 topics kept were parsed once, the other 7 twice, and
    # the refused one each time it came.
    assert len(parsed) == 3 + 2 * 7 + 2
    assert len(set(parsed)) == 11


def test_a_port_down_is_recorded_after_a_switch_could_have_been_suspected_with_its_time():
    """A node failed only by a port going down (N1, N2) is one of the first victims of a dying
    leaf switch as often as it is a bad cable: its row waits PORT_DOWN_SETTLE_S for the
    switch's other nodes (which make it degraded, F1), then carries the time it failed."""
    node = FakeNode(t0=1_800_000_000.0)
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    rows = []
    failed_at = None
    for s in range(12):
        if s == 5:
            node.sim.link_down(2, "Polling", node.sim._t_own + 0.5, int((node.now + 0.5) * 1000))
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        state.apply(ingest.take_batch(), node.now)
        if failed_at is None and state.nodes[node.node_id].verdict is Verdict.FAILED:
            failed_at = node.now  # the views show it at once
        for k in range(1, 4):  # console ticks between samples
            state.judge_fleet(node.now + 0.3 * k)
            rows += [(node.now + 0.3 * k, t) for t in state.take_transitions()]
    changes = [(at, t.ts, t.old, t.new) for at, t in rows if t.old is not None]
    assert failed_at is not None
    [(written_at, ts, old, new)] = changes
    assert (old, new) == (Verdict.OK, Verdict.FAILED) and ts == failed_at
    assert failed_at + 2.0 <= written_at <= failed_at + 2.5


def test_the_first_nodes_behind_a_dying_switch_are_never_recorded_failed():
    from pathlib import Path

    from fleetdeck.console.replay import run_headless

    run = run_headless(Path(__file__).parent.parent / "fixtures" / "leaf_switch.jsonl.gz")
    verdicts = [line.text for line in run.session.log.lines() if line.kind == "verdict"]
    assert len(verdicts) == 8 and all(v.startswith("ok -> degraded (F1") for v in verdicts), \
        verdicts


def test_a_node_first_heard_with_a_port_down_gets_its_first_row_after_the_hold():
    """A collector starting on a fresh store while a node's port is down: the hold kept its
    first row unwritten, and the unchanged-node fast path then skipped it for good (review)."""
    node = FakeNode(t0=1_800_000_000.0)
    node.sim.link_down(2, "Polling", node.sim._t_own + 0.5, int((node.now + 0.5) * 1000))
    node.telemetry()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    rows = []
    for _ in range(8):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        state.apply(ingest.take_batch(), node.now)
        for k in range(1, 4):
            state.judge_fleet(node.now + 0.3 * k)
            rows += [(t.old, t.new) for t in state.take_transitions()]
    assert rows == [(None, Verdict.FAILED)]


def test_a_will_armed_before_the_drain_does_not_undo_it():
    """An agent re-arms its will once a drain went out (agents/agent.py), but a will armed at
    connect still comes if the agent dies in between: a console that heard this session's
    drain keeps it, and says what to do with a drained node that went offline."""
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    node = FakeNode()
    ingest, state = setup(node)
    will = node.status(online=False)  # armed at CONNECT, not drained
    node.agent.drain = DrainInfo(state=DrainState.DRAINED, reason="RMA ticket 123",
                                 requested_by="alice", since_ts=int(node.now * 1000))
    node.feed(ingest, node.status(), Kind.STATUS)
    state.apply(ingest.take_batch(), node.now)
    node.feed(ingest, will, Kind.STATUS)
    state.apply(ingest.take_batch(), node.now)
    state.judge_fleet(node.now)
    [summary] = fleet_summary(state, node.now)["nodes"]
    assert (summary["verdict"], summary["drain"], summary["drain_reason"], summary["state"]) == (
        "offline", "drained", "RMA ticket 123", "drain*")
    assert summary["action"].startswith("drained, now offline: check the node")


def test_a_console_that_hears_a_switch_victim_before_its_peers_writes_no_failed_row():
    """A leaf switch flapped under four nodes; a console (or a collector on its store) started
    later heard one of them first: N2 alone (its agent's hour of link_downed) read failed, and
    was written so, then degraded (F1) once the peers came: a page for a switch's victim (a
    drill: 'degraded -> failed (N2)', held a minute by the restore's hold). A failure made only
    of port faults waits PORT_DOWN_SETTLE_S from the node's first sample here, too."""
    nodes = [FakeNode(f"gpu000{i}", t0=1_800_000_000.0) for i in range(1, 5)]
    for node in nodes:
        node.sim.topology = Topology(rack="rack001", leaf="leaf01", spine_group="spine01")
        for _ in range(3):
            node.telemetry()
        node.sim.ports[0].bump("link_downed", 1)  # the switch's flap, before the console ran
        for _ in range(60):
            node.telemetry()
    ingest = Ingest(nodes[0].cluster)
    state = FleetState(nodes[0].cluster, ingest.malformed)
    state.correlate = correlate  # as every console core sets it (ConsoleSession)
    for node in nodes:
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
    rows = []
    for s in range(8):
        for i, node in enumerate(nodes):
            if i == 0 or s >= 2:  # gpu0001's samples come a couple of seconds before the rest
                node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        now = nodes[0].now
        state.apply(ingest.take_batch(), now)
        for k in range(1, 4):
            state.judge_fleet(now + 0.3 * k)
            rows += [(t.node, t.old, t.new) for t in state.take_transitions()]
    assert state.nodes["gpu0001"].verdict is Verdict.DEGRADED  # F1: the switch's, not its own
    assert not [r for r in rows if r[2] is Verdict.FAILED], rows
