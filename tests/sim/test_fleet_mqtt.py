"""The simulated fleet against a real Mosquitto: job status, restart_job acks, runtime injection,
and agent death through the broker's Last Will while the job keeps stepping."""

import asyncio
import time

from fleetdeck.agents.fleet import Fleet, FleetOptions, inject
from fleetdeck.agents.sim.scenario import parse_scenario
from fleetdeck.brokerurl import make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Ack, Command, CommandOp, JobStatus, SchedulerStatus, Status
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually

SCENARIO = parse_scenario({"job": [{"name": "train", "nodes": 3, "steps": 100_000,
                                    "checkpoint_every": 5, "step_time": 0.5}]})


async def test_fleet_over_mosquitto(mosquitto):
    url = mosquitto.url
    opts = FleetOptions(cluster="simt", nodes=4, interval_s=0.25, keepalive=5, seed=3,
                        scenario=SCENARIO)
    fleet = Fleet(url, opts)
    stop = asyncio.Event()
    runner = asyncio.create_task(fleet.run(stop))
    jobs: dict[str, JobStatus] = {}
    acks: list[Ack] = []
    status: dict[str, Status] = {}
    watcher = make_client(url, "watcher")
    try:
        async with watcher:
            await watcher.subscribe("fleetdeck/v1/simt/#", qos=1)

            async def pump() -> None:
                async for m in watcher.messages:
                    topic, payload = str(m.topic), m.payload
                    assert isinstance(payload, bytes)
                    if topic.endswith("/status") and "/job/" in topic:
                        st = codec.decode(JobStatus, payload)
                        jobs[st.job_id] = st
                    elif topic.endswith("/sched/ack"):
                        acks.append(codec.decode(Ack, payload))
                    elif topic.endswith("/status") and "/node/" in topic:
                        s = codec.decode(Status, payload)
                        status[s.node] = s

            reader = asyncio.create_task(pump())
            await fleet.wait_connected(20)
            await eventually(lambda: any(j.state.value == "R" and j.step >= 2
                                         for j in jobs.values()), 20, message="job running")
            job_id = next(iter(jobs))
            assert jobs[job_id].nodes == ["gpu0001", "gpu0002", "gpu0003"]

            now = int(time.time() * 1000)
            cmd = Command(cmd_id="r1", op=CommandOp.RESTART_JOB, target=job_id, issued_by="t",
                          issued_at=now, expires_at=now + 60_000)
            await watcher.publish(topic_for("simt", Kind.SCHED_CMD), codec.encode(cmd), qos=1)
            await eventually(lambda: [a.result.value for a in acks if a.cmd_id == "r1"]
                             == ["accepted", "done"], 20, message="restart acks")
            assert jobs[job_id].requeues == 1

            ok, detail = await inject(url, "simt", {"fault": "agent_death", "node": "gpu0002"})
            assert ok and "gpu0002" in detail
            await eventually(lambda: status.get("gpu0002") is not None
                             and status["gpu0002"].online is False, 15, message="will fired")
            step = jobs[job_id].step
            await eventually(lambda: jobs[job_id].step >= step + 3, 15, message="job continues")
            assert jobs[job_id].state.value == "R" and "gpu0002" in jobs[job_id].nodes

            ok, detail = await inject(url, "simt", {"fault": "xid79", "node": "gpu0099"})
            assert not ok and "no node" in detail

            ok, _ = await inject(url, "simt", {"fault": "agent_restart", "node": "gpu0002"})
            assert ok
            await eventually(lambda: status["gpu0002"].online is True, 15, message="back")
            # A live agent restarts too: a new session (it printed "injected" and did nothing).
            session = status["gpu0002"].bdSeq
            ok, _ = await inject(url, "simt", {"fault": "agent_restart", "node": "gpu0002"})
            assert ok
            await eventually(lambda: status["gpu0002"].online is True
                             and status["gpu0002"].bdSeq > session, 15, message="restarted")
            reader.cancel()
    finally:
        stop.set()
        await asyncio.wait_for(runner, 20)


async def test_a_kill_start_kill_in_one_step_leaves_the_agent_dead(mosquitto):
    """A node's agent ops of one step run as what the last one leaves: run one by one, a
    kill, start, kill left the agent running (the second kill ran before the restart's
    start: a review)."""
    from fleetdeck.agents.sim.world import AgentOp

    opts = FleetOptions(cluster="kks", nodes=2, interval_s=0.25, keepalive=5, seed=3)
    fleet = Fleet(mosquitto.url, opts)
    stop = asyncio.Event()
    runner = asyncio.create_task(fleet.run(stop))
    try:
        await fleet.wait_connected(20)
        ops = fleet.world.agent_ops
        ops += [AgentOp("kill", "gpu0001"), AgentOp("start", "gpu0001"),
                AgentOp("kill", "gpu0001"), AgentOp("kill", "gpu0002"),
                AgentOp("start", "gpu0002")]
        await eventually(lambda: fleet.world.agent_ops is not ops and not fleet._kills, 15,
                         message="ops taken and done")
        await asyncio.sleep(0.5)
        assert "gpu0001" not in fleet._tasks  # killed, not restarted
        assert "gpu0002" in fleet._tasks and not fleet._tasks["gpu0002"].done()  # restarted
    finally:
        stop.set()
        await asyncio.wait_for(runner, 20)


async def test_a_flapped_port_still_reads_failed_after_its_agent_restarts(mosquitto):
    """Two flaps, then an agent restart: a one-shot status (which sees only what the agent
    counted) read the node healthy, its hour forgotten. The next agent of the node takes the
    windows its predecessor saved (the simulator's in-memory state directory)."""
    import json

    from tests.conftest import run_cli

    url = mosquitto.url
    fleet = Fleet(url, FleetOptions(cluster="keepw", nodes=2, interval_s=0.25, keepalive=5,
                                    seed=3))
    stop = asyncio.Event()
    runner = asyncio.create_task(fleet.run(stop))

    def status() -> dict:
        out = run_cli("status", "--json", "--broker", str(url), "--cluster", "keepw",
                      "--wait", "1.5")
        return {n["id"]: n for n in json.loads(out.stdout)["nodes"]}

    try:
        await fleet.wait_connected(20)
        ok, _ = await inject(url, "keepw", {"fault": "ib_flap", "node": "gpu0001", "port": "3",
                                            "count": "2", "down": "0.5", "every": "1"})
        assert ok
        await asyncio.sleep(3.5)  # both flaps over, the link up again
        before = await asyncio.to_thread(status)
        assert before["gpu0001"]["verdict"] == "failed", before["gpu0001"]
        old = fleet.agents["gpu0001"]
        ok, _ = await inject(url, "keepw", {"fault": "agent_restart", "node": "gpu0001"})
        assert ok
        await eventually(lambda: fleet.agents.get("gpu0001") not in (None, old)
                         and fleet.agents["gpu0001"].connected.is_set(), 15,
                         message="the restarted agent")
        after = await asyncio.to_thread(status)
        assert after["gpu0001"]["verdict"] == "failed", after["gpu0001"]
        assert any(f.startswith("N2 mlx5_ib3:1") for f in after["gpu0001"]["findings"])
        assert after["gpu0002"]["verdict"] == "ok"
    finally:
        stop.set()
        await asyncio.wait_for(runner, 20)


async def test_job_statuses_sent_again_after_a_broker_restart_keep_their_time(mosquitto):
    """The scheduler sends every job status again when it reconnects (a broker that lost its
    retained ones), as it was: stamped afresh, a job hung since 00:47 read "no step since
    00:56", the broker's restart, to a console judging by the scheduler's clock."""
    url = mosquitto.url
    fleet = Fleet(url, FleetOptions(cluster="rets", nodes=4, interval_s=0.25, keepalive=5,
                                    seed=3, scenario=SCENARIO))
    stop = asyncio.Event()
    runner = asyncio.create_task(fleet.run(stop))

    async def retained() -> JobStatus:
        async with make_client(url, f"rets-{time.monotonic_ns()}") as c:
            await c.subscribe(topic_for("rets", Kind.JOB, "+"), qos=1)
            async for m in c.messages:
                assert isinstance(m.payload, bytes)
                return codec.decode(JobStatus, m.payload)
        raise AssertionError("no job status")

    try:
        await fleet.wait_connected(20)
        await eventually(lambda: any(j.step >= 2 for j in fleet.world.scheduler.jobs.values()),
                         20, message="the job stepping")
        (job_id,) = fleet.world.scheduler.jobs
        ok, _ = await inject(url, "rets", {"fault": "job_hang", "job": job_id})
        assert ok
        await asyncio.sleep(1.5)  # its last status out: the step stopped moving
        before = await asyncio.wait_for(retained(), 10)
        await asyncio.sleep(1.0)
        mosquitto.restart()  # no persistence: the retained statuses are gone
        await eventually(fleet.sched_connected.is_set, 30, message="scheduler back")
        after = await asyncio.wait_for(retained(), 20)
        assert after.step == before.step and after.ts == before.ts, (before.ts, after.ts)
    finally:
        stop.set()
        await asyncio.wait_for(runner, 20)


async def test_another_process_s_late_will_is_answered_with_its_birth(mosquitto):
    """A bridge failed over to another host (another client id): the old connection's will
    came when its keepalive ran out, after the new birth, and stayed retained: `status`,
    reading it, said "scheduler offline" while a console that heard both said online (a
    review). The scheduler answers a word on ``sched/status`` not its birth with its birth."""
    url = mosquitto.url
    fleet = Fleet(url, FleetOptions(cluster="late", nodes=2, interval_s=0.25, keepalive=5,
                                    seed=3, scenario=SCENARIO))
    stop = asyncio.Event()
    runner = asyncio.create_task(fleet.run(stop))
    presence = topic_for("late", Kind.SCHED_STATUS)

    async def retained() -> SchedulerStatus:
        async with make_client(url, f"late-{time.monotonic_ns()}") as c:
            await c.subscribe(presence, qos=1)
            async for m in c.messages:
                assert isinstance(m.payload, bytes)
                return codec.decode(SchedulerStatus, m.payload)
        raise AssertionError("no scheduler status")

    try:
        await fleet.wait_connected(20)
        mine = await asyncio.wait_for(retained(), 10)
        assert mine.online
        now = int(time.time() * 1000)
        old_will = SchedulerStatus(online=False, started=now - 600_000, name="sim", ts=now - 5)
        async with make_client(url, "late-old-host") as old:
            await old.publish(presence, codec.encode(old_will), qos=1, retain=True)
        deadline = time.monotonic() + 10
        while True:
            said = await asyncio.wait_for(retained(), 10)
            if said.online and said.started == mine.started:
                break
            assert time.monotonic() < deadline, f"the old process's will stays: {said}"
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.wait_for(runner, 20)
