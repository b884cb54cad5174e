"""The console against real node agents over a real Mosquitto: drain with a reason, see DRAINED."""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.brokerurl import make_client
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.commands import Phase
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.modals import DrainScreen
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState, JobStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually


async def test_drain_via_ui_against_real_agents(mosquitto):
    stop = asyncio.Event()
    agents = [NodeAgent(cluster="live", node_id=f"gpu{i:04d}", source=SimNode(f"gpu{i:04d}"),
                        url=mosquitto.url, interval_s=0.2, phase_s=0.0) for i in (1, 2, 3)]
    tasks = [asyncio.create_task(a.run(stop)) for a in agents]
    audit = MemoryAudit()
    app = FleetdeckApp(cluster="live", url=mosquitto.url, auto_tick=False, audit=audit,
                       operator="dave")
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await eventually(lambda: (app.tick(), len(app.state.nodes) == 3)[1], timeout=15,
                             message="three nodes")
            app.request_drain(["gpu0002"])
            await pilot.pause()
            assert isinstance(app.screen, DrainScreen)
            await pilot.press(*"NVLink errors", "enter")
            await pilot.pause()
            req = next(iter(app.tracker.requests.values()))
            await eventually(lambda: (app.tick(), req.phase is Phase.DONE)[1], timeout=15,
                             message="DRAINED observed")
            st = app.state.nodes["gpu0002"]
            assert st.drain.reason == "NVLink errors" and st.drain.requested_by == "dave"
            assert [r.outcome for r in audit.records] == ["requested", "done"]
            # a node that is gone: the command times out
            app.tracker.ack_timeout_s = 1.0
            app.send(app.tracker.resume(["gpu9999"], app.clock()))
            req2 = list(app.tracker.requests.values())[-1]
            await eventually(lambda: (app.tick(), req2.phase is Phase.TIMED_OUT)[1],
                             timeout=10, message="time-out")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def watching(client, topic: str, into: list[object]) -> AsyncIterator[None]:
    """Every message on ``topic`` goes into ``into`` while the block runs."""
    await client.subscribe(topic, qos=1)

    async def collect() -> None:
        async for message in client.messages:
            into.append(message.payload)

    task = asyncio.create_task(collect())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_commands_refused_in_the_console_are_audited(mosquitto):
    """An unknown node, a bad host list or a job the console does not know: nothing is sent,
    the operator is told, and the attempt is in the audit trail as ``refused`` with why."""
    stop = asyncio.Event()
    agent = NodeAgent(cluster="live", node_id="gpu0001", source=SimNode("gpu0001"),
                      url=mosquitto.url, interval_s=0.2, phase_s=0.0)
    task = asyncio.create_task(agent.run(stop))
    audit = MemoryAudit()
    app = FleetdeckApp(cluster="live", url=mosquitto.url, auto_tick=False, audit=audit,
                       operator="erin")
    sched_cmds: list[object] = []
    try:
        async with (make_client(mosquitto.url, "sched-cmd-watch") as watch,
                    watching(watch, topic_for("live", Kind.SCHED_CMD), sched_cmds),
                    app.run_test(size=(160, 48)) as pilot):
            await eventually(lambda: (app.tick(), "gpu0001" in app.state.nodes)[1], timeout=15,
                             message="the node")
            app.run_command_line(":drain gpu9999")
            app.run_command_line(":resume gpu[0001-")
            app.run_command_line(":restart 4102")
            await pilot.pause()
            # The scheduler is heard from (a retained job status): a job it never published
            # is unknown, and refused as an unknown node is.
            await watch.publish(topic_for("live", Kind.JOB, "41"), codec.encode(JobStatus(
                job_id="41", state=JobState.R, nodes=["gpu0001"],
                ts=int(time.time() * 1000))), qos=1, retain=True)
            await eventually(lambda: (app.tick(), "41" in app.state.jobs)[1], timeout=10,
                             message="the job's retained status")
            app.run_command_line(":restart 999")
            await pilot.pause()
            assert not isinstance(app.screen, DrainScreen)
            assert not app.tracker.requests
            assert [(r.outcome, r.what, r.targets, r.who) for r in audit.records] == [
                ("refused", "drain", "gpu9999", "erin"),
                ("refused", "resume", "gpu[0001-", "erin"),
                ("refused", "restart_job", "job 4102", "erin"),
                ("refused", "restart_job", "job 999", "erin")]
            assert audit.records[0].detail == "unknown node(s) gpu9999"
            assert audit.records[1].detail.startswith("bad hostlist")
            assert audit.records[2].detail == ("job 4102 cannot be checked: nothing heard from "
                                               "the scheduler on cluster 'live' yet, not one "
                                               "job status")
            assert audit.records[3].detail == ("unknown job 999: the scheduler has published "
                                               "no such job on cluster 'live'")
            notes = [str(n.message) for n in app._notifications]
            assert any(n.startswith("unknown job 999: the scheduler") for n in notes), notes
            lines = [line.text for _seq, line in app.session.log if line.kind == "command"]
            assert "erin: drain gpu9999 refused: unknown node(s) gpu9999" in lines
            assert ("erin: restart job 999 refused: unknown job 999: the scheduler has "
                    "published no such job on cluster 'live'") in lines
            await asyncio.sleep(0.5)
            assert sched_cmds == []  # nothing was sent to the scheduler
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
