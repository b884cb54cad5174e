"""Failure drill: a graceful broker restart (SIGTERM, as ``systemctl restart mosquitto`` does)
makes Mosquitto send the Last Will of every client it disconnects, and the console receives
those of the clients dropped before it: ``online: false`` for nodes that never went down. Before
this was handled, each restart recorded a few nodes ``ok -> offline`` and back a few seconds
later (found in a drill, 2026-12-04: 3 of 64)."""

import asyncio
import uuid

import pytest

from fleetdeck.console.session import ConsoleSession
from tests.conftest import eventually, spawn, stop_process

CLUSTER = "wills"
NODES = 48
RESTARTS = 4


@pytest.mark.timeout(240)
async def test_a_graceful_broker_restart_records_no_node_offline(mosquitto, tmp_path):
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes",
                str(NODES), "--interval", "1.0", log=tmp_path / "sim.log")
    session = ConsoleSession(CLUSTER, url=mosquitto.url, operator="wills-test",
                             client_id=f"wills-{uuid.uuid4().hex[:6]}")
    state = session.state
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))

    def all_ok(since: float = 0.0) -> bool:
        feed = session.feed
        return (feed is not None and feed.conn.state == "connected"
                and sum(st.verdict.value == "ok" and (st.last_rx or 0.0) > since
                        for st in state.nodes.values()) == NODES)

    try:
        await eventually(all_ok, 30, message="fleet up")
        for _ in range(RESTARTS):
            restarted = session.clock()
            await asyncio.to_thread(mosquitto.restart)  # SIGTERM, then the same port again
            await eventually(lambda t=restarted: all_ok(t), 60,  # type: ignore[misc]
                             message="every node heard again after a broker restart")
            # A few ticks with everyone back: a will held back would be reported by now.
            await asyncio.sleep(2.5)
            if state.shutdown_wills:
                break
    finally:
        stop.set()
        await watcher
        stop_process(sim)
    # The drill happened: the broker's wills reached this console before its own goodbye.
    assert state.shutdown_wills > 0, "no will arrived: the drill proved nothing"
    offline = [line.text for _n, line in session.log
               if line.kind == "verdict" and "offline" in line.text]
    assert offline == [], offline
