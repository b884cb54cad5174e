"""Failure drill: the broker is SIGKILLed and restarted 10 times while a simulated fleet runs
and a console drains and resumes nodes. Nothing is lost: every command ends DONE (retries with
the same id, acks from the agent's memory), every event arrives once (outbox + resend), every
node comes back by itself, and the telemetry gaps are visible."""

import asyncio
import random
import time
import uuid

from fleetdeck.console.commands import CommandTracker, Phase
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState
from tests.conftest import eventually, spawn, stop_process

CLUSTER = "chaos"
NODES = [f"gpu{i:04d}" for i in range(1, 9)]
KILLS = 10


async def test_ten_broker_kills_lose_no_command_or_event(mosquitto, tmp_path):
    rng = random.Random(7)
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes",
                str(len(NODES)), "--interval", "0.5", "--keepalive", "2",
                log=tmp_path / "sim.log")
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)
    feed = LiveFeed(mosquitto.url, ingest, client_id=f"chaos-{uuid.uuid4().hex[:6]}")
    tracker = CommandTracker(CLUSTER, "chaos-test", ack_timeout_s=60, effect_timeout_s=60)
    stop = asyncio.Event()
    requests = []
    acks_seen: list = []
    statuses_seen: dict[str, list] = {}

    async def console() -> None:
        while not stop.is_set():
            now = time.time()
            batch = ingest.take_batch()
            acks_seen.extend(a for _rx, a in batch.acks)
            for node, (_rx, status) in batch.statuses.items():
                statuses_seen.setdefault(node, []).append(
                    (status.bdSeq % 100000, status.drain.state.value, status.drain.cmd_id[-6:]))
            state.apply(batch, now)
            tracker.observe(state, [a for _rx, a in batch.acks], now)
            if feed.client is not None:
                try:
                    for kind, subject, cmd, progress in tracker.due_for_retry(now):
                        await feed.send_command(kind, subject, cmd)
                        progress.sent_at = now
                    await feed.request_resends(state.missing_events(now, retry_s=2.0), "chaos")
                except Exception:
                    pass
            await asyncio.sleep(0.1)

    async def send(req) -> None:
        for (kind, subject, cmd), progress in zip(req.commands(), req.targets, strict=True):
            try:
                await feed.send_command(kind, subject, cmd)
                progress.sent_at = time.time()
            except Exception:
                progress.sent_at = time.time()

    tasks = [asyncio.create_task(feed.run(stop)), asyncio.create_task(console())]
    try:
        await eventually(lambda: sum(n.verdict.value == "ok" for n in state.nodes.values())
                         == len(NODES), 30, message="fleet up")
        drained: set[str] = set()
        for i in range(KILLS):
            node = NODES[i % len(NODES)]
            if node in drained:
                req = tracker.resume([node], time.time())
                drained.discard(node)
            else:
                req = tracker.drain([node], f"chaos round {i}", time.time())
                drained.add(node)
            requests.append(req)
            await send(req)
            await asyncio.sleep(rng.uniform(0.0, 0.3))  # kill before or after the ack
            mosquitto.kill()
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            mosquitto.start()
            await eventually(lambda: feed.conn.state == "connected", 30, message="reconnect")
        try:
            await eventually(lambda: all(r.phase is Phase.DONE for r in requests), 60,
                             message="every command done")
        except AssertionError:
            stuck = [r for r in requests if r.phase is not Phase.DONE]
            lines = [r.describe() for r in requests]
            for r in stuck:
                for t in r.targets:
                    acks = [a.result.value for a in acks_seen if a.cmd_id == t.cmd.cmd_id]
                    lines.append(f"{t.target}: now {state.nodes[t.target].drain}; acks {acks}"
                                 f"; statuses {statuses_seen.get(t.target)}")
            raise AssertionError("\n".join(lines)) from None
        all_done = time.time()

        def caught_up() -> bool:
            # Telemetry sampled after the last command tells how many events each agent made.
            return all(st.verdict.value == "ok" and st.telemetry is not None
                       and st.telemetry.ts / 1000 > all_done + 0.5
                       and st.event_seq == st.telemetry.agent.event_seq
                       for st in state.nodes.values())

        await eventually(caught_up, 60, message="all nodes back with every event")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        stop_process(sim)
    assert [r.phase for r in requests] == [Phase.DONE] * KILLS
    for node in NODES:
        st = state.nodes[node]
        seqs = [e.seq for e in st.events if e.event_id.startswith(st.event_prefix)]
        assert seqs == sorted(set(seqs)) == list(range(1, len(seqs) + 1)), node
    drains = [e for e in state.events if e.kind == "drain"]
    assert len(drains) == KILLS  # one event per executed command: none lost, none twice
    assert sum(st.seq_gaps for st in state.nodes.values()) > 0, "telemetry gaps are visible"
    assert feed.conn.connects >= KILLS + 1
