"""Reliability of the console core found by failure drills (issue 11), tested on the real
models, codec, store and session with a simulated clock (no sleeps)."""

import json

from msgspec.structs import replace

from fleetdeck.agents.source import EventDraft
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Ack, AckResult, CommandOp
from fleetdeck.protocol.topics import Kind, topic_for
from tests.helpers import FakeNode

CLUSTER = "rel"


class Sent:
    """Captures what a session publishes (its publisher), decoded."""

    def __init__(self) -> None:
        self.commands: list[dict] = []

    async def __call__(self, kind, subject, payload) -> None:
        self.commands.append({"kind": kind.value, "subject": subject, **json.loads(payload)})

    def ops(self, op: str) -> list[dict]:
        return [c for c in self.commands if c["op"] == op]


def make_session(node: FakeNode, sent: Sent) -> ConsoleSession:
    return ConsoleSession(CLUSTER, clock=lambda: node.now, publisher=sent, operator="t")


def emit(node: FakeNode, session: ConsoleSession, n: int) -> None:
    for i in range(n):
        ev = node.agent._event(EventDraft("ib_flap", f"flap {i}"))
        node.feed(session.ingest, ev, Kind.EVENT)


async def run_for(node: FakeNode, session: ConsoleSession, seconds: float):
    """Ticks every 0.5 s of simulated time, telemetry every 1 s, I/O done after each tick."""
    for _ in range(int(seconds / 0.5)):
        node.now += 0.5
        if int(node.now * 2) % 2 == 0:
            node.feed(session.ingest, node.agent.telemetry(), Kind.TELEMETRY)
        session.tick()
        await session.flush()


async def test_a_restored_store_catches_up_and_then_asks_for_nothing_for_a_minute(tmp_path):
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    first = make_session(node, sent)
    await first.open_store(tmp_path / "store.db")
    node.feed(first.ingest, node.birth(), Kind.BIRTH)
    node.feed(first.ingest, node.status(), Kind.STATUS)
    emit(node, first, 200)
    await run_for(node, first, 3)
    await first.flush()
    assert first.state.nodes["gpu0001"].event_seq == 200
    await first.close()

    # The console restarts: events come back from the store, the agent's telemetry says 200.
    again = make_session(node, sent)
    await again.open_store(tmp_path / "store.db")
    node.feed(again.ingest, node.birth(), Kind.BIRTH)
    node.feed(again.ingest, node.status(), Kind.STATUS)
    await run_for(node, again, 60)
    assert again.state.nodes["gpu0001"].event_seq == 200
    assert again.counters.resend_requests == 0, sent.ops("resend_events")
    await again.close()


async def answering_resends(node: FakeNode, session: ConsoleSession, sent: Sent,
                            seconds: float, count: int) -> None:
    """``run_for``, the agent answering each re-send ask "re-sent ``count`` event(s)" (what
    it re-sends never arrives)."""
    answered = 0
    for _ in range(int(seconds / 10)):
        await run_for(node, session, 10)
        for ask in sent.ops("resend_events")[answered:]:
            node.feed(session.ingest, Ack(cmd_id=ask["cmd_id"], by="gpu0001",
                                          op=CommandOp.RESEND_EVENTS, result=AckResult.DONE,
                                          reason=f"re-sent {count} event(s)",
                                          ts=int(node.now * 1000)), Kind.ACK)
            answered += 1


async def test_an_unfillable_gap_backs_off_then_is_marked_lost():
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    session = make_session(node, sent)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    emit(node, session, 3)
    for _ in range(5):  # emitted, never delivered, not in any outbox we can reach
        node.agent._event(EventDraft("ib_flap", "lost"))
    await answering_resends(node, session, sent, 600, 0)
    asks = sent.ops("resend_events")
    assert 1 <= len(asks) <= 5, len(asks)  # backed off, not every 10 s for 10 minutes
    st = session.state.nodes["gpu0001"]
    assert st.events_lost == 5 and session.counters.events_lost == 5
    assert st.event_seq == 8
    lost = [line.text for _s, line in session.log if line.kind == "events_lost"]
    assert lost == ["gpu0001: 5 event(s) lost (no longer in the agent's outbox)"], lost
    assert "events" not in session.problems
    before = len(asks)
    await run_for(node, session, 120)
    assert len(sent.ops("resend_events")) == before  # given up: nothing more asked


async def test_events_the_broker_never_delivers_are_not_blamed_on_the_outbox():
    """A broker ACL that lets the console read telemetry but not ``node/+/event`` (a
    2026-12-07 drill): every node's gap was given up as "lost (no longer in the agent's
    outbox)", the agents having re-sent them each time, and nothing else said events do
    not arrive. Now the console says the broker does not deliver them, as a problem of its
    own (its header), until an event comes."""
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    session = make_session(node, sent)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.status(), Kind.STATUS)
    for _ in range(2):  # an XID and its drain: published, dropped by the broker's ACL
        node.agent._event(EventDraft("xid", "XID 79"))
    await answering_resends(node, session, sent, 600, 2)
    said = [line.text for _s, line in session.log if line.kind == "events_lost"]
    assert not any("outbox" in t for t in said), said
    assert len(said) == 1 and "2 event(s) of gpu0001 never reached this console" in said[0]
    assert "does not deliver node/+/event" in said[0], said
    assert "events" in session.problems
    assert session.state.nodes["gpu0001"].events_lost == 2

    emit(node, session, 1)  # the ACL fixed: the next event comes
    await run_for(node, session, 2)
    assert "events" not in session.problems
    assert any("reach this console again" in line.text for _s, line in session.log)


async def test_a_node_that_died_with_a_gap_is_no_broker_that_drops_events():
    """A node whose event the console missed (it reconnected meanwhile), then died (an XID 79
    takes nodes down): its agent answers no re-send ask, and in a quiet fleet no other event
    comes either. That is no broker that stopped delivering events: EVENTS STOPPED and "does
    not deliver node/+/event" stayed in the header of a healthy console for good (a review)."""
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    session = make_session(node, sent)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.status(), Kind.STATUS)
    node.agent._event(EventDraft("xid", "XID 79"))  # missed by this console
    await run_for(node, session, 5)  # its telemetry counts it: the gap opens
    for _ in range(1200):  # then nothing more from the node: it is down
        node.now += 0.5
        session.tick()
        await session.flush()
    assert len(sent.ops("resend_events")) >= 1
    said = [line.text for _s, line in session.log if line.kind == "events_lost"]
    assert not any("does not deliver" in t for t in said), said
    assert "events" not in session.problems


def test_a_forged_future_bdseq_is_refused_and_the_real_agent_still_wins():
    node = FakeNode(cluster=CLUSTER)
    session = make_session(node, Sent())
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.status(), Kind.STATUS)
    session.tick()
    forged = node.status(online=False).model_copy(update={"bdSeq": 2**63})
    node.feed(session.ingest, forged, Kind.STATUS)
    session.tick()
    assert session.state.malformed.total == 1
    assert "bdSeq" in session.state.malformed.recent[-1].detail
    assert session.state.nodes["gpu0001"].online is True
    # A forged status only a little ahead still cannot pin the node: a newer birth wins.
    ahead = node.status(online=False).model_copy(update={"bdSeq": node.agent.bd_seq + 300_000})
    node.feed(session.ingest, ahead, Kind.STATUS)
    session.tick()
    assert session.state.nodes["gpu0001"].online is False
    node.now += 5
    node.agent.bd_seq = node.agent._next_bd_seq()  # the real agent reconnects
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.status(), Kind.STATUS)
    node.feed(session.ingest, node.agent.telemetry(), Kind.TELEMETRY)
    session.tick()
    assert session.state.nodes["gpu0001"].online is True
    assert session.state.nodes["gpu0001"].verdict.value == "ok"


def test_an_event_stamped_years_ahead_is_kept_at_its_arrival_and_said():
    """An XID 79 event stamped five years ahead stayed the newest event, on top of the events
    view as if fresh, for five years (an SRE drill): kept at its arrival time, and counted as
    malformed with why."""
    node = FakeNode(cluster=CLUSTER)
    session = make_session(node, Sent())
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.status(), Kind.STATUS)
    session.tick()
    ev = node.agent._event(EventDraft("xid", "79, GPU has fallen off the bus"))
    future = ev.model_copy(update={"ts": int((node.now + 5 * 365 * 86400) * 1000)})
    node.feed(session.ingest, future, Kind.EVENT)
    session.tick()
    assert session.state.malformed.total == 1
    assert "ahead of the receive clock" in session.state.malformed.recent[-1].detail
    (kept,) = [e for e in session.state.events if e.message.startswith("79,")]
    assert abs(kept.ts - node.now * 1000) < 2000


async def test_telemetry_of_made_up_nodes_does_not_grow_the_fleet_and_asks_for_births():
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    session = make_session(node, sent)
    tel = node.agent.telemetry()
    for i in range(3000):
        ghost = f"ghost{i:05d}"
        session.ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, ghost),
                              codec.encode(replace(tel, node=ghost)), node.now)
    session.tick()
    await session.flush()
    assert session.state.nodes == {}
    assert len(session.state.unborn) == 3000
    assert len(sent.ops("rebirth")) == 64  # a cap per tick, the rest on later ticks
    node.now += 0.5
    session.tick()
    await session.flush()
    assert len(sent.ops("rebirth")) == 128


async def test_garbage_on_a_retained_status_asks_that_node_to_republish():
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    session = make_session(node, sent)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    session.ingest.handle(node.topic(Kind.STATUS), b"\x00garbage", node.now)
    session.tick()
    await session.flush()
    (ask,) = sent.ops("rebirth")
    assert ask["target"] == "gpu0001" and ask["subject"] == "gpu0001"
    assert session.state.malformed.total == 1


def test_two_agents_with_one_node_id_are_shown_as_a_duplicate():
    a = FakeNode(cluster=CLUSTER)
    b = FakeNode(cluster=CLUSTER)
    b.agent.started_ms += 12345  # another process (another machine) claiming gpu0001
    session = make_session(a, Sent())
    a.feed(session.ingest, a.birth(), Kind.BIRTH)
    for _ in range(4):
        for who in (a, b):
            a.now += 0.5
            b.now = a.now
            who.feed(session.ingest, who.agent.telemetry(), Kind.TELEMETRY, rx=a.now)
            session.tick()
    st = session.state.nodes["gpu0001"]
    assert st.verdict.value == "failed"
    assert "H3" in st.reasons and "duplicate node id" in str(st.all_findings[0])
    assert "2 agent processes take turns" in str(st.all_findings[0])
    # However few of them were noted (a drill's fuzzed replay read "1 agent processes").
    st.processes = dict(list(st.processes.items())[:1])
    st.judge(a.now)
    assert "2 agent processes take turns" in str(st.all_findings[0])


def clones_born() -> tuple[FakeNode, FakeNode, ConsoleSession]:
    """Two agent processes of gpu0001 (clones) and a session that heard the first's birth and
    status."""
    a = FakeNode(cluster=CLUSTER)
    b = FakeNode(cluster=CLUSTER)
    b.agent.started_ms += 12345
    session = make_session(a, Sent())
    a.feed(session.ingest, a.birth(), Kind.BIRTH)
    a.feed(session.ingest, a.status(), Kind.STATUS)
    return a, b, session


def test_two_processes_whose_sessions_end_before_a_sample_are_a_duplicate_not_stale():
    """Two clones that take the session from each other every 0.8 s send no sample between
    them: each session is only its birth and status. The console read the node stale, "no
    telemetry (last 20 s ago)", and no H3 for 30 s (a CI run of
    tests/test_duplicate_after_restarts.py); births name their process, and H3 says why no
    sample comes."""
    a, b, session = clones_born()
    a.now += 0.5
    a.feed(session.ingest, a.agent.telemetry(), Kind.TELEMETRY, rx=a.now)
    session.tick()
    st = session.state.nodes["gpu0001"]
    assert st.verdict.value == "ok"
    seen = []
    for _ in range(15):  # 24 s of takeovers, no sample
        for who in (b, a):
            a.now += 0.8
            b.now = a.now
            who.agent.bd_seq = max(a.agent.bd_seq, b.agent.bd_seq) + 1
            who.feed(session.ingest, who.birth(), Kind.BIRTH, rx=a.now)
            session.tick()
            seen.append((st.verdict.value, st.reasons))
            who.feed(session.ingest, who.status(), Kind.STATUS, rx=a.now)
            session.tick()
            seen.append((st.verdict.value, st.reasons))
    # Failed for H3 from the second process's return on, at every tick: not stale whenever a
    # birth comes before its session's status (their staleness clock restarts at a status).
    assert set(map(str, seen[3:])) == {str(("failed", ["H3"]))}, seen
    text = str(st.liveness[0])
    assert "duplicate node id: 2 agent processes take turns" in text, text
    assert "no telemetry for 24 s" in text and "before it sends" in text, text
    # Both gone quiet: stale again once no birth has come for the stale time.
    a.now += 3.5
    session.tick()
    assert st.verdict.value == "stale" and st.reasons == ["H1"], st.all_findings


def test_a_clone_restarted_mid_episode_is_not_counted_twice():
    """Two clones take turns; one restarts (a new process) and takes turns on with the other:
    still two processes, once the restarted one's old process is 30 s unheard (it read "3
    agent processes take turns" for the whole episode)."""
    a, b, c = (FakeNode(cluster=CLUSTER) for _ in range(3))
    b.agent.started_ms += 12345
    c.agent.started_ms += 67890
    session = make_session(a, Sent())

    def turns(pair, seconds: float) -> None:
        for _ in range(int(seconds / 2)):
            for who in pair:
                a.now += 1.0
                who.now = a.now
                who.agent.bd_seq = max(n.agent.bd_seq for n in (a, b, c)) + 1
                who.feed(session.ingest, who.birth(), Kind.BIRTH, rx=a.now)
                who.feed(session.ingest, who.status(), Kind.STATUS, rx=a.now)
                session.tick()

    turns((a, b), 10)
    st = session.state.nodes["gpu0001"]
    assert "2 agent processes take turns" in str(st.liveness[0]), st.liveness
    turns((c, a), 10)  # b's process restarted as c
    assert "3 agent processes take turns" in str(st.liveness[0]), st.liveness
    turns((c, a), 30)
    assert "2 agent processes take turns" in str(st.liveness[0]), st.liveness


def test_a_duplicate_node_id_is_a_change_this_console_saw():
    """H3 is found by this console hearing two processes take turns: the change to failed is
    one it saw, dated when it did. Each turn is a sample of another session, so it read
    "ok -> failed (H3); first heard so: it changed while this console did not hear the
    node", and the job's incident "4 of its nodes failed before this console heard them",
    of nodes it had heard ok for minutes (a newcomer's run: a second sim with the same
    node names)."""
    from fleetdeck.console.health import UNSEEN_CHANGE

    a, b, session = clones_born()
    for _ in range(6):  # heard ok, from one process
        a.now += 0.5
        a.feed(session.ingest, a.agent.telemetry(), Kind.TELEMETRY, rx=a.now)
        session.tick()
    st = session.state.nodes["gpu0001"]
    assert st.verdict.value == "ok"
    for _ in range(4):
        for who in (b, a):
            # One MQTT client id: each connect takes the other's session over, and each
            # process comes back in a session of its own (a newer bdSeq).
            a.now += 0.5
            b.now = a.now
            who.agent.bd_seq = max(a.agent.bd_seq, b.agent.bd_seq) + 1
            who.feed(session.ingest, who.status(), Kind.STATUS, rx=a.now)
            who.feed(session.ingest, who.agent.telemetry(), Kind.TELEMETRY, rx=a.now)
            session.tick()
    assert st.verdict.value == "failed" and "H3" in st.reasons
    assert st.change_seen
    lines = [ln.text for ln in session.log.lines() if ln.kind == "verdict"]
    assert any("-> failed (H3)" in m for m in lines), lines
    assert not any(UNSEEN_CHANGE in m for m in lines), lines


def test_an_ack_on_another_nodes_topic_is_refused():
    node = FakeNode(cluster=CLUSTER)
    session = make_session(node, Sent())
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    req = session.drain(["gpu0001"], "test")
    cmd_id = req.targets[0].cmd.cmd_id
    forged = Ack(cmd_id=cmd_id, by="gpu0001", op=CommandOp.DRAIN, result=AckResult.REJECTED,
                 reason="forged", ts=int(node.now * 1000))
    session.ingest.handle(topic_for(CLUSTER, Kind.ACK, "gpu0002"), codec.encode(forged),
                          node.now)
    session.tick()
    assert req.targets[0].phase.value == "requested"
    assert session.state.malformed.total == 1


async def test_with_a_command_key_every_command_the_session_sends_is_signed():
    from fleetdeck.protocol import signing
    from fleetdeck.protocol.messages import Command

    key = b"k" * 32
    node = FakeNode(cluster=CLUSTER)
    sent = Sent()
    session = ConsoleSession(CLUSTER, clock=lambda: node.now, publisher=sent, operator="t",
                             command_key=key)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    emit(node, session, 2)
    node.agent._event(EventDraft("ib_flap", "missed"))  # a gap: a re-send will be asked
    session.drain(["gpu0001"], "signed drain")
    session.ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, "ghost1"),
                          codec.encode(replace(node.agent.telemetry(), node="ghost1")),
                          node.now)  # a rebirth ask
    await run_for(node, session, 30)
    ops = {c["op"] for c in sent.commands}
    assert {"drain", "resend_events", "rebirth"} <= ops
    for c in sent.commands:
        payload = {k: v for k, v in c.items() if k != "kind" and k != "subject"}
        cmd = codec.decode(Command, json.dumps(payload).encode())
        assert signing.check(cmd, key, cmd.issued_at) == "", c


def test_a_resumed_node_is_judged_afresh_not_held_failed_for_n2s_hour():
    """N2 holds a node failed for an hour after a fatal IB counter moved: right while nobody
    has looked, wrong once the operator drained, repaired and resumed it (it read failed for
    an hour while the scheduler placed jobs on it; a fault-scenario drill). Resume forgets
    the port windows; an error after it counts again at once."""
    from fleetdeck.protocol.messages import DrainInfo, DrainState
    from tests.test_health import port

    node = FakeNode(cluster=CLUSTER)
    session = make_session(node, Sent())
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    downed = 0

    def sample() -> None:
        node.feed(session.ingest, port(node.telemetry(), 2, link_downed=downed),
                  Kind.TELEMETRY)
        session.tick()

    def status(state: DrainState) -> None:
        msg = node.status().model_copy(update={"drain": DrainInfo(state=state, reason="r")})
        node.feed(session.ingest, msg, Kind.STATUS)
        session.tick()

    sample()
    st = session.state.nodes["gpu0001"]
    downed = 1
    sample()
    assert st.verdict.value == "failed" and "N2" in st.reasons
    status(DrainState.DRAINED)
    for _ in range(3):
        sample()
    assert "N2" in st.reasons  # drained, not yet repaired: the hour holds
    status(DrainState.NONE)
    sample()
    assert st.verdict.value == "ok", st.all_findings
    downed = 2
    sample()
    assert "N2" in st.reasons  # a new error after the resume counts at once


def heard_drained(node: FakeNode, session: ConsoleSession) -> None:
    """The session hears ``node`` born, drained ("RMA 123" by alice), and one sample."""
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.agent.drain = DrainInfo(state=DrainState.DRAINED, reason="RMA 123",
                                 requested_by="alice", cmd_id="c-1")
    node.feed(session.ingest, node.status(), Kind.STATUS)
    node.feed(session.ingest, node.agent.telemetry(), Kind.TELEMETRY)
    session.tick()


def test_a_drained_node_back_in_a_new_session_not_drained_is_said():
    """The simulator was restarted (its agents keep no state): every drained node came back
    undrained and took work again, and the timeline said nothing (an SRE drill)."""
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    node = FakeNode(cluster=CLUSTER)
    session = make_session(node, Sent())
    heard_drained(node, session)
    assert session.state.nodes[node.node_id].drain.state is DrainState.DRAINED

    def drain_lines() -> list[str]:
        return [line.text for line in session.log.lines() if line.kind == "drain"]

    def new_session(new_process: bool) -> None:
        node.agent.bd_seq += 1000
        if new_process:
            node.agent.started_ms += 5000
        node.feed(session.ingest, node.birth(), Kind.BIRTH)
        node.feed(session.ingest, node.status(), Kind.STATUS)
        session.tick()
        node.now += 1
        node.feed(session.ingest, node.agent.telemetry(), Kind.TELEMETRY)
        session.tick()

    # The same process reconnecting with a resume whose own status went unseen: no loss.
    node.agent.drain = DrainInfo()
    new_session(new_process=False)
    assert drain_lines() == []
    node.agent.drain = DrainInfo(state=DrainState.DRAINED, reason="RMA 123",
                                 requested_by="alice", cmd_id="c-1")
    node.feed(session.ingest, node.status(), Kind.STATUS)
    session.tick()
    # A new process without --state-dir: a later session, not drained.
    node.agent.drain = DrainInfo()
    new_session(new_process=True)
    lines = drain_lines()
    assert lines == [f"{node.node_id} came back in a new agent session not drained; it was "
                     "drained (RMA 123) by alice: unless someone resumed it, its agent kept no "
                     "state (--state-dir), so drain it again if it is not repaired"], lines
    # A resume within a session is no loss.
    node.agent.drain = DrainInfo(state=DrainState.DRAINED, reason="again", cmd_id="c-2")
    node.feed(session.ingest, node.status(), Kind.STATUS)
    session.tick()
    node.agent.drain = DrainInfo()
    node.feed(session.ingest, node.status(), Kind.STATUS)
    session.tick()
    assert len([line for line in session.log.lines() if line.kind == "drain"]) == 1


async def test_a_lost_drain_is_kept_in_the_store_for_events_and_a_later_console(tmp_path):
    """Only the console that saw it said a drain was lost to an agent restart: `fleetdeck
    events` and a console started later did not (a drill: three drained nodes back undrained,
    the CLI silent). It is the node's event in the store too, and moves no event counter."""
    from fleetdeck.protocol.messages import DrainInfo

    node = FakeNode(cluster=CLUSTER)
    session = make_session(node, Sent())
    await session.open_store(tmp_path / "store.db")
    heard_drained(node, session)
    node.agent.drain = DrainInfo()
    node.agent.bd_seq += 1000
    node.agent.started_ms += 5000
    for kind, payload in ((Kind.BIRTH, node.birth()), (Kind.STATUS, node.status())):
        node.feed(session.ingest, payload, kind)
    session.tick()
    node.now += 1
    node.feed(session.ingest, node.agent.telemetry(), Kind.TELEMETRY)
    session.tick()
    await session.flush()
    assert session.store is not None
    rows = await session.store.events(0, kinds=["drain"])
    assert [r["message"] for r in rows] == [
        f"{node.node_id} came back in a new agent session not drained; it was drained "
        "(RMA 123) by alice: unless someone resumed it, its agent kept no state "
        "(--state-dir), so drain it again if it is not repaired"]
    await session.close()
    later = make_session(node, Sent())
    await later.open_store(tmp_path / "store.db")
    try:
        assert [x.text.split(";")[0] for x in later.log.lines() if x.kind == "drain"] == [
            f"console: {node.node_id} came back in a new agent session not drained"]
        assert later.state.nodes[node.node_id].event_prefix == ""
    finally:
        await later.close()


def test_a_second_outage_says_its_own_length_not_the_first_ones():
    """TERM and restart the broker, then kill -9 it 30 s later and restart it within 3 s: the
    timeline said "broker connection back after 32 s" of the 3 s outage (an SRE drill; the
    blindness rightly runs from the first, while the agents were still coming back)."""
    from types import SimpleNamespace

    now = [1000.0]
    session = ConsoleSession(CLUSTER, clock=lambda: now[0], operator="t")
    conn = SimpleNamespace(state="connected", connects=1, why="")
    session.feed = SimpleNamespace(  # type: ignore[assignment]
        conn=conn, keepalive=10, broker_heard_s=lambda: 0.0)

    def ticks_until(t: float) -> None:
        while now[0] < t:
            now[0] += 0.5
            session._watch_sight(now[0])

    ticks_until(1000.5)
    for lost, back in ((1001.0, 1011.0), (1020.0, 1023.0)):
        ticks_until(lost - 0.5)
        conn.state, conn.why = "disconnected", "connection refused"
        ticks_until(back - 0.5)
        conn.state = "connected"
        ticks_until(back)
    said = sorted((line.ts, line.text.split(";")[0]) for _seq, line in session.log
                  if "connection back" in line.text)
    assert [text for _ts, text in said] == ["broker connection back after 10 s",
                                            "broker connection back after 3 s"], said


async def test_a_console_restarted_after_a_gap_says_what_it_did_not_watch(tmp_path):
    """A console killed and restarted 17 s later told what happened meanwhile only by the
    agents' events, with nothing saying it had not watched (a 3 a.m. drive)."""
    node = FakeNode(cluster=CLUSTER)
    first = make_session(node, Sent())
    await first.open_store(tmp_path / "store.db")
    await run_for(node, first, 5)
    await first.close()

    def gap_lines(session: ConsoleSession) -> list[str]:
        return [x.text for x in session.log.lines() if x.text.startswith("nothing watched")]

    node.now += 5.0  # a quick restart is no gap worth saying
    again = make_session(node, Sent())
    await again.open_store(tmp_path / "store.db")
    await run_for(node, again, 2)
    assert gap_lines(again) == []
    await again.close()

    node.now += 40.0
    later = make_session(node, Sent())
    await later.open_store(tmp_path / "store.db")
    try:
        (line,) = gap_lines(later)
        assert line.startswith("nothing watched this fleet from ")
        assert "(40s; store store.db)" in line, line
    finally:
        await later.close()


async def test_a_console_on_a_store_its_live_collector_cannot_write_says_so(tmp_path):
    """A console started on a store whose collector was alive but held its ticks in memory
    (the disk full) said "nothing watched this fleet from …": the collector had watched all
    along (an SRE drill). It says the store is not being written, and by whom."""
    from fleetdeck.console.store import WriterLock

    node = FakeNode(cluster=CLUSTER)
    first = make_session(node, Sent())
    await first.open_store(tmp_path / "store.db")
    await run_for(node, first, 5)
    await first.close()
    lock = WriterLock(tmp_path / "store.db")
    lock.take("collect pid 4242 on here")  # the collector, alive, its writes failing
    try:
        node.now += 40.0
        console = make_session(node, Sent())
        await console.open_store(tmp_path / "store.db")
        texts = [x.text for x in console.log.lines()]
        await console.close()
    finally:
        lock.release()
    assert not [t for t in texts if t.startswith("nothing watched")], texts
    (line,) = [t for t in texts if "not written since" in t]
    assert "(40s) though collect pid 4242 on here writes it" in line, line
