"""A console (or one-shot ``status``) that starts on a fleet of 1,024 nodes gets every node's
retained birth and status at once; Mosquitto keeps at most ``max_queued_messages`` (1000 by
default) of them for it and drops the rest, the statuses, which it sends after the births. The
nodes whose agents had died read "stale: no telemetry heard from it yet", not offline (an SRE
drill: 4 dead agents of 1,024, `status` read 4 stale; Mosquitto logged "Outgoing messages are
being dropped"). A node born with no status heard is asked for its retained status again, on
its own topic (docs/reliability.md)."""

import asyncio
import json
import re
import time
import uuid
from unittest.mock import patch

import aiomqtt
import pytest

import fleetdeck.console.cli.status as status_mod
import fleetdeck.console.retained_burst as burst_mod
from fleetdeck.broker import ManagedBroker, mosquitto_conf
from fleetdeck.brokerurl import parse_broker_url
from fleetdeck.console.health import Verdict
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, require_binaries, run_cli, unsubscribed
from tests.tui.fleet import CLUSTER, Clock, SynthFleet

NODES = 8


def small_queue_conf(port: int, host: str, queued: int = 6) -> str:
    """The shipped test config with a queue of ``queued`` and 4 in flight: a burst is cut at
    ``queued`` + 4 messages. Its own ``max_queued_messages`` line replaced, whatever it ships
    (a fixed string left the broker's whole queue in place once the shipped value changed)."""
    conf, n = re.subn(r"^max_queued_messages \d+$",
                      f"max_queued_messages {queued}\nmax_inflight_messages 4\nlog_type notice",
                      mosquitto_conf(port, host), flags=re.MULTILINE)
    assert n == 1, conf
    return conf


@pytest.fixture
def small_queue_mosquitto(tmp_path):
    """Mosquitto whose queue for a subscriber holds the births of NODES nodes and not their
    statuses too: 1,024 nodes on the default 1000, scaled down."""
    require_binaries("mosquitto")
    broker = ManagedBroker("mosquitto", workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    broker.config = small_queue_conf(broker.port, broker.host)
    with broker:
        yield broker


@pytest.fixture
def roomier_queue_mosquitto(tmp_path):
    """The same with a queue of 10 (a burst cut at 14): room for a few statuses after 11
    births whatever else the subscription brings first (a retained ``$SYS`` topic took the
    one slot 9 births left, now and then)."""
    require_binaries("mosquitto")
    broker = ManagedBroker("mosquitto", workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    broker.config = small_queue_conf(broker.port, broker.host, queued=10)
    with broker:
        yield broker


async def _retain_dead_agents(broker: ManagedBroker, fleet: SynthFleet,
                              online: bool = False) -> None:
    """What the broker keeps of agents that died: each one's birth and its Last Will (with
    ``online``: the status of an agent that says it is up, and sends nothing)."""
    url = broker.url
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        for name in fleet.names:
            a = fleet.agents[name]
            for kind, msg in ((Kind.BIRTH, a.birth()), (Kind.STATUS, a.status(online=online))):
                await c.publish(topic_for(CLUSTER, kind, name), codec.encode(msg), qos=1,
                                retain=True)


async def test_dead_agents_read_offline_when_the_broker_dropped_their_retained_wills(
        small_queue_mosquitto):
    broker = small_queue_mosquitto
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    url = broker.url
    await _retain_dead_agents(broker, fleet)
    out = run_cli("status", "--broker", str(url), "--cluster", CLUSTER, "--json")
    summary = json.loads(out.stdout)
    assert "Outgoing messages are being dropped" in broker.log_path.read_text(), (
        "the broker kept every status: the test no longer tests the drop")
    verdicts = {n["id"]: n["verdict"] for n in summary["nodes"]}
    assert verdicts == dict.fromkeys(fleet.names, "offline"), verdicts
    assert summary["totals"]["by_verdict"]["offline"] == NODES
    # All 8 births came and the asks brought the statuses: no node missing, nothing said.
    assert out.returncode == 0, out.stderr
    assert summary["retained_burst_cut"] is None
    assert "dropped part of its retained messages" not in out.stderr, out.stderr


CUT_NODES = 24
"""Dead agents whose 48 retained messages a burst cut at 10 cannot hold: 10 births come."""


async def test_status_says_the_broker_cut_the_retained_burst(small_queue_mosquitto):
    """Past max_inflight_messages + max_queued_messages Mosquitto drops the rest of a 3.1.1
    client's burst for good, births first: 2,048 dead agents read as 1,020 nodes, exit 0, no
    word (a review). The nodes born with no status say the burst was cut: one sentence on
    stderr, ``retained_burst_cut`` in --json, exit 3 (docs/reliability.md)."""
    broker = small_queue_mosquitto
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    out = run_cli("status", "--broker", str(broker.url), "--cluster", CLUSTER, "--json")
    assert "Outgoing messages are being dropped" in broker.log_path.read_text()
    summary = json.loads(out.stdout)
    shown = summary["totals"]["nodes"]
    assert shown < CUT_NODES, shown  # the cut: births the broker dropped are not known at all
    assert out.returncode == 3, (out.returncode, out.stderr)
    assert summary["retained_burst_cut"] == {"nodes_without_status": shown, "nodes": shown,
                                             "nodes_learned_since": 0}
    assert (f"the broker dropped part of its retained messages at connect ({shown} of {shown} "
            "nodes came without their status): nodes whose birth it dropped are not listed; "
            "raise max_queued_messages") in out.stderr, out.stderr


async def test_a_whole_burst_says_nothing_of_a_cut(mosquitto):
    """The same dead agents on the shipped queue: the burst comes whole, exit 0, no word."""
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    await _retain_dead_agents(mosquitto, fleet)
    out = run_cli("status", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--json")
    summary = json.loads(out.stdout)
    assert summary["totals"]["nodes"] == CUT_NODES
    assert summary["retained_burst_cut"] is None
    assert summary["retained_burst_judged"] is True
    assert "dropped part of its retained messages" not in out.stderr, out.stderr
    assert out.returncode == 0, (out.returncode, out.stderr)


@pytest.mark.timeout(90)
async def test_a_status_whose_answer_was_dropped_too_is_asked_for_again(telling_mosquitto):
    """The answer to an ask can be dropped as the burst's statuses were: asked once a
    connection, the dead agent read stale until the console reconnected (a review). It is
    asked again (10 s on), and once answered its topic is let go."""
    broker = telling_mosquitto
    fleet = SynthFleet(2, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    client_id = f"asks-{uuid.uuid4().hex[:6]}"
    session = ConsoleSession(CLUSTER, url=broker.url, operator="test", client_id=client_id,
                             follow_up=False)
    first, other = fleet.names
    lost = topic_for(CLUSTER, Kind.STATUS, first)
    handle = session.ingest.handle
    dropped: list[float] = []

    def lossy(topic: str, payload: bytes, rx_ts: float) -> None:
        if topic == lost and len(dropped) < 2:
            dropped.append(rx_ts)  # the burst's copy, then the first answer: never arrived
            return
        handle(topic, payload, rx_ts)

    session.ingest.handle = lossy  # type: ignore[method-assign]
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.2))
    try:
        await eventually(lambda: len(dropped) == 2, 20, message="asked once")
        await eventually(lambda: (st := session.state.nodes.get(first)) is not None
                         and st.verdict is Verdict.OFFLINE, 30, message="asked again")
        assert session.state.nodes[other].verdict is Verdict.OFFLINE
        await eventually(lambda: unsubscribed(broker, client_id, lost), 10,
                         message="its topic let go")
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)


class _Wire:
    """The broker connection's client, as far as a test needs: what was subscribed."""

    def __init__(self) -> None:
        self.subscribed: list[tuple[float, str]] = []
        self.now = 0.0

    def subscribe(self, subs) -> None:
        self.subscribed += [(self.now, s.topic) for s in subs]

    def unsubscribe(self, topics) -> None:
        pass


def test_no_status_is_asked_for_while_the_connect_burst_still_arrives():
    """Asked while the broker still sends the connect burst, the answers queue behind it and
    are dropped with the rest: 16,384 nodes' births take seconds to arrive (a review). The
    asks wait until no birth or status was applied for 2 s."""
    clock = Clock()
    fleet = SynthFleet(8, clock, leaves=1)
    session = ConsoleSession(CLUSTER, url=parse_broker_url("mqtt://127.0.0.1:1"), clock=clock,
                             follow_up=False)
    link = session.feed.link  # type: ignore[union-attr]
    wire = _Wire()
    link.client = wire
    link.conn.state, link.conn.since, link.conn.connects = "connected", clock(), 1
    status_topics = {topic_for(CLUSTER, Kind.STATUS, n) for n in fleet.names}
    # A birth every tick for 4 s: the burst, no status among it (dropped by the broker).
    for name in fleet.names:
        clock.advance(0.5)
        wire.now = clock()
        session.tick()
        session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, name),
                              codec.encode(fleet.agents[name].birth()), clock())
    asked_in_burst = [t for at, t in wire.subscribed if t in status_topics]
    for _ in range(6):
        clock.advance(0.5)
        wire.now = clock()
        session.tick()
    asked = [t for at, t in wire.subscribed if t in status_topics]
    assert asked_in_burst == [], asked_in_burst
    assert sorted(asked) == sorted(status_topics), asked


def test_statuses_are_asked_for_while_telemetry_always_waits_to_be_applied():
    """At 16,384 nodes at 1 Hz some telemetry always waits to be applied (the tick's
    budget): asks that waited for a tick with nothing left over were never made, and the dead
    agents read stale (a review). Telemetry is no part of the burst."""
    clock = Clock()
    fleet = SynthFleet(8, clock, leaves=1)
    session = ConsoleSession(CLUSTER, url=parse_broker_url("mqtt://127.0.0.1:1"), clock=clock,
                             follow_up=False)
    session.apply_max_nodes = 2  # a slice of the fleet a tick: the rest carried over
    link = session.feed.link  # type: ignore[union-attr]
    wire = _Wire()
    link.client = wire
    link.conn.state, link.conn.since, link.conn.connects = "connected", clock(), 1
    status_topics = {topic_for(CLUSTER, Kind.STATUS, n) for n in fleet.names}
    for name in fleet.names:  # the births; their statuses dropped by the broker
        session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, name),
                              codec.encode(fleet.agents[name].birth()), clock())
    for _ in range(40):
        clock.advance(0.5)
        wire.now = clock()
        fleet.telemetry(session.ingest)
        session.tick()
        assert session.backlog  # telemetry left over on every tick
    asked = {t for at, t in wire.subscribed if t in status_topics}  # and again, unanswered
    assert asked == status_topics, asked


def test_the_answers_to_the_asks_do_not_hold_the_next_asks():
    """The answers to the console's own asks (and to its rebirths) are no burst: counted as
    one, each round of asks held the next for 2 s, and of 16,384 nodes about 3,000 were never
    asked in the 30 s window (a review; here scaled down, 16 asks a tick for 320 nodes)."""
    clock = Clock()
    fleet = SynthFleet(320, clock, leaves=1)
    session = ConsoleSession(CLUSTER, url=parse_broker_url("mqtt://127.0.0.1:1"), clock=clock,
                             follow_up=False)
    link = session.feed.link  # type: ignore[union-attr]
    wire = _Wire()
    link.client = wire
    link.conn.state, link.conn.since, link.conn.connects = "connected", clock(), 1
    by_topic = {topic_for(CLUSTER, Kind.STATUS, n): n for n in fleet.names}
    for name in fleet.names:  # the births; their statuses dropped by the broker
        session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, name),
                              codec.encode(fleet.agents[name].birth()), clock())
    reborn = fleet.names[0]
    done = 0
    with patch.object(burst_mod, "STATUS_ASKS_PER_TICK", 16):
        for _ in range(80):
            clock.advance(0.5)
            wire.now = clock()
            session.tick()
            asked = session.follow_ups.rebirth_asked
            if asked.get(reborn) is None:  # a rebirth the console asked for
                asked[reborn] = clock()
            session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, reborn),
                                  codec.encode(fleet.agents[reborn].birth()), clock())
            for _at, topic in wire.subscribed[done:]:  # answered by the next tick
                session.ingest.handle(topic, codec.encode(
                    fleet.agents[by_topic[topic]].status(online=False)), clock())
            done = len(wire.subscribed)
    heard = [n for n, st in session.state.nodes.items() if st.status_bd_seq >= 0]
    assert len(heard) == len(fleet.names), len(heard)


def test_the_console_logs_a_cut_burst_once_as_a_warning():
    """The TUI's events view reads the session's log: the cut is one warning line a
    connection, kept in the store, not one a tick (docs/reliability.md)."""
    clock = Clock()
    fleet = SynthFleet(CUT_NODES, clock, leaves=1)
    session = ConsoleSession(CLUSTER, url=parse_broker_url("mqtt://127.0.0.1:1"), clock=clock,
                             follow_up=False)
    link = session.feed.link  # type: ignore[union-attr]
    link.client = _Wire()
    link.conn.state, link.conn.since, link.conn.connects = "connected", clock(), 1
    for name in fleet.names[:10]:  # the births a cut burst kept; no status among them
        session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, name),
                              codec.encode(fleet.agents[name].birth()), clock())
    for _ in range(20):
        clock.advance(0.5)
        session.tick()
    said = [ln for ln in session.log.lines() if ln.kind == "burst_cut"]
    assert len(said) == 1, said
    assert said[0].severity == "warn"
    assert said[0].text.startswith("the broker dropped part of its retained messages at "
                                   "connect (10 of 10 nodes came without their status)")


async def test_a_burst_cut_in_the_statuses_lists_every_node_and_says_no_cut(
        roomier_queue_mosquitto):
    """11 dead agents on a broker that keeps 14 of a burst: the 11 births and a few statuses
    come, 8 or more nodes without theirs. A status came, so every birth came before it (their
    filter is subscribed first): the cut took statuses only, the asks recover them and the
    listing is whole. It said "nodes whose birth it dropped are not listed", exit 3, as for
    every fleet of 510-1,010 nodes on Mosquitto's default queue (a review)."""
    broker = roomier_queue_mosquitto
    fleet = SynthFleet(11, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    out = run_cli("status", "--broker", str(broker.url), "--cluster", CLUSTER, "--json")
    assert "Outgoing messages are being dropped" in broker.log_path.read_text()
    summary = json.loads(out.stdout)
    verdicts = {n["id"]: n["verdict"] for n in summary["nodes"]}
    assert verdicts == dict.fromkeys(fleet.names, "offline"), verdicts
    assert summary["retained_burst_cut"] is None
    assert "dropped part of its retained messages" not in out.stderr, out.stderr
    assert out.returncode == 0, (out.returncode, out.stderr)


async def test_a_newer_agents_statuses_the_console_refuses_are_no_cut_burst(mosquitto):
    """12 nodes whose retained status holds a drain state this console does not know (a newer
    agent's): refused as malformed, they read as born without a status and were blamed on the
    broker, "12 of 12 nodes", exit 3, while `malformed` had the cause (a review)."""
    fleet = SynthFleet(12, Clock(), leaves=1)
    url = mosquitto.url
    async with aiomqtt.Client(url.host, url.port, identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
        for name in fleet.names:
            await c.publish(topic_for(CLUSTER, Kind.BIRTH, name),
                            codec.encode(fleet.agents[name].birth()), qos=1, retain=True)
            await c.publish(topic_for(CLUSTER, Kind.STATUS, name), _refused_status(
                fleet, name, "newer drain state"), qos=1, retain=True)
    out = run_cli("status", "--broker", str(url), "--cluster", CLUSTER, "--json")
    summary = json.loads(out.stdout)
    assert summary["totals"]["nodes"] == 12
    assert summary["retained_burst_cut"] is None
    assert "dropped part of its retained messages" not in out.stderr, out.stderr
    assert out.returncode == 0, (out.returncode, out.stderr)
    # Each refused once: asked for again, the broker sent the same garbage back.
    assert summary["totals"]["malformed"] == 12


def _refused_status(fleet: SynthFleet, name: str, why: str) -> bytes:
    """A retained status of ``name`` this console refuses: a drain state of a newer agent, or
    a session older than its birth's."""
    status = json.loads(codec.encode(fleet.agents[name].status(online=False)))
    if why == "newer drain state":
        status["drain"] = {"state": "quarantined", "reason": "x"}
    else:
        status["bdSeq"] -= 1
    return json.dumps(status).encode()


def _connected() -> tuple[ConsoleSession, _Wire, Clock]:
    """A console session connected once, its link's client a ``_Wire`` that notes what it is
    asked to send."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, url=parse_broker_url("mqtt://127.0.0.1:1"), clock=clock,
                             follow_up=False)
    feed = session.feed
    assert feed is not None
    wire = _Wire()
    feed.link.client = wire
    conn = feed.link.conn
    conn.state, conn.since, conn.connects, conn.connacks = "connected", clock(), 1, 1
    return session, wire, clock


def _burst(messages: list[tuple[str, bytes]]) -> tuple[ConsoleSession, _Wire]:
    """A console session connected once, to which the broker sent ``messages`` (topic,
    payload) retained at connect, ticked until well past the burst's end."""
    session, wire, clock = _connected()
    feed = session.feed
    assert feed is not None
    for topic, payload in messages:
        feed._received(topic, payload, 1, True)
    feed.hand()
    for _ in range(20):
        clock.advance(0.5)
        wire.now = clock()
        session.tick()
    return session, wire


@pytest.mark.parametrize("why", ["newer drain state", "older session"])
def test_statuses_the_console_refused_are_not_blamed_on_the_broker(why):
    """A node whose status came and was refused (malformed, or of a session older than its
    birth) has no status the broker dropped: it is neither counted as one nor asked for again
    (the broker would send the same)."""
    fleet = SynthFleet(12, Clock(), leaves=1)
    messages = [(topic_for(CLUSTER, Kind.BIRTH, n), codec.encode(fleet.agents[n].birth()))
                for n in fleet.names]
    messages += [(topic_for(CLUSTER, Kind.STATUS, n), _refused_status(fleet, n, why))
                 for n in fleet.names]
    session, wire = _burst(messages)
    said = [ln.text for ln in session.log.lines() if ln.kind in ("burst_cut", "statuses_cut")]
    assert said == []
    assert session.burst_judged and session.burst_cut is None
    assert [t for _at, t in wire.subscribed if t.endswith("/status")] == []
    assert set(session.state.malformed.refused_statuses) == set(fleet.names)


def test_a_refused_status_of_an_older_session_does_not_outlive_the_next_birth():
    """A status refused as of an older session (a dead agent's Last Will) kept its node out of
    the status asks for good: after the agent came back with a new session whose status the
    broker dropped, the node was never asked and read "no status" while the agent was up.
    A new session's birth forgets the refusal; an accepted status does too."""
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    messages = [(topic_for(CLUSTER, Kind.BIRTH, n), codec.encode(fleet.agents[n].birth()))
                for n in fleet.names]
    messages += [(topic_for(CLUSTER, Kind.STATUS, n), _refused_status(fleet, n, "older session"))
                 for n in fleet.names]
    session, wire = _burst(messages)
    assert set(session.state.malformed.refused_statuses) == set(fleet.names)
    back, answered = fleet.names[0], fleet.names[1]
    fleet.agents[back].bd_seq += 1  # restarted: a new session, its status dropped
    feed = session.feed
    assert feed is not None
    feed._received(topic_for(CLUSTER, Kind.BIRTH, back),
                   codec.encode(fleet.agents[back].birth()), 1, False)
    feed._received(topic_for(CLUSTER, Kind.STATUS, answered),
                   codec.encode(fleet.agents[answered].status()), 1, False)
    feed.hand()
    clock = session.clock
    for _ in range(20):
        clock.advance(0.5)  # type: ignore[attr-defined]
        wire.now = clock()
        session.tick()
    refused = session.state.malformed.refused_statuses
    assert back not in refused and answered not in refused
    asked = {t for _at, t in wire.subscribed if t.endswith("/status")}
    assert asked == {topic_for(CLUSTER, Kind.STATUS, back)}


def test_a_last_will_heard_before_a_new_birth_in_one_tick_is_no_refusal_of_it():
    """The old session's Last Will, then the new session's birth, in one tick: births are
    applied first, so the Will was refused after the birth and kept its node out of the
    status asks though the new session's status never came (a review)."""
    session, wire, clock = _connected()
    feed = session.feed
    assert feed is not None
    fleet = SynthFleet(4, Clock(), leaves=1)
    name = fleet.names[0]
    agent = fleet.agents[name]
    # Its birth, its retained status cut by the broker: no status heard.
    feed._received(topic_for(CLUSTER, Kind.BIRTH, name), codec.encode(agent.birth()), 1, True)
    feed.hand()
    session.tick()
    clock.advance(1)
    feed._received(topic_for(CLUSTER, Kind.STATUS, name),
                   codec.encode(agent.status(online=False)), 1, False)  # its Last Will
    clock.advance(0.1)
    agent.bd_seq += 1  # back: a new session, its status dropped
    feed._received(topic_for(CLUSTER, Kind.BIRTH, name), codec.encode(agent.birth()), 1, False)
    feed.hand()
    for _ in range(40):
        clock.advance(0.5)
        wire.now = clock()
        session.tick()
    assert name not in session.state.malformed.refused_statuses
    asked = {t for _at, t in wire.subscribed if t.endswith("/status")}
    assert asked == {topic_for(CLUSTER, Kind.STATUS, name)}


def test_a_cut_in_the_statuses_is_logged_as_info_and_asked_for():
    """The broker sent every birth and one status: the cut took statuses only. One info line,
    not kept; ``burst_cut`` stays None (``status`` exits 0) and each node is asked."""
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    messages = [(topic_for(CLUSTER, Kind.BIRTH, n), codec.encode(fleet.agents[n].birth()))
                for n in fleet.names]
    first = fleet.names[0]
    messages.append((topic_for(CLUSTER, Kind.STATUS, first),
                     codec.encode(fleet.agents[first].status(online=False))))
    session, wire = _burst(messages)
    said = [ln for ln in session.log.lines() if ln.kind in ("burst_cut", "statuses_cut")]
    assert [(ln.kind, ln.severity) for ln in said] == [("statuses_cut", "info")]
    assert said[0].text.startswith(f"the broker dropped the retained statuses of "
                                   f"{CUT_NODES - 1} of {CUT_NODES} nodes at connect")
    assert session.burst_cut is None
    asked = {t for _at, t in wire.subscribed if t.endswith("/status")}
    assert asked == {topic_for(CLUSTER, Kind.STATUS, n) for n in fleet.names[1:]}


async def test_a_cut_burst_still_names_the_nodes_not_heard(small_queue_mosquitto):
    """The cut's exit 3 came before the nodes still waiting were named on stderr: the 10
    nodes listed, alive by their status and silent, went unsaid (a review)."""
    broker = small_queue_mosquitto
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet, online=True)
    out = run_cli("status", "--broker", str(broker.url), "--cluster", CLUSTER, "--json",
                  "--wait", "3")
    assert out.returncode == 3, (out.returncode, out.stderr)
    assert "dropped part of its retained messages" in out.stderr, out.stderr
    assert "sent no telemetry in the 3 s watch" in out.stderr, out.stderr


def test_the_default_watch_is_not_held_open_for_the_burst_judgement(small_queue_mosquitto,
                                                                    monkeypatch, capsys):
    """The burst is judged 2 s after its end (here 4 s). Holding the default watch open until
    then made every default status take 60 s where a node reconnects now and then (the burst
    never went quiet; a review): the watch ends as before and says it did not judge the burst,
    ``retained_burst_judged`` false beside a null ``retained_burst_cut``."""
    broker = small_queue_mosquitto
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    asyncio.run(_retain_dead_agents(broker, fleet))
    monkeypatch.setattr(burst_mod, "STATUS_ASK_QUIET_S", 30.0)
    t0 = time.monotonic()
    status_mod.run_status(broker.url, CLUSTER, None, True)
    took = time.monotonic() - t0
    summary = json.loads(capsys.readouterr().out)
    assert summary["retained_burst_judged"] is False
    assert summary["retained_burst_cut"] is None
    assert took < 20, took


async def test_a_watch_that_ends_before_the_burst_is_judged_says_so(mosquitto):
    """A --wait shorter than the burst plus 2 s never judged the burst: null alone read "not
    cut". ``retained_burst_judged`` says so (docs/protocol.md); the cut stays null or an
    object, never a string a script's truthiness test reads as a cut (a review)."""
    fleet = SynthFleet(2, Clock(), leaves=1)
    await _retain_dead_agents(mosquitto, fleet)
    out = run_cli("status", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--json",
                  "--wait", "1")
    summary = json.loads(out.stdout)
    assert summary["totals"]["nodes"] == 2
    assert summary["retained_burst_cut"] is None
    assert summary["retained_burst_judged"] is False


def _big_job(clock: Clock, wanted: int) -> tuple[str, bytes]:
    from fleetdeck.protocol.messages import JobState
    from tests.tui.fleet import job_status

    job = job_status("42", [], clock, state=JobState.PD).model_copy(
        update={"reason": "Resources", "nodes_wanted": wanted})
    return topic_for(CLUSTER, Kind.JOB, "42"), codec.encode(job)


def _job_said(session: ConsoleSession) -> tuple[str | None, str, str]:
    """Job 42's ``never_fits`` in ``status --json``, its row's reason, and what a restart's
    radius says waits ahead."""
    from fleetdeck.console.commands import _pending_ahead
    from fleetdeck.console.rows import job_row
    from fleetdeck.console.summary import fleet_summary

    now = session.clock()
    [job] = [j for j in fleet_summary(session.state, now)["jobs"] if j["job_id"] == "42"]
    return (job["never_fits"], job_row(session.state.jobs["42"], session.state, now).reason,
            _pending_ahead(session.state))


def test_a_job_is_said_never_to_fit_only_once_the_burst_was_judged_whole():
    """``never_fits`` counted the nodes heard so far: while the connect burst still arrived,
    a job that fits the cluster read "it can never start here" against the nodes heard, and
    was left out of "pending ahead" (a review). Said once the burst is over and whole (here
    all 12 came, so a 16-node job never fits); before, how many were heard."""
    fleet = SynthFleet(12, Clock(), leaves=1)
    session, wire, clock = _connected()
    feed = session.feed
    assert feed is not None
    for n in fleet.names:
        feed._received(topic_for(CLUSTER, Kind.BIRTH, n), codec.encode(fleet.agents[n].birth()),
                       1, True)
        feed._received(topic_for(CLUSTER, Kind.STATUS, n),
                       codec.encode(fleet.agents[n].status()), 1, True)
    feed._received(*_big_job(clock, 16), 1, True)
    feed.hand()
    clock.advance(0.5)
    session.tick()
    assert not session.burst_judged
    never, reason, ahead = _job_said(session)
    assert never is None
    assert reason == "Resources: needs 16 nodes; 12 heard so far"
    assert ahead.startswith("1 job pending ahead (42)"), ahead
    for _ in range(10):
        clock.advance(0.5)
        wire.now = clock()
        session.tick()
    assert session.burst_judged and session.burst_cut is None
    never, reason, ahead = _job_said(session)
    assert never == "needs 16 nodes; the cluster has 12: it can never start here"
    assert reason == f"Resources: {never}"
    assert ahead == ""


def test_a_job_is_never_said_never_to_fit_on_a_burst_cut_in_the_births():
    """A broker that cut the births left nodes out of every count: a job of 16 nodes beside
    the 10 births it kept read "it can never start here" (a review)."""
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    messages = [(topic_for(CLUSTER, Kind.BIRTH, n), codec.encode(fleet.agents[n].birth()))
                for n in fleet.names[:10]]  # the births the cut kept; no status
    session, _wire = _burst(messages)
    assert session.burst_judged and session.burst_cut is not None
    feed = session.feed
    assert feed is not None
    # Live, as a scheduler publishes it (a retained status would say every birth came first).
    feed._received(*_big_job(session.clock, 16), 1, False)  # type: ignore[arg-type]
    feed.hand()
    session.clock.advance(0.5)  # type: ignore[attr-defined]
    session.tick()
    never, reason, ahead = _job_said(session)
    assert never is None
    assert reason == "Resources: needs 16 nodes; 10 heard so far"
    assert ahead.startswith("1 job pending ahead (42)"), ahead


@pytest.mark.timeout(120)
async def test_live_nodes_whose_births_were_cut_are_learned_and_said(small_queue_mosquitto,
                                                                     tmp_path):
    """A 30 s watch of 2,048 live nodes on Mosquitto's default queue listed all 2,048 (each
    node's telemetry brought a rebirth ask, its answer the birth) while status said "nodes
    whose birth it dropped are not listed" (an SRE run). It says how many were learned so, in
    words and in --json; the cut stays said (a dead node's birth is never learned), exit 3."""
    from tests.conftest import spawn, stop_process

    url = str(small_queue_mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "24", "--jobs", "0",
                "--seed", "3", log=tmp_path / "sim.log")
    try:
        deadline = time.monotonic() + 60
        while True:  # every agent connected and retained its birth before the watch
            out = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json",
                          "--wait", "12")
            summary = json.loads(out.stdout)
            if summary["totals"]["nodes"] == 24 or time.monotonic() > deadline:
                break
    finally:
        stop_process(sim)
    assert "Outgoing messages are being dropped" in small_queue_mosquitto.log_path.read_text()
    assert summary["totals"]["nodes"] == 24, summary["totals"]
    cut = summary["retained_burst_cut"]
    assert cut is not None and cut["nodes_learned_since"] >= 8, cut
    assert out.returncode == 3, (out.returncode, out.stderr)
    learned = cut["nodes_learned_since"]
    assert (f"; {learned} nodes whose birth it dropped were learned since from their "
            "telemetry, but a dead node's never is.") in out.stderr, out.stderr


def test_only_nodes_heard_without_a_birth_are_counted_as_learned_since_the_cut():
    """``nodes_learned_since`` counted every node asked for its birth and born by the end: a
    node of the cut burst's births whose status, asked for after the burst, came back as a
    newer agent's (refused, so its birth was asked for again) read as a birth the broker had
    dropped and was learned since (a review). A node heard talking with no birth, whose birth
    its rebirth ask brought, is one."""
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    kept, talking = fleet.names[:10], fleet.names[10]
    messages = [(topic_for(CLUSTER, Kind.BIRTH, n), codec.encode(fleet.agents[n].birth()))
                for n in kept]  # the births the cut kept; no status
    session, _wire = _burst(messages)
    assert session.burst_cut == (10, 10)
    feed = session.feed
    assert feed is not None
    clock = session.clock
    # The answer to the status ask of a born node, refused; and a live node's telemetry.
    feed._received(topic_for(CLUSTER, Kind.STATUS, kept[0]),
                   _refused_status(fleet, kept[0], "newer drain state"), 1, True)
    feed._received(*fleet.payloads([talking])[0], 0, False)
    feed.hand()
    for _ in range(2):
        clock.advance(0.5)  # type: ignore[attr-defined]
        session.tick()
    assert {kept[0], talking} <= set(session.follow_ups.rebirth_asked)
    for name in (kept[0], talking):  # each agent answers its rebirth ask
        feed._received(topic_for(CLUSTER, Kind.BIRTH, name),
                       codec.encode(fleet.agents[name].birth()), 1, False)
    feed.hand()
    clock.advance(0.5)  # type: ignore[attr-defined]
    session.tick()
    out: dict[str, object] = {"cluster": CLUSTER}
    assert status_mod.said_burst_cut(session, out)
    assert out["retained_burst_cut"] == {"nodes_without_status": 10, "nodes": 10,
                                         "nodes_learned_since": 1}
