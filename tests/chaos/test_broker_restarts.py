"""Failure drill: the broker is SIGKILLed and restarted 10 times while a simulated fleet runs
and a console drains and resumes nodes. Nothing is lost: every command ends DONE (retries with
the same id, acks from the agent's memory), every event arrives once (outbox + resend), every
node comes back by itself, and the telemetry gaps are visible."""

import asyncio
import random
import time
import uuid

import pytest

from fleetdeck.console.commands import Phase
from fleetdeck.console.session import ConsoleSession
from tests.conftest import eventually, spawn, stop_process

CLUSTER = "chaos"
NODES = [f"gpu{i:04d}" for i in range(1, 65)]
COMMANDED = NODES[:8]
"""Nodes that drains and resumes go to; all 64 must recover after every restart."""
RECOVERY_S = 10.0
"""From broker start to every node publishing again. The agents' jittered backoff (0.5-1, 1-2,
2-4 s for attempts 1-3) can put the third attempt ~7 s after a kill when the broker is slow to
come back on a loaded machine, plus one 1 s telemetry interval: 10 s holds that, and still fails
the defect it guards (a backoff never reset between outages waited 15-30 s, docs/reliability.md).
"""
KILLS = 10


@pytest.mark.timeout(300)
async def test_ten_broker_kills_lose_no_command_or_event(mosquitto, tmp_path):
    rng = random.Random(7)
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes",
                str(len(NODES)), "--interval", "1.0", "--keepalive", "2",
                log=tmp_path / "sim.log")
    # The shipped console core, not a loop of the test's own: ticks, retries, re-send asks.
    session = ConsoleSession(CLUSTER, url=mosquitto.url, operator="chaos-test",
                             ack_timeout_s=60, effect_timeout_s=60,
                             client_id=f"chaos-{uuid.uuid4().hex[:6]}")
    state = lambda: session.state  # noqa: E731
    feed = session.feed
    assert feed is not None
    stop = asyncio.Event()
    requests = []
    recovery: list[float] = []
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))
    try:
        await eventually(lambda: sum(n.verdict.value == "ok" for n in state().nodes.values())
                         == len(NODES), 30, message="fleet up")
        drained: set[str] = set()
        for i in range(KILLS):
            node = COMMANDED[i % len(COMMANDED)]
            if node in drained:
                req = session.resume([node])
                drained.discard(node)
            else:
                req = session.drain([node], f"chaos round {i}")
                drained.add(node)
            requests.append(req)
            await asyncio.sleep(rng.uniform(0.0, 0.3))  # kill before or after the ack
            mosquitto.kill()
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            mosquitto.start()
            back = time.time()
            await eventually(lambda: feed.conn.state == "connected", 30, message="reconnect")
            # Recovered: every node's telemetry flows again through the broker.
            await eventually(lambda back=back: all(st.last_rx is not None and st.last_rx > back
                                                   for st in state().nodes.values()), 60,
                             message="every node publishing again")
            recovery.append(time.time() - back)
        try:
            await eventually(lambda: all(r.phase is Phase.DONE for r in requests), 60,
                             message="every command done")
        except AssertionError:
            lines = [r.describe() for r in requests]
            for r in requests:
                for t in r.targets:
                    if t.phase is not Phase.DONE:
                        acks = [a.result.value for a in state().acks
                                if a.cmd_id == t.cmd.cmd_id]
                        lines.append(f"{t.target}: now {state().nodes[t.target].drain}; "
                                     f"acks {acks}")
            raise AssertionError("\n".join(lines)) from None
        all_done = time.time()

        def caught_up() -> bool:
            # Telemetry sampled after the last command tells how many events each agent made.
            return all(st.verdict.value == "ok" and st.telemetry is not None
                       and st.telemetry.ts / 1000 > all_done + 0.5
                       and st.event_seq == st.telemetry.agent.event_seq
                       for st in state().nodes.values())

        await eventually(caught_up, 60, message="all nodes back with every event")
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)
        stop_process(sim)
    print("recovery after each broker restart (s):", [round(r, 2) for r in recovery])
    assert max(recovery) <= RECOVERY_S, recovery
    assert [r.phase for r in requests] == [Phase.DONE] * KILLS
    for node in COMMANDED:
        st = state().nodes[node]
        seqs = [e.seq for e in st.events if e.event_id.startswith(st.event_prefix)]
        assert seqs == sorted(set(seqs)) == list(range(1, len(seqs) + 1)), node
    drains = [e for e in state().events if e.kind == "drain"]
    assert len(drains) == KILLS  # one event per executed command: none lost, none twice
    assert sum(st.seq_gaps for st in state().nodes.values()) > 0, "telemetry gaps are visible"
    assert feed.conn.connects >= KILLS + 1
    assert session.counters.events_lost == 0
