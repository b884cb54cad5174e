"""A broker hung under SIGSTOP keeps the console's TCP link up until the keepalive runs out:
the header read "connected" in green while nothing arrived and every node went stale (a
drill). With agents online and nothing heard for ``QUIET_LINK_S``, the header says so."""

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.cli.status import collect
from fleetdeck.console.tui.app import QUIET_LINK_S, FleetdeckApp
from tests.conftest import eventually

CLUSTER = "hung"


def two_agents(mosquitto, stop: asyncio.Event) -> list[asyncio.Task]:
    """gpu0001 and gpu0002 sampling every 0.5 s until ``stop``."""
    agents = [NodeAgent(cluster=CLUSTER, node_id=f"gpu{i:04d}", source=SimNode(f"gpu{i:04d}"),
                        url=mosquitto.url, interval_s=0.5, phase_s=0.0) for i in (1, 2)]
    return [asyncio.create_task(a.run(stop)) for a in agents]


async def both_online(app: FleetdeckApp) -> None:
    await eventually(lambda: (app.tick(), len(app.state.nodes) == 2
                              and all(st.online for st in app.state.nodes.values()))[1],
                     timeout=20, message="two nodes online")


@contextlib.asynccontextmanager
async def console_of_two_agents(mosquitto) -> AsyncIterator[
        tuple[FleetdeckApp, Callable[[bool], None]]]:
    """A console (160x48) with gpu0001 and gpu0002 online, and ``hang(True)`` / ``hang(False)``
    to stop and continue the broker: continued on the way out whatever happened, so a failed
    assertion leaves no stopped broker for the next test."""
    stop = asyncio.Event()
    tasks = two_agents(mosquitto, stop)
    app = FleetdeckApp(cluster=CLUSTER, url=mosquitto.url, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    assert mosquitto.proc is not None
    pid = mosquitto.proc.pid
    stopped = False

    def hang(on: bool) -> None:
        nonlocal stopped
        os.kill(pid, signal.SIGSTOP if on else signal.SIGCONT)
        stopped = on

    try:
        async with app.run_test(size=(160, 48)):
            await both_online(app)
            yield app, hang
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_header_says_nothing_is_heard_from_a_hung_broker(mosquitto):
    async with console_of_two_agents(mosquitto) as (app, hang):
        header = app.header_text(time.time())
        assert "nothing heard" not in header and "connected" in header

        def problems() -> str:
            return str(app.screen.query_one("#problems").render())

        await eventually(lambda: (app.tick(), "every node reports healthy" in problems())[1],
                         timeout=20, message="the overview's two nodes healthy")
        hang(True)
        await asyncio.sleep(QUIET_LINK_S + 1.5)
        app.tick()
        header = app.header_text(time.time())
        assert "connected, nothing heard for" in header and "(broker hung?)" in header, header
        # Not "every node reports healthy" under that header (an SRE drill).
        said = problems()
        assert "every node reports healthy" not in said, said
        assert "Top problems none as of" in said and "nothing heard since" in said, said
        hang(False)
        await eventually(lambda: (app.tick(), "nothing heard" not in app.header_text(
            time.time()))[1], timeout=20, message="heard again")


async def test_no_node_is_judged_stale_for_a_hung_brokers_silence(mosquitto):
    """A broker SIGSTOPped 20 s in a drill: the console's link stayed up until the keepalive
    ran out (15 s) and every node was written stale 2 s in, and back at 15 s (64 verdict rows
    in the store for 32 nodes). A node's silence now counts only up to the broker's last word,
    and a quiet broker is pinged at once so a hung agent still reads stale."""
    async with console_of_two_agents(mosquitto) as (app, hang):
        hang(True)
        seen: set[str] = set()
        for _ in range(12):  # 6 s: 12 missed samples, short of the keepalive's mute (15 s)
            await asyncio.sleep(0.5)  # ticked as a live console is (a longer gap is a stall)
            app.tick()
            seen |= {st.verdict.value for st in app.state.nodes.values()}
        hang(False)
        assert seen == {"ok"}, seen


async def test_a_status_watch_that_ends_with_the_broker_hung_ends_cut_off(mosquitto):
    """A broker SIGSTOPped 4 s into an 8 s `status`: every verdict was as of its last word and
    said as the fleet now, exit 0 (a drill; the keepalive's mute comes at 15 s only)."""
    stop = asyncio.Event()
    tasks = two_agents(mosquitto, stop)
    assert mosquitto.proc is not None
    pid = mosquitto.proc.pid

    async def hang_later() -> None:
        await asyncio.sleep(4.0)
        os.kill(pid, signal.SIGSTOP)

    hanger = asyncio.create_task(hang_later())
    try:
        session, _watched = await collect(mosquitto.url, CLUSTER, 8.0)
    finally:
        os.kill(pid, signal.SIGCONT)
        await hanger
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert session.state.blind is not None, "the watch ended with the broker hung"
    assert "has not answered" in session.state.blind_why, session.state.blind_why
    assert {st.verdict.value for st in session.state.nodes.values()} == {"ok"}


async def test_a_mistyped_cluster_is_told_which_clusters_the_broker_holds(mosquitto, monkeypatch):
    """A console started with --cluster fdx on a broker holding cluster fd's births said only
    "no node of cluster fdx heard from yet", for ever; `status` names the clusters seen there
    (a drill). The console asks the broker once, after a few seconds of nothing."""
    import aiomqtt

    from fleetdeck.console.tui import app as app_module
    from fleetdeck.console.tui.screens.overview import OverviewScreen

    monkeypatch.setattr(app_module, "CLUSTERS_PROBE_AFTER_S", 0.5)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as c:
        await c.publish("fleetdeck/v1/real/node/gpu0001/birth", b'{"v":1}', qos=1, retain=True)
    app = FleetdeckApp(cluster="typo", url=mosquitto.url, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    async with app.run_test(size=(160, 48)) as pilot:
        await eventually(lambda: (app.tick(), app.other_clusters == ["real"])[1], timeout=20,
                         message="the clusters the broker holds")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        app.tick()
        await pilot.pause()
        text = "\n".join(str(w.render()) for w in app.screen.query("#problems"))
        assert ("no node of cluster typo heard from yet; clusters seen there: real "
                "(wrong --cluster?)") in text, text


async def test_a_silent_fleet_on_a_broker_that_answers_is_not_called_a_hung_broker(mosquitto):
    """A replay into a broker that had ended read "broker hung?" for 333 s while the broker
    carried other clusters (a replay audit): its keepalive answers say it is not hung."""
    import aiomqtt

    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    node = FakeNode(cluster=CLUSTER, t0=time.time())
    app = FleetdeckApp(cluster=CLUSTER, url=mosquitto.url, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as c:

        async def send(kind: Kind, msg) -> None:
            await c.publish(node.topic(kind), codec.encode(msg), qos=1,
                            retain=kind in (Kind.BIRTH, Kind.STATUS))

        await send(Kind.BIRTH, node.birth())
        await send(Kind.STATUS, node.status())
        async with app.run_test(size=(160, 48)):
            for _ in range(4):
                await send(Kind.TELEMETRY, node.telemetry(advance=0.5))
                await asyncio.sleep(0.5)
                app.tick()
            assert app.state.nodes[node.node_id].online
            # The fleet stops; the broker goes on answering the console's keepalive pings.
            # Said once a fresh subscription heard nothing either (console/deaf_check.py).
            await eventually(lambda: (app.tick(), "hears nothing either: the fleet is silent"
                                      in app.header_text(time.time()))[1],
                             timeout=30, message="the quiet said to be the fleet's")
            assert "broker hung?" not in app.header_text(time.time())
            # Answering its pings, the broker never makes the console blind (the answer
            # comes about once a keepalive: a review saw it a tick late).
            until = time.monotonic() + 1.6 * app.session.feed.keepalive
            while time.monotonic() < until:
                app.tick()
                assert app.state.blind is None
                await asyncio.sleep(0.25)


async def test_a_broker_that_stops_answering_is_the_consoles_blindness_not_the_fleets(mosquitto):
    """Under SIGSTOP the link stays up for twice the keepalive: every node read stale and "8
    racks fell silent: the network between the fleet and the broker" (a drill). Once the
    broker has not answered the keepalive's ping either, the console is blind from its last
    word, as with a lost link."""
    async with console_of_two_agents(mosquitto) as (app, hang):
        hang(True)
        keepalive = app.session.feed.keepalive
        await eventually(lambda: (app.tick(), app.state.blind is not None)[1],
                         timeout=2 * keepalive, message="blind while the broker is mute")
        assert "has not answered" in app.state.blind_why
        app.tick()
        assert not any(st.stale for st in app.state.nodes.values())
        # The link is up: the top problems said "this console lost its broker connection"
        # under a header saying "connected, nothing heard for 19 s (broker hung?)".
        assert app.session.feed.conn.state == "connected"
        said = str(app.screen.query_one("#problems").render())
        assert "its broker answers nothing, not even a ping: hung?" in said, said
        assert "lost its broker connection" not in said, said
        lost = [ln.text for ln in app.session.log.lines() if ln.kind == "connection"]
        assert lost and "(hung?)" in lost[-1], lost
        # Nor does the timeline say the connection was lost: the link is up (a review).
        assert "connection lost" not in lost[-1] and "its link still up" in lost[-1], lost
        hang(False)
        await eventually(lambda: (app.tick(), app.state.blind is None
                                  or app.state.blind[1] is not None)[1],
                         timeout=30, message="sight regained")
        back = [ln.text for ln in app.session.log.lines() if ln.kind == "connection"]
        # The same link, resumed before gmqtt gave up on it: not a connection back.
        assert app.session.feed.conn.connects == 1
        assert back[-1].startswith("the broker answers again after "), back


async def test_a_dead_agent_alone_on_a_quiet_broker_still_reads_stale_on_time(mosquitto):
    """A node's silence counts only up to the broker's last word: on a one-node cluster whose
    agent died, that word is the answer to the console's own ping. Without the ping (gmqtt
    pings at 0.8 of the keepalive only), the node read stale 10 s after its last sample,
    not 1.5 s (three of its 0.5 s intervals)."""
    stop = asyncio.Event()
    agent = NodeAgent(cluster="solo", node_id="gpu0001", source=SimNode("gpu0001"),
                      url=mosquitto.url, interval_s=0.5, phase_s=0.0)
    task = asyncio.create_task(agent.run(stop))
    app = FleetdeckApp(cluster="solo", url=mosquitto.url, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    try:
        async with app.run_test(size=(160, 48)):
            await eventually(lambda: (app.tick(), "gpu0001" in app.state.nodes
                                      and app.state.nodes["gpu0001"].online is True)[1],
                             timeout=20, message="gpu0001 online")
            task.cancel()  # dead, no goodbye: its will waits for the broker's keepalive
            await asyncio.gather(task, return_exceptions=True)
            t0 = time.monotonic()
            await eventually(lambda: (app.tick(),
                                      app.state.nodes["gpu0001"].verdict.value == "stale")[1],
                             timeout=4, interval=0.25, message="stale within 4 s")
            assert time.monotonic() - t0 < 4
    finally:
        stop.set()
        task.cancel()
