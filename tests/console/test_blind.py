"""The console's own broker outage is not the nodes': while it is cut off (and until the agents
had time to reconnect) no node goes stale for the silence, no rack looks dark, and ``status``
says the picture is as of the loss (exit 3)."""

import asyncio
import json
import time
import uuid

import pytest

from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import AGENT_RECONNECT_S, unseen_s
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol.topics import Kind
from tests.conftest import eventually, run_cli, spawn, stop_process, subscribers
from tests.helpers import FakeNode

T0 = 1_000_000.0


def test_unseen_leaves_out_the_time_the_console_could_not_hear() -> None:
    assert unseen_s(100.0, 130.0, None) == 30.0
    assert unseen_s(100.0, 130.0, (110.0, None)) == 10.0  # cut off since 110: frozen at 10
    assert unseen_s(100.0, 130.0, (110.0, 125.0)) == 15.0  # 10 before, 5 after
    assert unseen_s(120.0, 130.0, (100.0, 110.0)) == 10.0  # heard after it: all counts
    assert unseen_s(105.0, 130.0, (100.0, 110.0)) == 20.0  # heard inside it


def _fleet(n: int = 8) -> tuple[ConsoleSession, Ingest, list[FakeNode]]:
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: T0)
    nodes = [FakeNode(f"gpu{i:04d}", t0=T0) for i in range(n)]
    for node in nodes:
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
        node.feed(ingest, node.telemetry(advance=0.0), Kind.TELEMETRY)
    session.tick(T0)
    return session, ingest, nodes


def test_a_goodbye_just_before_the_loss_is_no_will_of_the_broker_shutdown() -> None:
    """A will received within ``WILL_BURST_S`` of the loss is taken for the shutting-down
    broker's, and its node kept online. An agent's own goodbye (``stopped``: SIGTERM, a
    deployment) is no will the broker sends: taken back, the stopped node read online and
    stopped at once, and went stale, "check the agent" (2026-12-07 drill: an agent stopped,
    then the broker killed a second later)."""
    session, ingest, nodes = _fleet(2)
    node = nodes[0]
    node.feed(ingest, node.agent.status(online=False, stopped=True), Kind.STATUS, rx=T0 + 1)
    session.tick(T0 + 1)
    st = session.state.nodes[node.node_id]
    assert st.online is False and st.stopped
    session.state.lose_sight(T0 + 1.5)  # the broker gone half a second after the goodbye
    assert st.online is False and st.stopped


def test_no_node_goes_stale_while_the_console_is_cut_off_nor_until_the_agents_are_back() -> None:
    session, _ingest, nodes = _fleet()
    state = session.state
    quiet = nodes[0].node_id
    state.nodes[quiet].last_rx = T0 - 60  # silent before the outage: stays stale
    state.mark(quiet)
    state.judge_fleet(T0 + 0.5)
    assert state.nodes[quiet].verdict.value == "stale"
    state.lose_sight(T0 + 1)
    for t in (T0 + 5, T0 + 60, T0 + 300):
        state.judge_fleet(t)
        verdicts = {st.node_id: st.verdict.value for st in state.nodes.values()}
        assert verdicts.pop(quiet) == "stale"
        assert set(verdicts.values()) == {"ok"}, (t, verdicts)
    found = incidents(state)
    assert found[0].kind == "console" and found[0].severity == "error"
    assert not [i for i in found if i.kind == "rack"]
    assert state.sightless(T0 + 300)
    state.regain_sight(T0 + 300)
    state.judge_fleet(T0 + 300 + AGENT_RECONNECT_S - 1)  # agents still reconnecting
    assert sum(st.verdict.value == "stale" for st in state.nodes.values()) == 1
    assert not [i for i in incidents(state) if i.kind == "console"]
    state.judge_fleet(T0 + 300 + AGENT_RECONNECT_S + 5)  # never came back: stale now
    assert all(st.verdict.value == "stale" for st in state.nodes.values())
    summary = fleet_summary(state, T0 + 340)
    assert summary["connection_lost"] == {"since": T0 + 1,
                                          "stale_judged_from": T0 + 300 + AGENT_RECONNECT_S,
                                          "why": "the broker connection was lost"}


def test_a_second_loss_soon_after_a_return_is_dated_from_its_own_start() -> None:
    """Lost at +1, back at +11, lost again at +31 (within the agents' 30 s reconnect grace):
    one outage for staleness, but "no data since +1" (the overview, the console incident,
    ``connection_lost``) hid the 20 s of data between, and read as a 30 s outage of one just
    begun (docs/protocol.md: ``since`` is when the console lost its connection)."""
    session, _ingest, _nodes = _fleet()
    state = session.state
    state.lose_sight(T0 + 1)
    state.regain_sight(T0 + 11)
    state.lose_sight(T0 + 31)
    assert state.blind == (T0 + 1, None)  # still one outage for the nodes' silence
    state.judge_fleet(T0 + 120)
    assert {st.verdict.value for st in state.nodes.values()} == {"ok"}
    (console,) = [i for i in incidents(state) if i.kind == "console"]
    assert console.since == T0 + 31
    assert fleet_summary(state, T0 + 120)["connection_lost"]["since"] == T0 + 31
    state.regain_sight(T0 + 130)
    assert state.lost_at == T0 + 31 and not state.sightless(T0 + 130 + AGENT_RECONNECT_S)


def test_a_node_without_telemetry_is_waiting_not_ok() -> None:
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: T0)
    born, reporting = FakeNode("gpu0001", t0=T0), FakeNode("gpu0002", t0=T0)
    for node in (born, reporting):
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
    reporting.feed(ingest, reporting.telemetry(advance=0.0), Kind.TELEMETRY)
    session.tick(T0)
    summary = fleet_summary(session.state, T0)
    verdicts = {n["id"]: n["verdict"] for n in summary["nodes"]}
    assert verdicts == {"gpu0001": "waiting", "gpu0002": "ok"}
    assert summary["totals"]["by_verdict"]["waiting"] == 1
    assert summary["totals"]["by_verdict"]["ok"] == 1


@pytest.mark.timeout(120)
async def test_broker_killed_under_a_live_console_blames_nobody(mosquitto, tmp_path) -> None:
    """Drill: SIGKILL the broker under a live console core and a simulated fleet."""
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "blind", "--nodes", "8",
                "--interval", "1.0", "--keepalive", "2", log=tmp_path / "sim.log")
    session = ConsoleSession("blind", url=mosquitto.url, operator="test",
                             client_id=f"blind-{uuid.uuid4().hex[:6]}")
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.2))
    state = session.state
    try:
        await eventually(lambda: sum(st.verdict.value == "ok" for st in state.nodes.values())
                         == 8, 30, message="fleet up")
        mosquitto.kill()
        await eventually(lambda: state.sightless(session.clock()), 10, message="blind")
        await asyncio.sleep(6)  # twice the staleness window of a 1 s interval
        assert {st.verdict.value for st in state.nodes.values()} == {"ok"}
        assert [i.kind for i in incidents(state)] == ["console"]
        assert any("broker connection lost" in line.text for line in session.log.lines())
        mosquitto.start()
        await eventually(lambda: state.blind is not None and state.blind[1] is not None, 30,
                         message="back")
        await eventually(lambda: all(st.last_rx is not None and st.last_rx > state.blind[1]
                                     - AGENT_RECONNECT_S for st in state.nodes.values()), 40,
                         message="agents back")
        assert {st.verdict.value for st in state.nodes.values()} == {"ok"}
        assert any("broker connection back" in line.text for line in session.log.lines())
        # Whatever gaps the outage left are not blamed on the console's pace.
        assert not session.shedding(session.clock())
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)
        stop_process(sim)


async def test_a_connection_lost_before_a_tick_saw_it_is_a_loss(mosquitto) -> None:
    """Connected and cut off between two ticks (a broker gone within a tick of the SUBACK):
    the next tick blinds the console as for any loss. It took the feed for never connected,
    and ``status`` killed so exited 0 with the picture it then could not see (a loaded CI
    machine ticked late enough to show it)."""
    session = ConsoleSession("blind", url=mosquitto.url, operator="test",
                             client_id=f"blind-{uuid.uuid4().hex[:6]}")
    feed = session.feed
    assert feed is not None
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop))  # the feed alone: the test ticks
    try:
        await eventually(lambda: feed.conn.connects == 1, 30, message="connected")
        mosquitto.kill()
        await eventually(lambda: feed.conn.state == "disconnected", 30, message="loss seen")
        session.tick()
        assert session.state.blind is not None and session.state.sightless(session.clock())
        assert any("broker connection lost" in line.text for line in session.log.lines())
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.timeout(120)
async def test_status_exits_3_when_the_broker_goes_away_during_its_watch(telling_mosquitto,
                                                                        tmp_path) -> None:
    mosquitto = telling_mosquitto
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "blind", "--nodes", "4",
                "--interval", "1.0", log=tmp_path / "sim.log")
    try:
        first = await asyncio.to_thread(run_cli, "status", "--broker", str(mosquitto.url),
                                        "--cluster", "blind", "--json", "--wait", "3")
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["connection_lost"] is None
        # A fleet that talks is no quiet link (``quiet_link``: tests/console/
        # test_status_quiet_link.py has one that went silent).
        assert json.loads(first.stdout)["quiet_link"] is None
        status = asyncio.create_task(asyncio.to_thread(
            run_cli, "status", "--broker", str(mosquitto.url), "--cluster", "blind", "--json",
            "--wait", "8"))
        # Killed during the watch, not before it connected (its start-up alone can take
        # seconds on a loaded machine, and a fixed 3 s was a guess): the second status client
        # has subscribed.
        await eventually(lambda: subscribers(mosquitto, "fd-status-") == 2, 30, 0.05,
                         "the second status subscribed")
        mosquitto.kill()
        got = await status
        assert got.returncode == 3, got.stderr
        assert "broker connection was lost" in got.stderr
        out = json.loads(got.stdout)
        assert out["connection_lost"]["since"] > 0
        assert out["totals"]["by_verdict"]["stale"] == 0
        assert out["incidents"][0]["kind"] == "console"
    finally:
        stop_process(sim)


def test_a_console_that_did_not_run_does_not_blame_the_nodes_for_it() -> None:
    """A collector stopped for 33 s (SIGSTOP) published every node stale on resuming: the
    samples were waiting in its socket, unread."""
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.console.sight_watch import STALL_GRACE_S

    now = [T0]
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: now[0],
                             url=BrokerURL("127.0.0.1", 9))  # a live session, never connected
    nodes = [FakeNode(f"gpu{i:04d}", t0=T0) for i in range(4)]
    for node in nodes:
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
        node.feed(ingest, node.telemetry(advance=0.0), Kind.TELEMETRY)
    session.tick()
    now[0] = T0 + 0.5
    session.tick()
    now[0] = T0 + 33  # stopped, then resumed
    session.tick()
    assert {st.verdict.value for st in session.state.nodes.values()} == {"ok"}
    assert any("did not run for 32 s" in line.text for line in session.log.lines())
    assert session.state.blind_why.startswith("this console did not run")
    for node in nodes:  # what queued up meanwhile is read
        node.feed(ingest, node.telemetry(advance=33.0), Kind.TELEMETRY, rx=now[0])

    def run_until(t: float) -> None:  # a running console ticks every half second
        while now[0] < t:
            now[0] = min(t, now[0] + 0.5)
            session.tick()

    run_until(T0 + 33 + STALL_GRACE_S + 2)
    assert {st.verdict.value for st in session.state.nodes.values()} == {"ok"}
    run_until(T0 + 33 + STALL_GRACE_S + 4)  # and silence after it counts again
    assert {st.verdict.value for st in session.state.nodes.values()} == {"stale"}


def test_a_host_that_slept_is_said_to_have_not_run_not_to_have_stepped_its_clock(
        monkeypatch) -> None:
    """A laptop (or a host) suspended for an hour: the wall clock moves on, and so does the
    clock that counts sleep, but Linux's monotonic clock does not. Told apart by the monotonic
    one, the console said "this host's clock was stepped forward by 3600 s (NTP, or set by
    hand)" of a lid closed and opened, and measured every delay and clock offset again."""
    from fleetdeck.brokerurl import BrokerURL

    monotonic, boottime = [500.0], [700.0]
    real_gettime = time.clock_gettime
    monkeypatch.setattr(time, "monotonic", lambda: monotonic[0])
    monkeypatch.setattr(time, "clock_gettime", lambda clk: (
        boottime[0] if clk == getattr(time, "CLOCK_BOOTTIME", None) else real_gettime(clk)))
    session = ConsoleSession("test", follow_up=False,  # the real wall clock's session
                             url=BrokerURL("127.0.0.1", 9))

    def tick(wall: float, ran: float, slept: float = 0.0) -> None:
        monotonic[0] += ran
        boottime[0] += ran + slept
        session.tick(wall)

    tick(T0, 0.0)
    tick(T0 + 0.5, 0.5)
    tick(T0 + 3601.0, 0.5, slept=3600.0)  # the lid closed, and opened an hour later
    lines = [line.text for line in session.log.lines()]
    assert not [t for t in lines if "stepped" in t], lines
    assert any("did not run for 3600 s" in t for t in lines), lines
