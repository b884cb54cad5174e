"""Simulated agents on the fleet's telemetry clock (agents/sim/clock.py) against a real
Mosquitto: telemetry at 1/interval per node, and what follows a sample on NodeAgent's loop
still happens on the clock's: events go out (QoS 1), a drain of a busy node reports DRAINING
and, once the job left, DRAINED with its DONE ack; resume returns it to service."""

import asyncio
import time
import uuid

from fleetdeck.agents.fleet import Fleet, FleetOptions
from fleetdeck.agents.sim.scenario import parse_scenario
from fleetdeck.brokerurl import make_client
from fleetdeck.protocol.messages import (
    AckResult,
    Command,
    CommandArgs,
    CommandOp,
    DrainState,
)
from fleetdeck.protocol.topics import Kind, topic_for
from tests.agent_tap import Tap, send
from tests.conftest import eventually

CLUSTER = "clocked"
SCENARIO = parse_scenario({"job": [{"name": "short", "nodes": 1, "steps": 12,
                                    "checkpoint_every": 5, "step_time": 0.25}]})


def cmd(op: CommandOp, target: str, reason: str = "") -> Command:
    now = int(time.time() * 1000)
    return Command(cmd_id=f"{op.value}-{uuid.uuid4().hex[:8]}", op=op, target=target,
                   args=CommandArgs(reason=reason), issued_by="tester", issued_at=now,
                   expires_at=now + 60_000)


async def test_drain_and_resume_on_the_telemetry_clock(mosquitto):
    url = mosquitto.url
    fleet = Fleet(url, FleetOptions(cluster=CLUSTER, nodes=3, interval_s=0.2, keepalive=5,
                                    seed=2, scenario=SCENARIO))
    stop = asyncio.Event()
    telemetry: dict[str, int] = {}
    async with Tap(url, CLUSTER) as tap:
        counter = make_client(url, "counter")
        async with counter:
            await counter.subscribe(topic_for(CLUSTER, Kind.TELEMETRY, "+"), qos=0)

            async def count() -> None:
                async for m in counter.messages:
                    node = str(m.topic).split("/")[-2]
                    telemetry[node] = telemetry.get(node, 0) + 1

            counting = asyncio.create_task(count())
            runner = asyncio.create_task(fleet.run(stop))
            try:
                await fleet.wait_connected(20)
                await eventually(lambda: any(node.busy() for node in fleet.nodes.values()),
                                 10, message="the job placed")
                busy = next(n for n, node in fleet.nodes.items() if node.busy())
                t0 = dict(telemetry)
                fired = fleet.telemetry_clock.fired
                # Samples keep coming for every node, each one published from the clock (~5 a
                # second; its schedule is tests/sim/test_telemetry_clock.py's, on virtual time:
                # a count in a wall-clock second was a guess a loaded machine can starve).
                await eventually(lambda: all(telemetry.get(n, 0) - t0.get(n, 0) >= 3
                                             for n in fleet.nodes), 30,
                                 message="3 more samples of every node")
                assert fleet.telemetry_clock.fired - fired >= 9
                assert len(fleet.telemetry_clock) == 3

                drain = cmd(CommandOp.DRAIN, busy, reason="clock test")
                await send(url, CLUSTER, drain)
                await tap.until(lambda: any(a.result is AckResult.ACCEPTED
                                            for a in tap.acks(drain.cmd_id)),
                                message="drain accepted")
                await tap.until(lambda: any(s.drain.state is DrainState.DRAINING
                                            for s in tap.statuses(busy)),
                                message="DRAINING status (the job still runs)")
                # The job ends (12 steps of 0.25 s); the clock's sample after that drains it.
                await tap.until(lambda: any(a.result is AckResult.DONE
                                            for a in tap.acks(drain.cmd_id)), 20,
                                message="DRAINED after the job left")
                assert tap.statuses(busy)[-1].drain.state is DrainState.DRAINED

                def drain_events() -> list[str]:
                    return [e.message for e in tap.of(Kind.EVENT, busy) if e.kind == "drain"]

                # The "drained" event goes out with the next sample's flush, as on NodeAgent's
                # loop.
                await tap.until(lambda: any(m.startswith("drained") for m in drain_events()),
                                message="the drained event")
                assert any(m.startswith("draining") for m in drain_events())
                before = telemetry[busy]
                await eventually(lambda: telemetry[busy] > before, 30,
                                 message="a drained node still reports")

                resume = cmd(CommandOp.RESUME, busy)
                await send(url, CLUSTER, resume)
                await tap.until(lambda: any(a.result is AckResult.DONE
                                            for a in tap.acks(resume.cmd_id)),
                                message="resumed")
                assert tap.statuses(busy)[-1].drain.state is DrainState.NONE
            finally:
                stop.set()
                await asyncio.wait_for(runner, 30)
                counting.cancel()
    # Every agent said offline on the way out and left the clock.
    assert len(fleet.telemetry_clock) == 0
    assert all(not s.online for s in
               (tap.statuses(n)[-1] for n in fleet.nodes))
